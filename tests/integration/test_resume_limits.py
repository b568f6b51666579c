"""Limits on what is queued may change on resume (``--max-pages-per-host``,
``--max-links-per-page``, the trap limits, like ``--max-depth``): given on resume they are
stored and apply from then on; raised, what the old limit left out is queued (in the order
found: the first ones left out get the room), and a later resume keeps the budgets of what
was queued so (``requeued.txt``). Settings that define the crawl stay fixed."""

from __future__ import annotations

import asyncio
import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
from aiohttp import web

from skitter.distributed import crawl_key
from tests.e2e.test_cli import arun_cli
from tests.integration.site import Site, links_page
from tests.integration.test_processes import (
    crawl_args,
    finish,
    hosts_on_shards,
    records,
    run_cli,
    start_cli,
    wait_for,
)
from tests.redis_server import RedisServer

H = "limits.test"


def _flags(site: Site, *extra: str) -> list[str]:
    """One process (the default is one per core), H on loopback, no delay, no duplicate
    detection (the pages of these sites look alike)."""
    return ["--resolve", f"{H}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0",
            "--quiet", "--processes", "1", "--dedup", "off", *extra]  # fmt: skip


def _crawled(out: Path) -> set[str]:
    """The paths of the pages recorded in out/pages.jsonl (each once)."""
    recs = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    paths = [r["url"].split(H, 1)[1].split("/", 1)[1] for r in recs]
    assert len(paths) == len(set(paths)), "a page recorded twice"
    return {"/" + p for p in paths}


def _fetched(site: Site) -> Counter[str]:
    return Counter(h.path_qs for h in site.hits if h.path_qs != "/robots.txt")


def _stored(out: Path) -> dict[str, Any]:
    settings: dict[str, Any] = json.loads((out / "state.json").read_text())["settings"]
    return settings


def _report(out: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report


async def test_max_pages_per_host_raised_on_resume(site: Site, tmp_path: Path) -> None:
    # / links /a1 ... /a8 in order; /a3 and /a4 link /b1, /b2 (found only if they are crawled)
    site.route(H, "/", links_page(*(f"/a{i}" for i in range(1, 9))))
    for i in range(1, 9):
        site.route(H, f"/a{i}", links_page("/", *(("/b1", "/b2") if i in (3, 4) else ())))
    site.route(H, "/b1", links_page("/"))
    site.route(H, "/b2", links_page("/"))
    out = tmp_path / "out"
    seed = site.url(H, "/")
    # the cap counts the seed: /, /a1, /a2
    rc, _, err = await arun_cli("crawl", seed, "--out", str(out), "--max-pages-per-host", "3",
                                *_flags(site))  # fmt: skip
    assert rc == 0, err
    assert _crawled(out) == {"/", "/a1", "/a2"}
    assert _report(out)["finished"] is True
    assert _report(out)["traps"]["max_pages_per_host"]["count"] == 6  # /a3 ... /a8
    # raised to 5 (and --max-pages 4: one page more this session): /a3 and /a4 are queued
    # now, the first ones the old cap left out; the crawled one's /b1, /b2 are over the cap
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages-per-host",
                                "5", "--max-pages", "4", *_flags(site))  # fmt: skip
    assert rc == 0, err
    crawled = _crawled(out)
    assert len(crawled) == 4 and crawled - {"/a3", "/a4"} == {"/", "/a1", "/a2"}
    assert _stored(out)["scope"]["max_pages_per_host"] == 5
    assert _report(out)["traps"]["max_pages_per_host"]["limit"] == 5
    # without the flag: the stored cap (5) goes on, the budgets of what the raise queued
    # kept (the other of /a3, /a4 is crawled; /b1, /b2 stay over the cap)
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages", "0",
                                *_flags(site))  # fmt: skip
    assert rc == 0, err
    assert _crawled(out) == {"/", "/a1", "/a2", "/a3", "/a4"}
    assert _report(out)["finished"] is True
    # a finished crawl: raised again, the rest is crawled; each page fetched once in all
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages-per-host",
                                "20", *_flags(site))  # fmt: skip
    assert rc == 0, err
    everything = {"/", "/b1", "/b2", *(f"/a{i}" for i in range(1, 9))}
    assert _crawled(out) == everything
    assert _fetched(site) == Counter(dict.fromkeys(everything, 1))
    # lowered: accepted (the crawl is finished: nothing is fetched, no file changes)
    state = (out / "state.json").read_bytes()
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages-per-host",
                                "2", *_flags(site))  # fmt: skip
    assert rc == 0, err
    assert (out / "state.json").read_bytes() == state
    assert _fetched(site) == Counter(dict.fromkeys(everything, 1))


