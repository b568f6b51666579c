"""Shared bits of the cases.md tests: the crawler UA, host names, small helpers.

Every case test crawls a loopback test web (:class:`tests.integration.site.Site` or
:class:`tests.integration.rawserver.RawServer`) through the real crawler; host names are
mapped to 127.0.0.1 with the ``resolve`` setting and ``resolve_only``, so nothing leaves
the machine. Absolute URLs carry the test server's port (it cannot listen on 80).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from tests.integration.rawserver import RawServer
from tests.integration.site import CrawlResult, Handler, Site, crawl

#: The crawler User-Agent of cases.md; its robots.txt product token is "testcrawler".
CASE_UA = "Mozilla/5.0 (compatible; TestCrawler/1.0; +https://www.example.test/bot)"
WWW = "www.example.test"


def page(body: str = "<p>ok</p>") -> Handler:
    """A 200 text/html handler whose body names the path it answered."""

    async def h(request: web.Request) -> web.StreamResponse:
        return web.Response(
            text=f"<!doctype html><html><body>{body}<!-- {request.path_qs} --></body></html>",
            content_type="text/html",
        )

    return h


async def run(server: Site | RawServer, out: Path, seeds: list[str], **kw: Any) -> CrawlResult:
    """Crawl with the case defaults (cases.md UA, no delay, few retries) to completion."""
    kw.setdefault("fetch_user_agent", CASE_UA)
    kw.setdefault("pol_retries", 1)
    kw.setdefault("pol_robots_retry_s", 0.2)
    return await crawl(server, out, seeds, **kw)


def requested(site: Site, host: str) -> list[str]:
    """Paths (with query) requested on ``host``, robots.txt excluded, in order."""
    return [p for p in site.paths(host) if p != "/robots.txt"]


def decisions(res: CrawlResult, source: str | None = None) -> dict[str, str]:
    """links.tsv target -> decision (of the rows from ``source`` if given)."""
    return {r["target"]: r["decision"] for r in res.links if source in (None, r["source"])}
