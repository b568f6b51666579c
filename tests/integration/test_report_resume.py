"""report.json after a resume covers the whole crawl: ``parse.per_process`` counts the pages
parsed in every session (as ``totals`` does), and a ``--max-pages`` given on resume applies
(raised, then lifted with 0) and is kept in state.json for the next resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis.asyncio

from skitter.distributed import crawl_key
from tests.e2e.test_cli import arun_cli
from tests.integration.site import Site, links_page
from tests.redis_server import RedisServer

H = "sessions.test"
N = 30


def _site(site: Site) -> None:
    for i in range(N):
        site.route(H, f"/p{i}", links_page(*(f"/p{j}" for j in range(i + 1, min(N, i + 4)))))
    site.route(H, "/", links_page("/p0"))


def _flags(site: Site, processes: str) -> list[str]:
    return [
        "--resolve", f"{H}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0", "--quiet",
        "--processes", processes,
    ]  # fmt: skip


def _ok(out: Path) -> int:
    lines = (out / "pages.jsonl").read_text().splitlines()
    return sum(r["status"] == 200 for r in map(json.loads, lines))


@pytest.mark.slow
async def test_parse_per_process_counts_every_session(site: Site, tmp_path: Path) -> None:
    _site(site)
    out = tmp_path / "out"
    flags = _flags(site, "2")
    rc, _, err = await arun_cli("crawl", site.url(H, "/"), "--out", str(out), "--max-pages", "8",
                                *flags)  # fmt: skip
    assert rc == 0, err
    assert _ok(out) == 8
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages", "0",
                                *flags, timeout=120)  # fmt: skip
    assert rc == 0, err
    assert _ok(out) == N + 1
    report = json.loads((out / "report.json").read_text())
    parts = report["parse"]["per_process"]
    assert len(parts) == 2
    parsed = sum(p["here"] + sum(p["helpers"].values()) for p in parts)
    assert parsed == N + 1 == report["totals"]["ok"]  # every page of both sessions, once


@pytest.mark.parametrize("processes", ["1", "2"])
async def test_max_pages_changes_on_resume_and_is_kept(
    site: Site, tmp_path: Path, processes: str
) -> None:
    _site(site)
    out = tmp_path / "out"
    flags = _flags(site, processes)
    rc, _, err = await arun_cli("crawl", site.url(H, "/"), "--out", str(out), "--max-pages", "5",
                                *flags)  # fmt: skip
    assert rc == 0, err
    assert _ok(out) == 5
    # raised: the pages already crawled count toward it
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages", "12",
                                *flags)  # fmt: skip
    assert rc == 0, err
    assert _ok(out) == 12
    assert json.loads((out / "state.json").read_text())["settings"]["max_pages"] == 12
    # lowered below what is crawled: nothing more is fetched
    hits = len(site.hits)
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages", "3", *flags)
    assert rc == 0, err
    assert _ok(out) == 12
    assert [h.path_qs for h in site.hits[hits:] if h.path_qs != "/robots.txt"] == []
    # a resume without the flag goes on with the last one given (3: still nothing)
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), *flags)
    assert rc == 0, err
    assert _ok(out) == 12
    assert json.loads((out / "report.json").read_text())["stop_reason"] == "max_pages"
    # 0 lifts the cap: the crawl finishes
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages", "0",
                                *flags, timeout=120)  # fmt: skip
    assert rc == 0, err
    assert _ok(out) == N + 1
    report = json.loads((out / "report.json").read_text())
    assert report["finished"] is True and report["totals"]["ok"] == N + 1
    assert json.loads((out / "state.json").read_text())["settings"]["max_pages"] is None


@pytest.mark.parametrize(("processes", "first_stop"), [("1", "done"), ("2", "max_pages")])
async def test_max_depth_raised_on_resume_queues_what_the_old_limit_left_out(
    site: Site, tmp_path: Path, processes: str, first_stop: str
) -> None:
    # a chain / -> /d1 -> /d2 -> /d3, and a second host linked from /d1 (other process)
    other = "deep.other.test"
    site.route(H, "/", links_page("/d1"))
    site.route(H, "/d1", links_page("/d2", f"http://{other}:{site.port}/o2"))
    site.route(H, "/d2", links_page("/d3"))
    site.route(H, "/d3", links_page("/"))
    site.route(other, "/o2", links_page("/o3"))
    site.route(other, "/o3", links_page("/"))
    out = tmp_path / "out"
    flags = [*_flags(site, processes), "--resolve", f"{other}:{site.port}:127.0.0.1",
             "--scope", "any"]  # fmt: skip
    cap = ["--max-pages", "2"] if first_stop == "max_pages" else []
    rc, _, err = await arun_cli("crawl", site.url(H, "/"), "--out", str(out), "--max-depth", "1",
                                *cap, *flags)  # fmt: skip
    assert rc == 0, err
    assert json.loads((out / "report.json").read_text())["stop_reason"] == first_stop

    def depths() -> dict[str, int]:
        lines = (out / "pages.jsonl").read_text().splitlines()
        return {r["url"]: r["depth"] for r in map(json.loads, lines)}

    assert depths() == {site.url(H, "/"): 0, site.url(H, "/d1"): 1}
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-depth", "2",
                                "--max-pages", "0", *flags)  # fmt: skip
    assert rc == 0, err
    o2 = f"http://{other}:{site.port}/o2"
    assert depths() == {
        site.url(H, "/"): 0, site.url(H, "/d1"): 1, site.url(H, "/d2"): 2, o2: 2
    }  # fmt: skip
    assert json.loads((out / "state.json").read_text())["settings"]["scope"]["max_depth"] == 2
    # lowered: accepted (applies to the links judged from now on); nothing is left to fetch
    hits = len(site.hits)
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-depth", "1", *flags)
    assert rc == 0, err
    assert len(site.hits) == hits
    if processes == "2":  # finished now: its processes' journals are merged and gone
        rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-depth", "3",
                                    *flags)  # fmt: skip
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert "--max-depth cannot be raised any more" in err
        assert len(site.hits) == hits


@pytest.mark.slow
async def test_redis_resume_stores_the_new_limits_for_joining_workers(
    site: Site, tmp_path: Path, redis_server: RedisServer
) -> None:
    _site(site)
    out = tmp_path / "w0"
    flags = [*_flags(site, "1"), "--frontier", redis_server.url, "--crawl-id", "limits"]
    rc, _, err = await arun_cli("crawl", site.url(H, "/"), "--out", str(out), "--max-pages", "3",
                                *flags)  # fmt: skip
    assert rc == 0, err
    assert _ok(out) == 3
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages", "7",
                                *flags)  # fmt: skip
    assert rc == 0, err
    assert _ok(out) == 7
    # what a worker joining now is given (skitter worker): the resume's limits
    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        raw = await client.hget(crawl_key("limits", "meta"), "settings")
    finally:
        await client.aclose()
    assert json.loads(raw)["max_pages"] == 7