@pytest.mark.parametrize(
    ("flag", "first", "then", "links", "at_first", "at_then"),
    [
        ("--max-links-per-page", "2", "4", ["/a1", "/a2", "/a3", "/a4", "/a5"],
         {"/a1", "/a2"}, {"/a1", "/a2", "/a3", "/a4"}),
        ("--max-path-depth", "1", "2", ["/x", "/x/y", "/x/y/z"], {"/x"}, {"/x", "/x/y"}),
        ("--max-path-depth", "1", "0", ["/x", "/x/y", "/x/y/z"], {"/x"},
         {"/x", "/x/y", "/x/y/z"}),
        ("--max-query-variants-per-path", "1", "2", ["/q?a=1", "/q?a=2", "/q?a=3"],
         {"/q?a=1"}, {"/q?a=1", "/q?a=2"}),
        ("--max-segment-repeats", "1", "2", ["/r/s", "/r/r", "/r/r/r"], {"/r/s"},
         {"/r/s", "/r/r"}),
    ],
)  # fmt: skip
async def test_link_cap_and_trap_limits_raised_on_resume(
    site: Site,
    tmp_path: Path,
    flag: str,
    first: str,
    then: str,
    links: list[str],
    at_first: set[str],
    at_then: set[str],
) -> None:
    site.route(H, "/", links_page(*links))
    for path in links:
        site.route(H, path, links_page("/"))
    out = tmp_path / "out"
    rc, _, err = await arun_cli("crawl", site.url(H, "/"), "--out", str(out), flag, first,
                                *_flags(site))  # fmt: skip
    assert rc == 0, err
    assert _crawled(out) == {"/", *at_first}
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), flag, then,
                                *_flags(site))  # fmt: skip
    assert rc == 0, err
    assert _crawled(out) == {"/", *at_then}
    assert _fetched(site) == Counter(dict.fromkeys({"/", *at_then}, 1))
    name = flag[2:].replace("-", "_")
    assert _stored(out)["scope"][name] == (int(then) or None)  # (0: off)
    # kept: a resume without the flag has nothing more to fetch
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), *_flags(site))
    assert rc == 0, err
    assert _fetched(site) == Counter(dict.fromkeys({"/", *at_then}, 1))


async def test_what_defines_the_crawl_stays_fixed(site: Site, tmp_path: Path) -> None:
    site.route(H, "/", links_page("/a"))
    out = tmp_path / "out"
    rc, _, err = await arun_cli("crawl", site.url(H, "/"), "--out", str(out), *_flags(site))
    assert rc == 0, err
    state = (out / "state.json").read_bytes()
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-url-length", "99",
                                *_flags(site))  # fmt: skip
    assert rc == 2, err
    assert err.strip() == (
        "skitter: error: --max-url-length differs from the crawl being resumed (2048 stored, "
        "99 given); what is crawled and the number of processes cannot change on resume"
    )
    assert (out / "state.json").read_bytes() == state


async def test_processes_per_host_cap_raised_requeues_what_the_owner_dropped(
    site: Site, tmp_path: Path
) -> None:
    # a (process 0) links b1..b4 on b (process 1): b's owner admits two and drops two
    a, b = hosts_on_shards(site.port, 2, [0, 1], "cap")
    gate = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(gate.wait(), 30)
        return web.Response(text="<p>x</p>", content_type="text/html")

    site.route(a, "/", links_page("/slow", *(site.url(b, f"/b{i}") for i in range(1, 5))))
    site.route(a, "/slow", held)  # keeps the first session from finishing
    for i in range(1, 5):
        site.route(b, f"/b{i}", links_page(site.url(a, "/")))
    out = tmp_path / "out"
    args = crawl_args(site, [a, b], out, "--processes", "2", "--scope", "any")
    dropped = out / "shards" / "1" / "handoff" / "dropped.txt"
    proc = await start_cli(*args, "--max-pages-per-host", "2", site.url(a, "/"))
    try:
        b_paths = {f"/b{i}" for i in (1, 2)}
        await wait_for(
            lambda: dropped.exists()
            and dropped.read_text().count("\n") == 2
            and b_paths <= {h.path_qs for h in site.hits if h.host == b and h.end},
            proc,
        )
        assert proc.returncode is None
        proc.send_signal(signal.SIGINT)
        rc, _, err = await finish(proc)
    finally:
        gate.set()
    assert rc == 130, err
    assert dropped.read_text() == "".join(site.url(b, f"/b{i}") + "\n" for i in (3, 4))
    rc, _, err = await run_cli(*crawl_args(site, [a, b], out), "--resume",
                               "--max-pages-per-host", "4")  # fmt: skip
    assert rc == 0, err
    urls = sorted(r["url"] for r in records(out))
    assert urls == sorted(
        [site.url(a, "/"), site.url(a, "/slow"), *(site.url(b, f"/b{i}") for i in range(1, 5))]
    )
    assert Counter(h.path_qs for h in site.hits if h.host == b and h.path_qs != "/robots.txt") == (
        Counter(dict.fromkeys(["/b1", "/b2", "/b3", "/b4"], 1))
    )


@pytest.mark.slow
async def test_redis_resume_stores_the_changed_caps_for_joining_workers(
    site: Site, tmp_path: Path, redis_server: RedisServer
) -> None:
    site.route(H, "/", links_page(*(f"/a{i}" for i in range(1, 6))))
    for i in range(1, 6):
        site.route(H, f"/a{i}", links_page("/"))
    out = tmp_path / "w0"
    flags = [*_flags(site), "--frontier", redis_server.url, "--crawl-id", "caps"]
    rc, _, err = await arun_cli("crawl", site.url(H, "/"), "--out", str(out),
                                "--max-pages-per-host", "2", "--max-links-per-page", "4",
                                *flags)  # fmt: skip
    assert rc == 0, err
    assert _crawled(out) == {"/", "/a1"}
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages-per-host",
                                "4", "--max-path-depth", "5", *flags)  # fmt: skip
    assert rc == 0, err
    assert _crawled(out) == {"/", "/a1", "/a2", "/a3"}
    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        raw = await client.hget(crawl_key("caps", "meta"), "settings")
    finally:
        await client.aclose()
    scope = json.loads(raw)["scope"]
    assert (scope["max_pages_per_host"], scope["max_links_per_page"]) == (4, 4)
    assert scope["max_path_depth"] == 5
