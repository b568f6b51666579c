"""The crawl pipeline: a host's next request starts once the previous response is read, while
that page is still being processed; one request in flight per host; ack after durable."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from skitter.events import CrawlHooks
from skitter.models import Link
from tests.integration.site import Site, crawl, html, links_page

H = "one.test"
ROOT = Path(__file__).resolve().parents[2]


async def wait_hit(event: asyncio.Event, log: list[tuple[str, float]], name: str) -> None:
    """Hold processing until ``event`` is set (bounded: 60 s, then the test fails)."""
    try:
        await asyncio.wait_for(event.wait(), 60)
    except TimeoutError:
        log.append(("timeout", time.monotonic()))
    log.append((name, time.monotonic()))


def build(site: Site, b_started: asyncio.Event | None = None) -> set[str]:
    """``/`` links to /p1../p4; the seed /b links to /c. Returns every page URL."""
    site.route(H, "/", links_page(*(f"/p{i}" for i in range(1, 5))))
    page_b = links_page("/c")

    async def b(request: object) -> object:
        if b_started is not None:
            b_started.set()
        return await page_b(request)  # type: ignore[arg-type]

    site.route(H, "/b", b)  # type: ignore[arg-type]
    for p in ("/c", "/p1", "/p2", "/p3", "/p4"):
        site.route(H, p, html(f"<!doctype html><title>{p}</title>"))
    return {site.url(H, p) for p in ("/", "/b", "/c", "/p1", "/p2", "/p3", "/p4")}


async def test_next_request_starts_while_the_previous_page_is_processed(
    site: Site, tmp_path: Path
) -> None:
    b_started = asyncio.Event()
    expected = build(site, b_started)
    log: list[tuple[str, float]] = []
    held = False

    async def hold(source: str, link: Link) -> bool:
        nonlocal held
        if source == site.url(H, "/") and not held:
            held = True  # the page / is processed (its links decided) only once /b started
            await wait_hit(b_started, log, "processed /")
        return True

    res = await crawl(
        site,
        tmp_path / "out",
        [site.url(H, "/"), site.url(H, "/b")],
        hooks=CrawlHooks(link_filter=hold),
        pol_host_concurrency=1,
    )
    assert [n for n, _ in log] == ["processed /"]  # no timeout: /b did not wait for /
    b_hit = next(h for h in site.hits if h.path_qs == "/b")
    assert b_hit.start < log[0][1]  # the server saw /b before / was processed
    assert site.max_inflight[H] == 1  # never two requests to the host at once
    hits = sorted(site.hits, key=lambda h: h.start)
    for prev, nxt in itertools.pairwise(hits):
        assert prev.end <= nxt.start, (prev.path_qs, nxt.path_qs)
    urls = [r["url"] for r in res.records]
    assert sorted(urls) == sorted(expected)
    assert res.report["finished"] is True


async def test_a_delay_is_kept_between_requests(site: Site, tmp_path: Path) -> None:
    expected = build(site)
    res = await crawl(
        site, tmp_path / "out", [site.url(H, "/"), site.url(H, "/b")], pol_delay_s=0.05
    )
    assert {r["url"] for r in res.records} == expected
    hits = sorted((h for h in site.hits if h.path_qs != "/robots.txt"), key=lambda h: h.start)
    for prev, nxt in itertools.pairwise(hits):
        assert nxt.start - prev.end >= 0.05 - 0.005, (prev.path_qs, nxt.path_qs)


HELD_CRAWL = """
import asyncio, sys
from pathlib import Path
from skitter.crawler import Crawler
from skitter.events import CrawlHooks
from skitter.settings import CrawlSettings, FetchSettings, PolitenessSettings, QualitySettings

port, out, marker = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
root = f"http://one.test:{port}/"

async def hold(source, link):
    if source == root:  # processing of / never ends: the crawler is killed meanwhile
        marker.write_text("holding")
        await asyncio.Event().wait()
    return True

async def main():
    s = CrawlSettings(
        out_dir=out, seeds=(root, root + "b"), quiet=True,
        fetch=FetchSettings(resolve={("one.test", port): "127.0.0.1"}, resolve_only=True),
        politeness=PolitenessSettings(delay_s=0.0),
        quality=QualitySettings(dedup="off", sitemaps="off"),
    )
    async with Crawler.from_settings(s, CrawlHooks(link_filter=hold)) as c:
        await c.run()

asyncio.run(main())
"""


@pytest.mark.slow
async def test_kill_9_mid_pipeline_then_resume_records_every_page_once(
    site: Site, tmp_path: Path
) -> None:
    expected = build(site)
    out, marker = tmp_path / "out", tmp_path / "holding"
    script = tmp_path / "held.py"
    script.write_text(textwrap.dedent(HELD_CRAWL))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(site.port), str(out), str(marker), env=env
    )
    try:
        for _ in range(6000):  # bounded: 60 s
            pages = out / "pages.jsonl"
            b_done = pages.exists() and b"/b" in pages.read_bytes()
            if (marker.exists() and b_done) or proc.returncode is not None:
                break
            await asyncio.sleep(0.01)
        assert proc.returncode is None, "the held crawl ended on its own"
        assert marker.exists() and b_done, "/b was not recorded while / was held"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await proc.wait()
    before = [json.loads(x)["url"] for x in (out / "pages.jsonl").read_text().splitlines()]
    assert site.url(H, "/") not in before  # fetched, released, never recorded nor acked
    resume = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", "--out", str(out), "--resume", "--quiet",
        env=env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(resume.communicate(), 120)
    assert resume.returncode == 0, err.decode()
    urls = [json.loads(x)["url"] for x in (out / "pages.jsonl").read_text().splitlines()]
    assert len(urls) == len(set(urls)), "a URL was recorded twice"
    assert set(urls) == expected
    assert sum(1 for h in site.hits if h.path_qs == "/") == 2  # / again, after the kill


@pytest.mark.slow
async def test_processes_2_on_one_host_parse_pages_in_another_process(
    site: Site, tmp_path: Path
) -> None:
    n = 40
    for i in range(n):
        site.route(H, f"/p{i}", links_page(*(f"/p{j}" for j in range(i + 1, min(n, i + 4)))))
    site.route(H, "/", links_page("/p0"))
    out = tmp_path / "out"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", site.url(H, "/"), "--out", str(out),
        "--processes", "2", "--resolve", f"{H}:{site.port}:127.0.0.1", "--resolve-only",
        "--delay", "0", "--quiet",
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    records = [json.loads(x) for x in (out / "pages.jsonl").read_text().splitlines()]
    assert len(records) == n + 1 and all(r["status"] == 200 for r in records)
    parts = json.loads((out / "report.json").read_text())["parse"]["per_process"]
    assert len(parts) == 2
    here = sum(p["here"] for p in parts)
    helpers = {pid: k for p in parts for pid, k in p["helpers"].items()}
    assert here + sum(helpers.values()) == n + 1  # every page parsed once
    assert sum(helpers.values()) >= 1  # the busy host's pages were parsed elsewhere too
    # by the sibling crawler process, not by a helper process (issue 16: a forked helper
    # counted a crawler's resident set once more)
    pids = {str(p["pid"]) for p in parts}
    for p in parts:
        assert set(p["helpers"]) <= pids - {str(p["pid"])}
