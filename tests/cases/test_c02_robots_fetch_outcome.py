"""C02 — robots.txt fetch outcome: 4xx, 5xx, unreachable, an HTML body.

RFC 9309 §2.3.1: 4xx (401/403 too) = unavailable → allow all; 5xx or a network error =
unreachable → disallow all, re-checked after the retry interval (not cached for the TTL);
a 200 that is really an HTML page has no records → no restrictions.

Times are scaled down: robots.txt error-retry interval 0.3 s instead of ≤ 10 s, and the
503 period is "the first two robots.txt requests" instead of "the first 20 s", so the test
depends on the count of requests, not on timing luck.
"""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

from aiohttp import web

from tests.cases._util import page, requested
from tests.integration.site import Site, crawl, html, read_output, settings_for, text

HOME_HTML = (
    "<!doctype html><html><head><title>Home</title></head><body><p>Welcome</p></body></html>"
)


def closed_port() -> int:
    """A loopback port with nothing listening (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_c02_robots_4xx_5xx_unreachable_and_html(site: Site, tmp_path: Path) -> None:
    site.route("a404.example.test", "/robots.txt", html("<h1>Not Found</h1>", status=404))
    site.route("a403.example.test", "/robots.txt", html("<h1>Forbidden</h1>", status=403))
    site.route("html.example.test", "/robots.txt", text(HOME_HTML, content_type="text/html"))
    robots_503 = {"n": 0}

    async def a503_robots(request: web.Request) -> web.StreamResponse:
        robots_503["n"] += 1
        if robots_503["n"] <= 2:
            return web.Response(
                status=503,
                body=b"<html><body>down</body></html>",
                content_type="text/html",
            )
        return web.Response(text="User-agent: *\nDisallow:\n", content_type="text/plain")

    site.route("a503.example.test", "/robots.txt", a503_robots)
    hosts = ["a404.example.test", "a403.example.test", "a503.example.test", "html.example.test"]
    for h in hosts:
        site.route(h, "/page", page())
    down_port = closed_port()
    down = f"http://down.example.test:{down_port}/page"
    seeds = [site.url(h, "/page") for h in hosts] + [down]
    settings = settings_for(
        site,
        tmp_path / "out",
        seeds,
        pol_robots_retry_s=0.3,
        pol_retries=3,
    )
    settings.fetch.resolve[("down.example.test", down_port)] = "127.0.0.1"
    from skitter.crawler import Crawler

    async with Crawler.from_settings(settings) as crawler:
        await crawler.run()
    res = read_output(tmp_path / "out")

    # 4xx (403 included) and an HTML 200: allow all
    for h in ("a404.example.test", "a403.example.test", "html.example.test"):
        assert requested(site, h) == ["/page"], h
        assert res.record(site.url(h, "/page"))["status"] == 200
    robots = res.report["robots"]
    assert robots[site.url("a404.example.test", "")]["status"] == "4xx"
    assert robots[site.url("a403.example.test", "")]["status"] == "4xx"
    assert robots[site.url("html.example.test", "")]["status"] == "ok"

    # 503: /page not fetched while robots.txt answers 503; robots.txt asked again after
    # the retry interval (not cached for 24 h); /page fetched once robots.txt is a 200
    a503 = site.paths("a503.example.test")
    assert a503 == ["/robots.txt", "/robots.txt", "/robots.txt", "/page"]
    hits = [h for h in site.hits if h.host == "a503.example.test"]
    for prev, nxt in itertools.pairwise(hits[:3]):
        assert nxt.start - prev.end >= 0.3 - 0.05  # re-asked after the retry interval
    rec = res.record(site.url("a503.example.test", "/page"))
    assert rec["status"] == 200 and rec["attempts"] == 3

    # connection refused: not fetched, reported as "robots.txt unreachable" -- not as
    # blocked by robots rules, not as a dead page
    rec = res.record(down)
    assert rec["error"] == "robots_unreachable" and rec["status"] is None
    assert "unreachable" in rec["error_detail"]
    assert rec["attempts"] == 4  # asked again after each retry interval, then given up
    down_robots = robots[f"http://down.example.test:{down_port}"]
    assert down_robots["status"] == "unreachable"
    assert down_robots["unreachable_urls"] == [down]
    assert "disallowed_urls" not in down_robots
    assert res.report["totals"]["robots_disallowed"] == 0
    assert res.report["totals"]["by_error"] == {"robots_unreachable": 1}


async def test_c02_robots_5xx_is_rechecked_not_cached(site: Site, tmp_path: Path) -> None:
    """The disallow-all of a 5xx robots.txt lasts the retry interval, not the TTL."""
    answers = iter([503, 500, 200])

    async def robots(request: web.Request) -> web.StreamResponse:
        status = next(answers, 200)
        if status != 200:
            return web.Response(status=status, text="<p>error</p>", content_type="text/html")
        return web.Response(text="User-agent: *\nDisallow: /no/\n")

    site.route("a503.example.test", "/robots.txt", robots)
    site.fallback("a503.example.test", page())
    res = await crawl(
        site,
        tmp_path / "out",
        [site.url("a503.example.test", "/page"), site.url("a503.example.test", "/no/x")],
        pol_robots_retry_s=0.2,
        pol_retries=3,
    )
    assert site.paths("a503.example.test").count("/robots.txt") == 3
    assert requested(site, "a503.example.test") == ["/page"]
    assert res.record(site.url("a503.example.test", "/page"))["status"] == 200
    entry = res.report["robots"][site.url("a503.example.test", "")]
    assert entry["status"] == "ok" and entry["disallowed_urls"] == [
        site.url("a503.example.test", "/no/x")
    ]
