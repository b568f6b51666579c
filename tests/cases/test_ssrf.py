"""Address safety (SSRF), end to end: a crawl never follows a link or a redirect to a
loopback, private, link-local or multicast address unless ``allow_private`` is set.

The rule (see :mod:`skitter.fetch.resolver`): the address is checked when connecting, on
the resolved IP. Allowed anyway: addresses that ``--resolve`` gives for *that* host:port,
and every address of a seed's host. Another name or an IP literal that happens to lead to
the same private address is refused with ``blocked_address`` -- before any connection.

Tests can only use loopback, so the "public" part is simulated: the seed's name is mapped
with ``--resolve`` (like a public site), and the links point at IP literals or at a name a
fake DNS resolves to 127.0.0.1.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

from skitter.crawler import Crawler
from tests.cases._util import WWW, page
from tests.integration.site import Site, links_page, read_output, redirect, settings_for


def build(site: Site) -> list[str]:
    """The seed page links to private addresses in several spellings; /go redirects to one."""
    port = site.port
    private = [
        f"http://127.0.0.1:{port}/private",
        f"http://0x7f000001:{port}/hex",  # WHATWG: the IPv4 127.0.0.1
        f"http://2130706433:{port}/decimal",  # the same, as one number
        f"http://[::ffff:127.0.0.1]:{port}/mapped",  # IPv4-mapped IPv6
        f"http://[::1]:{port}/v6",
        f"http://evil.example.test:{port}/rebind",  # a name resolving to 127.0.0.1
    ]
    site.route(WWW, "/", links_page(*private, "/go", "/fine"))
    site.route(WWW, "/go", redirect(f"http://127.0.0.1:{port}/via-redirect"))
    site.fallback(WWW, page())
    site.fallback("127.0.0.1", page())
    site.fallback("evil.example.test", page())
    return private


class FakeDNS(AbstractResolver):
    """A DNS that knows one name (evil.example.test -> 127.0.0.1) and sends no query."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host != "evil.example.test":
            raise OSError(f"fake DNS: {host} not found")
        return [
            ResolveResult(
                hostname=host,
                host="127.0.0.1",
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        return None


async def crawl_public_seed(site: Site, out: Path, **kw: Any) -> Any:
    settings = settings_for(
        site,
        out,
        [site.url(WWW, "/")],
        scope_scope="any",
        pol_retries=0,
        pol_robots_retry_s=0.2,
        **kw,
    )
    # only the seed's name is mapped (as --resolve would); the literal and evil are not
    settings.fetch.resolve.pop(("127.0.0.1", site.port), None)
    settings.fetch.resolve.pop(("evil.example.test", site.port), None)
    async with Crawler.from_settings(settings) as crawler:
        resolver = crawler.components.fetcher.resolver
        resolver._delegate = FakeDNS()  # no real DNS query can leave
        resolver._resolve_only = False
        await crawler.run()
    return read_output(out)


async def test_private_addresses_are_blocked_for_public_seeds(site: Site, tmp_path: Path) -> None:
    private = build(site)
    res = await crawl_public_seed(site, tmp_path / "out")
    assert {h.host for h in site.hits} == {WWW}  # no connection to anything else
    for url in private:
        rec = next(r for r in res.records if r["url"].endswith(url.rsplit("/", 1)[1]))
        assert rec["error"] == "blocked_address", (url, rec)
        assert rec["status"] is None and rec["attempts"] == 1
    rec = res.record(site.url(WWW, "/go"))
    assert rec["error"] == "blocked_address"
    assert rec["final_url"] == f"http://127.0.0.1:{site.port}/via-redirect"
    assert rec["redirects"] == [{"url": site.url(WWW, "/go"), "status": 302}]
    assert res.record(site.url(WWW, "/fine"))["status"] == 200
    assert res.report["totals"]["by_error"] == {"blocked_address": len(private) + 1}


async def test_allow_private_lifts_the_block(site: Site, tmp_path: Path) -> None:
    build(site)
    res = await crawl_public_seed(site, tmp_path / "out", fetch_allow_private=True)
    for path in ("/private", "/hex", "/decimal", "/via-redirect"):
        assert path in site.paths("127.0.0.1"), path
    assert [h.path_qs for h in site.hits if h.host == "[::ffff:7f00:1]"] == [
        "/robots.txt",
        "/mapped",
    ]
    assert "/rebind" in site.paths("evil.example.test")
    errors = {r["url"]: r["error"] for r in res.records if r["error"]}
    # [::1] is not listening here: no longer a blocked address, but unreachable
    assert errors == {f"http://[::1]:{site.port}/v6": "robots_unreachable"}


async def test_a_seed_on_a_private_address_is_crawled(site: Site, tmp_path: Path) -> None:
    """Crawling one's own intranet: the seed's host is allowed, whatever it resolves to."""
    site.route("127.0.0.1", "/", links_page("/next"))
    site.route("127.0.0.1", "/next", page())
    out = tmp_path / "out"
    settings = settings_for(site, out, [f"http://127.0.0.1:{site.port}/"])
    settings.fetch.resolve.clear()
    async with Crawler.from_settings(settings) as crawler:
        await crawler.run()
    res = read_output(out)
    assert site.paths("127.0.0.1") == ["/robots.txt", "/", "/next"]
    assert all(r["status"] == 200 for r in res.records)
