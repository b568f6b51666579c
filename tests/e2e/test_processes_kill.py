"""``crawl --processes 3`` interrupted (Ctrl-C, kill -9 of the coordinator, kill -9 of every
process) and resumed: the same pages and links as an uninterrupted crawl, none twice.

The CLI runs as a subprocess in its own session (process group) on a loopback multi-host site;
records are watched in ``OUT/shards/K/pages.jsonl`` (the merged ``OUT/pages.jsonl`` lags).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integration.site import Site
from tests.integration.test_processes import (
    build_wide_site,
    crawl_args,
    finish,
    graph,
    hosts_on_shards,
    records,
    report,
    run_cli,
    shard_record_count,
    shard_records,
    start_cli,
    wait_for,
    warc_check,
)

N = 3
PAGES = 50  # per host: 6 hosts x (root + 50) = 306 pages
FLAGS = ("--processes", str(N), "--host-concurrency", "2", "--ip-concurrency", "6")


def setup(site: Site, tmp_path: Path, prefix: str) -> tuple[list[str], list[str]]:
    hosts = hosts_on_shards(site.port, N, [0, 0, 1, 1, 2, 2], prefix)
    seeds = build_wide_site(site, hosts, pages=PAGES, delay_s=0.004)
    return hosts, seeds


def expected_urls(site: Site, hosts: list[str]) -> set[str]:
    return {site.url(h, p) for h in hosts for p in ["/", *(f"/p/{j}" for j in range(PAGES))]}


def page_hits(site: Site, since: float = 0.0) -> Counter[str]:
    """Page requests (robots.txt aside) started after ``since``, by URL."""
    return Counter(
        site.url(h.host, h.path_qs)
        for h in site.hits
        if h.path_qs != "/robots.txt" and h.start > since
    )


def every_shard_recorded(out: Path) -> bool:
    """True once every process has a complete record in its pages.jsonl."""
    files = [out / "shards" / str(k) / "pages.jsonl" for k in range(N)]
    return all(f.exists() and b"\n" in f.read_bytes() for f in files)


def live_processes() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every live (not zombie) process, from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] not in ("Z", "X"):
            out.append((int(d.name), int(fields[1]), int(fields[2])))
    return out


def group_alive(pgid: int) -> list[int]:
    """Pids of the live (not zombie) processes in process group ``pgid``."""
    return [p for p, _, g in live_processes() if g == pgid]


async def wait_group_gone(pgid: int) -> None:
    """Wait (bounded: 10 s) until no live process is left in the group; fails if one is."""
    for _ in range(1000):
        if not group_alive(pgid):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"processes left in group {pgid}: {group_alive(pgid)}")


async def reference(site: Site, hosts: list[str], seeds: list[str], out: Path) -> Counter[Any]:
    """An uninterrupted crawl of the site: every page once; returns its link graph."""
    rc, _, err = await run_cli(*crawl_args(site, hosts, out, *FLAGS), *seeds)
    assert rc == 0, err
    recs = records(out)
    assert sorted(r["url"] for r in recs) == sorted(expected_urls(site, hosts))
    return graph(out)


def check_resumed(site: Site, hosts: list[str], out: Path, ref_graph: Counter[Any]) -> None:
    """The resumed crawl's merged output equals the uninterrupted one's."""
    recs = records(out)  # fails on a torn line
    urls = [r["url"] for r in recs]
    assert len(urls) == len(set(urls)), [u for u, n in Counter(urls).items() if n > 1]
    assert set(urls) == expected_urls(site, hosts)
    assert all(r["status"] == 200 for r in recs)
    # finished: the merged files are the only copy (the shards' journals are removed)
    assert shard_records(out) == []
    assert not list(out.glob("shards/*/pages.jsonl")) and not list(out.glob("shards/*/links.tsv"))
    assert graph(out) == ref_graph
    lines = (out / "links.tsv").read_text().splitlines()
    assert sum(1 for x in lines if x.startswith("source\t")) == 1
    rep = report(out)
    assert rep["finished"] is True and rep["stop_reason"] == "done"
    assert rep["totals"]["records"] == len(urls) and rep["totals"]["ok"] == len(urls)
    names = warc_check(out)
    assert {n[: len("skitter-pK")] for n in names} == {f"skitter-p{k}" for k in range(N)}


@pytest.mark.slow
async def test_ctrl_c_then_resume_same_pages(site: Site, tmp_path: Path) -> None:
    hosts, seeds = setup(site, tmp_path, "ci")
    ref_graph = await reference(site, hosts, seeds, tmp_path / "ref")
    site.hits.clear()
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out, *FLAGS)
    proc = await start_cli(*args, *seeds)
    await wait_for(lambda: shard_record_count(out) >= 60, proc)
    assert proc.returncode is None, "the crawl ended before the signal"
    os.killpg(proc.pid, signal.SIGINT)
    rc, _, err = await finish(proc)
    assert rc == 130, err
    assert f"interrupted; resume with: skitter crawl --resume --out {out}" in err
    assert "Traceback" not in err
    # a prompt stop: every record is in the merged file; fetches in flight were abandoned
    done = [r["url"] for r in records(out)]
    assert 60 <= len(done) < len(expected_urls(site, hosts))
    assert sorted(done) == sorted(r["url"] for r in shard_records(out))
    assert max(page_hits(site).values()) == 1
    abandoned = set(page_hits(site)) - set(done)
    rc, _, err = await run_cli(*args, "--resume")
    assert rc == 0, err
    check_resumed(site, hosts, out, ref_graph)
    # nothing recorded is fetched again; only the abandoned fetches are asked again, once
    # (a few: a process may start one while the others already stopped, so not a fixed bound)
    assert len(abandoned) < len(expected_urls(site, hosts)) - len(done)
    assert page_hits(site) == Counter(expected_urls(site, hosts)) + Counter(abandoned)


@pytest.mark.slow
async def test_kill_9_of_the_coordinator_kills_its_processes(site: Site, tmp_path: Path) -> None:
    hosts, seeds = setup(site, tmp_path, "kc")
    ref_graph = await reference(site, hosts, seeds, tmp_path / "ref")
    site.hits.clear()
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out, *FLAGS)
    proc = await start_cli(*args, *seeds)
    await wait_for(lambda: shard_record_count(out) >= 80, proc)
    assert proc.returncode is None, "the crawl ended before the kill"
    proc.send_signal(signal.SIGKILL)  # the coordinator only
    await proc.wait()
    await wait_group_gone(proc.pid)  # its crawler processes died with it
    t_kill = time.monotonic()
    done = {r["url"] for r in shard_records(out)}
    assert len(done) >= 80
    # resumed right away: no process holds a shard
    rc, _, err = await run_cli(*args, "--resume")
    assert rc == 0, err
    assert "Traceback" not in err
    check_resumed(site, hosts, out, ref_graph)
    assert not (set(page_hits(site, since=t_kill)) & done), "a recorded page fetched again"


@pytest.mark.slow
async def test_kill_9_of_every_process_three_times_then_resume(site: Site, tmp_path: Path) -> None:
    hosts, seeds = setup(site, tmp_path, "kg")
    ref_graph = await reference(site, hosts, seeds, tmp_path / "ref")
    site.hits.clear()
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out, *FLAGS)
    rng = random.Random(os.getpid())
    kills: list[tuple[float, set[str]]] = []
    resume: list[str] = []
    # kill 1: as soon as every process has recorded a page; then after 80+ and 160+ pages
    for k, at in enumerate((0, 80, 160)):
        proc = await start_cli(*args, *(resume or seeds))
        if k == 0:
            await wait_for(lambda: every_shard_recorded(out), proc)
        else:
            target = at + rng.randrange(20)
            await wait_for(lambda t=target: shard_record_count(out) >= t, proc)
        await asyncio.sleep(rng.random() * 0.02)
        if proc.returncode is not None:
            rc, _, err = await finish(proc)
            raise AssertionError(f"the crawl ended before kill {k + 1}: exit {rc}: {err}")
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        await wait_group_gone(proc.pid)
        kills.append((time.monotonic(), {r["url"] for r in shard_records(out)}))
        resume = ["--resume"]
    rc, _, err = await run_cli(*args, "--resume")
    assert rc == 0, err
    check_resumed(site, hosts, out, ref_graph)
    for t_kill, done in kills:
        assert not (set(page_hits(site, since=t_kill)) & done), "a recorded page fetched again"


async def test_kill_9_before_the_processes_started_then_resume(site: Site, tmp_path: Path) -> None:
    hosts, seeds = setup(site, tmp_path, "ks")
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out, *FLAGS)
    proc = await start_cli(*args, *seeds)
    # the coordinator has created shards/ and is starting its processes (the site is not
    # served meanwhile: this loop blocks the event loop, 1 ms at a time, 10 s at most)
    for _ in range(10_000):
        if (out / "shards").exists() or proc.returncode is not None:
            break
        time.sleep(0.001)
    os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()
    await wait_group_gone(proc.pid)
    assert (out / "shards").is_dir()
    assert not (out / "shards" / str(N - 1)).exists() or not (out / "shards" / "0").exists()
    rc, _, err = await run_cli(*args, "--resume")
    assert rc == 0, err
    recs = records(out)
    assert sorted(r["url"] for r in recs) == sorted(expected_urls(site, hosts))


def children(pid: int) -> list[int]:
    """Pids of the live child processes of ``pid``."""
    return sorted(p for p, parent, _ in live_processes() if parent == pid)


@pytest.mark.slow
async def test_a_crawler_process_killed_stops_the_crawl_then_resume(
    site: Site, tmp_path: Path
) -> None:
    hosts, seeds = setup(site, tmp_path, "kw")
    ref_graph = await reference(site, hosts, seeds, tmp_path / "ref")
    site.hits.clear()
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out, *FLAGS)
    proc = await start_cli(*args, *seeds)
    await wait_for(lambda: shard_record_count(out) >= 60, proc)
    kids = children(proc.pid)
    assert proc.returncode is None and len(kids) == N, kids
    os.kill(kids[1], signal.SIGKILL)  # one crawler process
    rc, _, err = await finish(proc)
    await wait_group_gone(proc.pid)
    t_end = time.monotonic()
    assert rc == 1, err
    assert "Traceback" not in err
    # one line: the cause and how to resume
    (line,) = err.strip().splitlines()
    assert re.match(r"^skitter: error: crawler process [0-2] died \(exit code -9\); ", line)
    assert line.endswith(f"; the crawl stopped; resume with: skitter crawl --resume --out {out}")
    assert report(out)["stop_reason"] == "interrupted" and report(out)["finished"] is False
    done = {r["url"] for r in shard_records(out)}
    rc, _, err = await run_cli(*args, "--resume")
    assert rc == 0, err
    check_resumed(site, hosts, out, ref_graph)
    # nothing recorded (by the killed process or the others, stopped) is fetched again
    again = set(page_hits(site, since=t_end)) & done
    assert not again, again
