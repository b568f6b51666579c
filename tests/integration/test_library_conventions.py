"""Library conventions of issue 9: hook errors (fault 10), report.json stop_reason and the
resumed report (fault 8), --max-time (max_time_s)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from skitter import Crawler, CrawlHooks, CrawlSettings, HookError
from skitter.errors import ConfigError
from tests.integration.site import Site, crawl, html, links_page, settings_for, text

A = "lib.example.test"


def _site(site: Site, pages: int = 3) -> None:
    site.route(A, "/", links_page(*[f"/p{i}" for i in range(pages)]))
    for i in range(pages):
        site.route(A, f"/p{i}", html(f"<p>{i}</p>"))


# ------------------------------------------------------------------ fault 10: hook errors


async def test_failing_hook_is_logged_naming_hook_and_url(
    site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _site(site)
    bad = site.url(A, "/p1")

    def on_page(record: Any, response: Any, page: Any) -> None:
        if record.url == bad:
            raise ValueError("user bug")

    with caplog.at_level(logging.ERROR, logger="skitter"):
        r = await crawl(site, tmp_path / "o", [site.url(A, "/")], hooks=CrawlHooks(on_page=on_page))
    assert len(r.records) == 4  # the crawl went on
    msgs = [m.getMessage() for m in caplog.records if m.levelno >= logging.ERROR]
    assert msgs == [f"hook on_page raised for {bad}: ValueError: user bug"], msgs
    assert not any("internal error" in m for m in msgs)


async def test_failing_link_filter_keeps_the_link(site: Site, tmp_path: Path) -> None:
    _site(site, 2)

    async def link_filter(source: str, link: Any) -> bool:
        raise RuntimeError("filter bug")

    r = await crawl(
        site, tmp_path / "o", [site.url(A, "/")], hooks=CrawlHooks(link_filter=link_filter)
    )
    assert len(r.records) == 3


async def test_hook_errors_stop_raises_hook_error_and_stays_resumable(
    site: Site, tmp_path: Path
) -> None:
    _site(site)
    seed = site.url(A, "/")

    def on_page(record: Any, response: Any, page: Any) -> None:
        raise KeyError("boom")

    out = tmp_path / "o"
    with pytest.raises(HookError) as e:
        await crawl(site, out, [seed], hooks=CrawlHooks(on_page=on_page, errors="stop"))
    assert e.value.hook == "on_page" and e.value.url == seed
    assert isinstance(e.value.original, KeyError)
    assert str(e.value) == f"hook on_page raised for {seed}: KeyError: 'boom'"
    # resumable: the rest is crawled without the hook
    settings = settings_for(site, out, [seed], resume=True)
    async with Crawler.from_settings(settings) as c:
        await asyncio.wait_for(c.run(), 60)
    urls = [json.loads(x)["url"] for x in (out / "pages.jsonl").read_text().splitlines()]
    assert sorted(urls) == sorted([seed, *[site.url(A, f"/p{i}") for i in range(3)]])


def test_bad_hook_settings() -> None:
    with pytest.raises(ConfigError, match="errors"):
        CrawlHooks(errors="ignore")
    with pytest.raises(ConfigError, match="on_page"):
        CrawlHooks(on_page="print")  # type: ignore[arg-type]


# ------------------------------------------------- fault 8: stop_reason, resumed report


async def test_stop_reason_done_and_max_pages(site: Site, tmp_path: Path) -> None:
    _site(site)
    r = await crawl(site, tmp_path / "a", [site.url(A, "/")])
    assert r.report["stop_reason"] == "done"
    r = await crawl(site, tmp_path / "b", [site.url(A, "/")], max_pages=2, pol_concurrency=1)
    assert r.report["stop_reason"] == "max_pages"


async def test_max_time_stops_cleanly_and_resumes(site: Site, tmp_path: Path) -> None:
    """max_time_s stops leasing once the time is up; a resume finishes the crawl."""
    _site(site, 3)
    gate = asyncio.Event()
    release = asyncio.Event()

    async def slow(request: Any) -> Any:
        gate.set()
        await release.wait()
        return await html("<p>slow</p>")(request)

    site.route(A, "/p0", slow)
    out = tmp_path / "o"
    seed = site.url(A, "/")
    settings = settings_for(site, out, [seed], max_time_s=0.2, pol_concurrency=1)
    async with Crawler.from_settings(settings) as c:
        task = asyncio.create_task(c.run())
        await gate.wait()  # /p0 in flight; the time runs out while it is
        await asyncio.sleep(0.3)
        release.set()
        await asyncio.wait_for(task, 60)
        assert c.stop_reason == "max_time"
    report = json.loads((out / "report.json").read_text())
    assert report["stop_reason"] == "max_time"
    assert report["totals"]["records"] == 2  # the seed and /p0: in flight, then recorded
    settings = settings_for(site, out, [seed], resume=True)
    async with Crawler.from_settings(settings) as c:
        await asyncio.wait_for(c.run(), 60)
    report = json.loads((out / "report.json").read_text())
    assert report["stop_reason"] == "done" and report["totals"]["records"] == 4


async def test_resumed_report_equals_uninterrupted(site: Site, tmp_path: Path) -> None:
    """A crawl stopped after 2 pages and resumed reports what one uninterrupted crawl does,
    robots.txt counts per origin included (timings and robots fetch counts aside)."""
    site.route(A, "/robots.txt", text("User-agent: *\nDisallow: /private\n"))
    site.route(A, "/", links_page("/p0", "/p1", "/private/x", "/p2", "/private/y"))
    for i in range(3):
        site.route(A, f"/p{i}", links_page("/private/z"))
    seed = site.url(A, "/")
    whole = await crawl(site, tmp_path / "whole", [seed], pol_concurrency=1)
    out = tmp_path / "parts"
    await crawl(site, out, [seed], pol_concurrency=1, max_pages=2)
    settings = settings_for(site, out, [seed], resume=True, max_pages=None)
    async with Crawler.from_settings(settings) as c:
        await asyncio.wait_for(c.run(), 60)
    parts = json.loads((out / "report.json").read_text())

    def comparable(report: dict[str, Any]) -> dict[str, Any]:
        r = json.loads(json.dumps(report))
        for k in ("out_dir", "elapsed_s", "pages_per_s"):
            r.pop(k, None)
            r.get("totals", {}).pop(k, None)
        for entry in r.get("robots", {}).values():
            for k in ("fetched_at", "expires_at", "fetches"):
                entry.pop(k, None)
        return r

    assert comparable(parts) == comparable(whole.report)
    robots = parts["robots"][f"http://{A}:{site.port}"]
    assert robots["allowed"] == 4 and robots["disallowed"] == 3


async def test_robots_counts_one_verdict_per_url(site: Site, tmp_path: Path) -> None:
    """report.json ``robots`` allowed/disallowed count URLs, not robots.txt look-ups: the
    seed handed back for the politeness gap after robots.txt, a 503 retried, a sitemap entry
    fetched later and a sitemap file are each counted once (or not at all: the sitemap)."""
    sm = site.url(A, "/sitemap.xml")
    site.route(A, "/robots.txt", text(f"User-agent: *\nDisallow: /private\nSitemap: {sm}\n"))
    site.route(A, "/", links_page("/p0", "/busy", "/private/x"))
    site.route(A, "/p0", html("<p>0</p>"))
    site.route(A, "/busy", html("busy", status=503, headers={"Retry-After": "0"}))
    urls = "".join(f"<url><loc>{site.url(A, p)}</loc></url>" for p in ("/p0", "/private/y"))
    site.route(
        A,
        "/sitemap.xml",
        text(
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{urls}</urlset>",
            content_type="application/xml",
        ),
    )
    r = await crawl(
        site,
        tmp_path / "o",
        [site.url(A, "/")],
        pol_delay_s=0.2,
        pol_retries=1,
        quality_sitemaps="robots",
    )
    busy = [rec for rec in r.records if rec["url"].endswith("/busy")]
    assert [rec["attempts"] for rec in busy] == [2]  # the retry happened
    robots = r.report["robots"][f"http://{A}:{site.port}"]
    # allowed: /, /p0, /busy; disallowed: /private/x (a link), /private/y (the sitemap)
    assert (robots["allowed"], robots["disallowed"]) == (3, 2)


def test_readme_settings_examples_raise_config_error() -> None:
    """The README's examples of bad library settings raise ConfigError as it says (not a
    TypeError for a keyword that is not there)."""
    import re

    from skitter import PolitenessSettings
    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text()
    examples = re.findall(r"`((?:Crawl|Politeness)Settings\([^`]*\))`", readme)
    assert 'CrawlSettings(seeds="https://a/")' in examples
    assert "PolitenessSettings(delay_s=-1)" in examples
    with pytest.raises(ConfigError, match="seeds must be a tuple"):
        CrawlSettings(out_dir="o", seeds="https://a/")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="delay_s must be a finite number >= 0"):
        PolitenessSettings(delay_s=-1)
