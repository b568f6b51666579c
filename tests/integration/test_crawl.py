"""End-to-end crawls of loopback test webs through the library API."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import zlib
from pathlib import Path

from aiohttp import web

from tests.integration.site import Site, crawl, html, links_page, redirect, text
from tests.warc_check import warcio_check

A = "www.example.test"


async def test_small_site_each_page_once_with_all_outputs(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/a.html", "/b.html", "/a.html#frag", "mailto:x@y.test"))
    site.route(A, "/a.html", links_page("/", "/b.html", "/c.html"))
    site.route(A, "/b.html", links_page("/a.html"))
    site.route(A, "/c.html", text(b"%PDF-1.4 binary", content_type="application/pdf"))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")])
    fetched = [p for p in site.paths(A) if p != "/robots.txt"]
    assert sorted(fetched) == ["/", "/a.html", "/b.html", "/c.html"]
    assert site.paths(A).count("/robots.txt") == 1
    urls = {r["url"] for r in res.records}
    assert urls == {site.url(A, p) for p in ("/", "/a.html", "/b.html", "/c.html")}
    rec = res.record(site.url(A, "/c.html"))
    assert rec["status"] == 200 and rec["content_type"] == "application/pdf"
    assert rec["bytes"] == len(b"%PDF-1.4 binary") and rec["depth"] == 2
    assert rec["error"] is None and rec["redirects"] == [] and rec["attempts"] == 1
    assert list(rec) == [
        "url",
        "final_url",
        "status",
        "depth",
        "content_type",
        "bytes",
        "sha1",
        "fetched_at",
        "elapsed_s",
        "attempts",
        "redirects",
        "error",
        "error_detail",
    ]
    root_rows = [r for r in res.links if r["source"] == site.url(A, "/")]
    assert [(r["target"], r["fragment"], r["kind"], r["decision"]) for r in root_rows] == [
        (site.url(A, "/a.html"), "", "a", "queued"),
        (site.url(A, "/b.html"), "", "a", "queued"),
        (site.url(A, "/a.html"), "frag", "a", "seen"),
        ("mailto:x@y.test", "", "a", "scheme"),
    ]
    assert res.report["finished"] is True
    assert res.report["totals"]["by_status"] == {"200": 4}
    assert res.report["totals"]["by_verdict"] == {"ok": 4}
    assert res.report["totals"]["by_depth"] == {"0": 1, "1": 2, "2": 1}
    warcs = list((tmp_path / "out").glob("*.warc.gz"))
    assert warcs
    warcio_check(*warcs)


async def test_user_agent_and_referer_sent(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/next"))
    site.route(A, "/next", html("<p>x</p>"))
    await crawl(site, tmp_path / "out", [site.url(A, "/")], fetch_user_agent="TestBot/2.0 (+x)")
    nxt = next(h for h in site.hits if h.path_qs == "/next")
    assert nxt.headers["User-Agent"] == "TestBot/2.0 (+x)"
    assert nxt.headers["Referer"] == site.url(A, "/")


async def test_robots_disallow_and_crawl_delay(site: Site, tmp_path: Path) -> None:
    site.route(A, "/robots.txt", text("User-agent: *\nDisallow: /private/\nCrawl-delay: 0.4\n"))
    site.route(A, "/", links_page("/private/x", "/p1", "/p2"))
    for p in ("/p1", "/p2", "/private/x"):
        site.route(A, p, html("<p>x</p>"))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")])
    assert "/private/x" not in site.paths(A)
    assert res.report["totals"]["robots_disallowed"] == 1
    assert site.url(A, "/private/x") in res.report["robots"][site.url(A, "")]["disallowed_urls"]
    hits = [h for h in site.hits if h.host == A]
    # Crawl-delay 0.4 s between the end of one request and the start of the next
    for prev, nxt in itertools.pairwise(hits):
        assert nxt.start - prev.end >= 0.4 - 0.02, (prev.path_qs, nxt.path_qs)


async def test_robots_4xx_allows_all_5xx_and_unreachable_disallow(
    site: Site, tmp_path: Path
) -> None:
    site.route("a404.test", "/robots.txt", html("nope", status=404))
    site.route("a403.test", "/robots.txt", html("nope", status=403))
    site.route("a503.test", "/robots.txt", html("<html><body>down</body></html>", status=503))
    for h in ("a404.test", "a403.test", "a503.test"):
        site.route(h, "/page", html("<p>ok</p>"))
    down = "down.test"
    seeds = [site.url(h, "/page") for h in ("a404.test", "a403.test", "a503.test")]
    seeds.append(f"http://{down}:1/page")  # port 1 on loopback: connection refused
    settings_extra = {"pol_robots_retry_s": 0.2, "pol_retries": 1}
    from tests.integration.site import read_output, settings_for

    settings = settings_for(site, tmp_path / "out", seeds, **settings_extra)
    settings.fetch.resolve[(down, 1)] = "127.0.0.1"
    from skitter.crawler import Crawler

    async with Crawler.from_settings(settings) as c:
        await asyncio.wait_for(c.run(), 60)
    res = read_output(tmp_path / "out")
    assert "/page" in site.paths("a404.test") and "/page" in site.paths("a403.test")
    assert "/page" not in site.paths("a503.test")
    assert site.paths("a503.test").count("/robots.txt") == 2  # re-asked after robots_retry_s
    rec = res.record(site.url("a503.test", "/page"))
    assert rec["error"] == "robots_unreachable" and rec["status"] is None
    rec = res.record(f"http://{down}:1/page")
    assert rec["error"] == "robots_unreachable"


async def test_robots_5xx_then_recovers(site: Site, tmp_path: Path) -> None:
    calls = {"n": 0}

    async def robots(request: web.Request) -> web.StreamResponse:
        calls["n"] += 1
        if calls["n"] == 1:
            return web.Response(status=503, text="down")
        return web.Response(text="User-agent: *\nDisallow:\n")

    site.route(A, "/robots.txt", robots)
    site.route(A, "/page", html("<p>ok</p>"))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/page")], pol_robots_retry_s=0.2)
    assert res.record(site.url(A, "/page"))["status"] == 200
    assert res.record(site.url(A, "/page"))["attempts"] == 2


async def test_per_host_delay_and_concurrency_from_server_log(site: Site, tmp_path: Path) -> None:
    pages = [f"/p{i}" for i in range(6)]
    site.route(A, "/", links_page(*pages))
    site.route("b.test", "/", links_page(*pages))

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        return web.Response(text="<p>x</p>", content_type="text/html")

    for p in pages:
        site.route(A, p, slow)
        site.route("b.test", p, slow)
    await crawl(
        site, tmp_path / "out", [site.url(A, "/"), site.url("b.test", "/")], pol_delay_s=0.15
    )
    for host in (A, "b.test"):
        hits = [h for h in site.hits if h.host == host]
        assert len(hits) == 8  # robots + / + 6 pages
        assert site.max_inflight[host] == 1
        for prev, nxt in itertools.pairwise(hits):
            assert nxt.start - prev.end >= 0.15 - 0.02
    # the two hosts were crawled side by side, not one after the other
    a_hits = [h for h in site.hits if h.host == A]
    b_hits = [h for h in site.hits if h.host == "b.test"]
    assert b_hits[1].start < a_hits[-1].start


async def test_host_concurrency_two(site: Site, tmp_path: Path) -> None:
    pages = [f"/p{i}" for i in range(8)]
    site.route(A, "/", links_page(*pages))

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.2)
        return web.Response(text="<p>x</p>", content_type="text/html")

    for p in pages:
        site.route(A, p, slow)
    await crawl(site, tmp_path / "out", [site.url(A, "/")], pol_host_concurrency=2)
    assert site.max_inflight[A] == 2


async def test_redirects_recorded_and_final_url_kept(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/old", "/loop1", "/self", "/offsite"))
    site.route(A, "/old", redirect("/mid", 301))
    site.route(A, "/mid", redirect("/new", 302))
    site.route(A, "/new", html("<p>new</p>"))
    site.route(A, "/loop1", redirect("/loop2"))
    site.route(A, "/loop2", redirect("/loop1"))
    site.route(A, "/offsite", redirect("http://elsewhere.test/x"))
    seen_cookie = {"n": 0}

    async def self_redirect(request: web.Request) -> web.StreamResponse:
        if request.cookies.get("s") == "1":
            return web.Response(text="<p>in</p>", content_type="text/html")
        seen_cookie["n"] += 1
        resp = web.Response(status=302, headers={"Location": "/self"})
        resp.set_cookie("s", "1")
        return resp

    site.route(A, "/self", self_redirect)
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")])
    r = res.record(site.url(A, "/old"))
    assert r["final_url"] == site.url(A, "/new") and r["status"] == 200
    # one vocabulary with check-links: /old (301 first), /loop1 (broken), /offsite (302 -> ok?)
    # one vocabulary with check-links: /old redirected (301 first), /loop1 broken,
    # /offsite ok (a temporary redirect whose target is out of scope)
    verdicts = res.report["totals"]["by_verdict"]
    assert verdicts["redirected"] == 1 and verdicts["broken"] == 1
    assert r["redirects"] == [
        {"url": site.url(A, "/old"), "status": 301},
        {"url": site.url(A, "/mid"), "status": 302},
    ]
    r = res.record(site.url(A, "/loop1"))
    assert r["error"] == "too_many_redirects" and r["status"] is None
    r = res.record(site.url(A, "/self"))
    assert r["status"] == 200 and seen_cookie["n"] == 1
    r = res.record(site.url(A, "/offsite"))
    assert r["status"] == 302 and r["final_url"] == site.url(A, "/offsite")
    row = [
        x for x in res.links if x["kind"] == "redirect" and x["source"] == site.url(A, "/offsite")
    ]
    assert row[0]["target"] == "http://elsewhere.test/x" and row[0]["decision"] == "scope"
    assert "/new" in site.paths(A) and site.paths(A).count("/new") == 1


async def test_redirect_to_already_seen_url_is_not_refetched(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/target", "/alias"))
    site.route(A, "/target", html("<p>t</p>"))
    site.route(A, "/alias", redirect("/target", 301))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")])
    assert site.paths(A).count("/target") == 1
    r = res.record(site.url(A, "/alias"))
    assert r["status"] == 301 and r["final_url"] == site.url(A, "/alias")


async def test_decompression_bomb_aborted_and_next_page_fine(site: Site, tmp_path: Path) -> None:
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\0" * (1 << 20)
    bomb = b"".join(co.compress(chunk) for _ in range(64)) + co.flush()  # 64 MiB of zeros

    async def bomb_h(request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=bomb, headers={"Content-Type": "text/html", "Content-Encoding": "gzip"}
        )

    site.route(A, "/", links_page("/bomb", "/after"))
    site.route(A, "/bomb", bomb_h)
    site.route(A, "/after", html("<p>after</p>"))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")], fetch_max_body_bytes=1024 * 1024)
    r = res.record(site.url(A, "/bomb"))
    assert r["error"] == "body_too_large" and r["status"] is None
    assert res.record(site.url(A, "/after"))["status"] == 200
    assert len(gzip.decompress(bomb)) == 64 << 20


async def test_slow_drip_hits_whole_fetch_deadline(site: Site, tmp_path: Path) -> None:
    async def drip(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        for _ in range(60):
            await resp.write(b"x")
            await asyncio.sleep(0.2)
        return resp

    site.route(A, "/", links_page("/drip", "/fast"))
    site.route(A, "/drip", drip)
    site.route(A, "/fast", html("<p>fast</p>"))
    res = await crawl(
        site,
        tmp_path / "out",
        [site.url(A, "/")],
        fetch_timeout_s=1.5,
        fetch_read_timeout_s=1.0,
        pol_retries=0,
    )
    r = res.record(site.url(A, "/drip"))
    assert r["error"] == "timeout" and "total" in r["error_detail"]
    assert r["elapsed_s"] >= 1.5  # the whole-fetch deadline, measured, not 0
    assert res.record(site.url(A, "/fast"))["status"] == 200


async def test_nofollow_base_href_and_session_ids(site: Site, tmp_path: Path) -> None:
    site.route(
        A,
        "/",
        html(
            '<html><head><base href="/docs/"></head><body>'
            '<a href="page.html">rel</a>'
            '<a rel="nofollow" href="/secret.html">nf</a>'
            '<a href="/s?PHPSESSID=0123456789abcdef0123456789abcdef&id=1">s1</a>'
            '<a href="/s?PHPSESSID=fedcba9876543210fedcba9876543210&id=1">s2</a>'
            '<a href="/j;jsessionid=ABCDEF0123456789">j</a>'
            "</body></html>"
        ),
    )
    site.route(A, "/docs/page.html", html("<p>p</p>"))
    site.route(A, "/s?id=1", html("<p>s</p>"))
    site.route(A, "/j", html("<p>j</p>"))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")])
    assert "/docs/page.html" in site.paths(A)
    assert "/secret.html" not in site.paths(A)
    assert site.paths(A).count("/s?id=1") == 1
    assert site.paths(A).count("/j") == 1
    nf = next(r for r in res.links if r["target"] == site.url(A, "/secret.html"))
    assert nf["nofollow"] == "1" and nf["decision"] == "nofollow"


async def test_retry_after_on_429_delays_the_host(site: Site, tmp_path: Path) -> None:
    calls = {"n": 0}

    async def limited(request: web.Request) -> web.StreamResponse:
        calls["n"] += 1
        if calls["n"] == 1:
            return web.Response(status=429, headers={"Retry-After": "1"})
        return web.Response(text="<p>ok</p>", content_type="text/html")

    site.route(A, "/", links_page("/a", "/b"))
    site.route(A, "/a", limited)
    site.route(A, "/b", html("<p>b</p>"))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")])
    r = res.record(site.url(A, "/a"))
    assert r["status"] == 200 and r["attempts"] == 2
    hits = [h for h in site.hits if h.host == A]
    first_429 = next(h for h in hits if h.path_qs == "/a")
    after = [h for h in hits if h.start > first_429.start]
    assert after and all(h.start - first_429.end >= 1.0 - 0.02 for h in after)


async def test_max_depth_max_pages_and_link_cap(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/d1a", "/d1b", "/d1c"))
    site.route(A, "/d1a", links_page("/d2"))
    site.route(A, "/d1b", html("<p/>"))
    site.route(A, "/d1c", html("<p/>"))
    site.route(A, "/d2", html("<p/>"))
    res = await crawl(
        site, tmp_path / "o1", [site.url(A, "/")], scope_max_depth=1, scope_max_links_per_page=2
    )
    assert sorted(r["url"] for r in res.records) == [site.url(A, p) for p in ("/", "/d1a", "/d1b")]
    decisions = {r["target"]: r["decision"] for r in res.links}
    assert decisions[site.url(A, "/d1c")] == "limit"
    assert decisions[site.url(A, "/d2")] == "depth"
    res = await crawl(site, tmp_path / "o2", [site.url(A, "/")], max_pages=2)
    assert sum(1 for r in res.records if r["status"] == 200) == 2


async def test_scope_domain_and_exclude(site: Site, tmp_path: Path) -> None:
    site.route(
        "www.ex.test",
        "/",
        links_page(site.url("docs.ex.test", "/"), site.url("other.test", "/"), "/skip/me"),
    )
    site.route("docs.ex.test", "/", html("<p/>"))
    site.route("other.test", "/", html("<p/>"))
    res = await crawl(
        site,
        tmp_path / "out",
        [site.url("www.ex.test", "/")],
        scope_scope="domain",
        scope_exclude=("/skip/",),
    )
    urls = {r["url"] for r in res.records}
    assert urls == {site.url("www.ex.test", "/"), site.url("docs.ex.test", "/")}
    d = {r["target"]: r["decision"] for r in res.links}
    assert d[site.url("other.test", "/")] == "scope"
    assert d[site.url("www.ex.test", "/skip/me")] == "scope"


async def test_resolve_only_unmapped_host_is_dns_error(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("http://unmapped.test/"))
    res = await crawl(
        site, tmp_path / "out", [site.url(A, "/"), "http://unmapped.test/"], pol_retries=0
    )
    r = res.record("http://unmapped.test/")
    # robots.txt could not be fetched because the name does not resolve: the page is not
    # fetched either, and its record names the real cause (C27: a dead host is "dns")
    assert r["error"] == "dns" and r["status"] is None


async def test_library_hooks_and_memory_frontier(site: Site, tmp_path: Path) -> None:
    from skitter.crawler import Crawler
    from skitter.events import CrawlHooks
    from skitter.models import Link
    from tests.integration.site import read_output, settings_for

    site.route(A, "/", links_page("/keep", "/drop", "/gone"))
    site.route(A, "/keep", html("<p>k</p>"))
    site.route(A, "/drop", html("<p>d</p>"))
    pages: list[tuple[str, int | None, int]] = []
    errors: list[str] = []

    async def on_page(record, response, page):  # type: ignore[no-untyped-def]
        pages.append((record.url, response.status, len(page.links) if page else -1))

    def on_error(record):  # type: ignore[no-untyped-def]
        errors.append(record.url)

    async def keep_link(source: str, link: Link) -> bool:  # async filters are awaited
        return not (link.url or "").endswith("/drop")

    hooks = CrawlHooks(
        on_page=on_page,
        on_error=on_error,
        link_filter=keep_link,
    )
    settings = settings_for(site, tmp_path / "out", [site.url(A, "/")], frontier="memory")
    async with Crawler.from_settings(settings, hooks) as crawler:
        snap = await crawler.run()
    assert snap.records == 3 and snap.ok == 2
    assert sorted(pages) == sorted(
        [(site.url(A, "/"), 200, 3), (site.url(A, "/keep"), 200, 0), (site.url(A, "/gone"), 404, 0)]
    )
    assert errors == []
    assert "/drop" not in site.paths(A)
    res = read_output(tmp_path / "out")
    d = {r["target"]: r["decision"] for r in res.links}
    assert d[site.url(A, "/drop")] == "scope"
