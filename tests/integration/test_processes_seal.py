"""A finished ``--processes`` crawl keeps one copy of its journals (skitter.shard_cleanup):
the merged files, synced, then report.json "finished", then the shard journals removed; a
crash (SIGKILL of the coordinator) between any two steps leaves a usable folder."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from skitter.state import LINKS_FILE, PAGES_FILE
from tests.integration.site import Site, links_page
from tests.integration.test_processes import (
    REPO,
    crawl_args,
    graph,
    hosts_on_shards,
    records,
    report,
    run_cli,
)


def build(site: Site) -> tuple[list[str], list[str]]:
    """Four hosts, two per process of 2, linking across; returns (hosts, seeds)."""
    hosts = hosts_on_shards(site.port, 2, [0, 0, 1, 1], "seal")
    for i, h in enumerate(hosts):
        other = hosts[(i + 1) % 4]
        site.route(h, "/", links_page("/p1", "/p2", site.url(other, "/p1")))
        site.route(h, "/p1", links_page("/", "/p2"))
        site.route(h, "/p2", links_page("/p1", site.url(other, "/")))
    return hosts, [site.url(h, "/") for h in hosts]


async def crawl(*args: str, fault: str | None = None) -> tuple[int, str]:
    """``python -m skitter ARGS`` (bounded), with ``$SKITTER_FAULT_POINT`` set to ``fault``."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("SKITTER_FAULT_POINT", None)
    if fault is not None:
        env["SKITTER_FAULT_POINT"] = fault
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=REPO, env=env, start_new_session=True,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


def journals(out: Path) -> list[str]:
    return sorted(
        str(p.relative_to(out))
        for name in (PAGES_FILE, LINKS_FILE, "handoff/to-*.jsonl")
        for p in out.glob(f"shards/*/{name}")
    )


async def check_usable(out: Path, tmp_path: Path, want_urls: set[str]) -> None:
    """Every page once in the merged pages.jsonl; report, merge and resume work."""
    urls = [r["url"] for r in records(out)]
    assert len(urls) == len(set(urls)) and set(urls) == want_urls
    rc, _, err = await run_cli("crawl", "--resume", "--out", str(out))
    assert rc == 0, err
    assert report(out)["finished"] is True
    assert [r["url"] for r in records(out)] == urls  # nothing added, nothing lost
    rc, _, err = await run_cli("report", str(out), "--quiet")
    assert rc == 0 and (out / "report.html").exists(), err
    merged = tmp_path / "merged"
    rc, _, err = await run_cli("merge", str(out), "--out", str(merged))
    assert rc == 0, err
    assert sorted(r["url"] for r in records(merged)) == sorted(urls)
    assert graph(merged) == graph(out)


async def test_a_finished_crawl_keeps_only_the_merged_journals(site: Site, tmp_path: Path) -> None:
    hosts, seeds = build(site)
    out = tmp_path / "out"
    rc, err = await crawl(*crawl_args(site, hosts, out, "--processes", "2"), *seeds)
    assert rc == 0, err
    rep = report(out)
    assert rep["finished"] is True and rep["stop_reason"] == "done"
    assert journals(out) == []
    # the shards' checkpoints stay: the report's counters come from them
    assert len(list(out.glob("shards/*/checkpoint.json"))) == 2
    want = {site.url(h, p) for h in hosts for p in ("/", "/p1", "/p2")}
    assert rep["totals"]["records"] == len(want)
    assert (out / LINKS_FILE).stat().st_size > 0
    await check_usable(out, tmp_path, want)


async def test_a_stopped_crawl_keeps_its_shard_journals(site: Site, tmp_path: Path) -> None:
    hosts, seeds = build(site)
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out, "--processes", "2", "--max-pages", "3")
    rc, err = await crawl(*args, *seeds)
    assert rc == 0, err
    assert report(out)["stop_reason"] == "max_pages"
    assert journals(out)  # a resume with a higher --max-pages goes on from them
    assert len(records(out)) == 3


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["merged-synced", "finished-marked", "journal-removed"])
async def test_a_crash_while_sealing_leaves_a_usable_folder(
    site: Site, tmp_path: Path, fault: str
) -> None:
    hosts, seeds = build(site)
    out = tmp_path / "out"
    rc, err = await crawl(*crawl_args(site, hosts, out, "--processes", "2"), *seeds, fault=fault)
    assert rc == -9, err  # the coordinator was killed at the fault point
    finished = json.loads((out / "report.json").read_text()).get("finished") is True
    assert finished == (fault != "merged-synced")
    if fault == "journal-removed":  # killed after the first removal
        assert 0 < len(journals(out)) < 6
    want = {site.url(h, p) for h in hosts for p in ("/", "/p1", "/p2")}
    await check_usable(out, tmp_path, want)
