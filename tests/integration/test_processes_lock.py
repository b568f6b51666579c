"""The output folder's lock (:mod:`skitter.folder_lock`) around ``--processes`` crawls: the
coordinator (:func:`skitter.processes.run_processes`) takes it itself, so a library caller is
refused a folder another process holds (named by pid, nothing changed) like the CLI is; the
CLI's own lock and the coordinator's are one (re-entrant), released at the end."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web

from skitter.errors import StateError
from skitter.folder_lock import LOCK_FILE, check_free, lock_folder
from skitter.processes import run_processes
from skitter.state import load_state
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
from tests.unit.test_folder_lock import seen_from_another_process

HOLD = """
import sys
from pathlib import Path
from skitter.folder_lock import lock_folder
lock_folder(Path(sys.argv[1]), "crawl")
print("held", flush=True)
sys.stdin.read()  # until the test closes it (or kills this process)
"""

def hold(folder: Path) -> subprocess.Popen[str]:
    """Another process holding ``folder``'s lock (it says "held" once it does)."""
    cmd = [sys.executable, "-c", HOLD, str(folder)]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def tree(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and modification time (ns), by relative path."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def build(site: Site, hosts: list[str]) -> list[str]:
    """Three pages on each host, linked in a chain from its root; returns the seeds."""
    for x in hosts:
        site.route(x, "/", links_page("/a"))
        site.route(x, "/a", links_page("/b"))
        site.route(x, "/b", links_page("/"))
    return [site.url(x, "/") for x in hosts]


async def test_the_cli_and_its_coordinator_share_one_lock_released_at_the_end(
    site: Site, tmp_path: Path
) -> None:
    hosts = hosts_on_shards(site.port, 2, [0, 1], "lk")
    seeds = build(site, hosts)
    gate = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(gate.wait(), 30)
        return web.Response(text="<p>x</p>", content_type="text/html")

    site.route(hosts[0], "/b", held)
    out = tmp_path / "out"
    proc = await start_cli(*crawl_args(site, hosts, out, "--processes", "2"), *seeds)
    try:
        await wait_for(lambda: any(h.path_qs == "/b" for h in site.hits), proc)
        assert proc.returncode is None
        # held by the CLI (the coordinator's lock is the same one), named by its pid
        said = await asyncio.to_thread(seen_from_another_process, out)
        assert said.startswith(f"{out} is in use by a running skitter crawl (pid {proc.pid})")
        assert (out / LOCK_FILE).read_bytes() == f"{proc.pid} crawl\n".encode()
    finally:
        gate.set()
    rc, _, err = await finish(proc)
    assert rc == 0, err
    assert sorted(r["url"] for r in records(out)) == sorted(
        site.url(x, p) for x in hosts for p in ("/", "/a", "/b")
    )
    # released at the end: no crawler process kept a copy
    assert await asyncio.to_thread(seen_from_another_process, out) == "free"
    check_free(out)
    lock_folder(out).release()


async def test_a_library_call_is_refused_a_folder_another_process_holds(
    site: Site, tmp_path: Path
) -> None:
    hosts = hosts_on_shards(site.port, 2, [0, 1], "ll")
    seeds = build(site, hosts)
    out = tmp_path / "out"
    args = crawl_args(site, hosts, out, "--processes", "2")
    rc, _, err = await run_cli(*args, "--max-pages", "2", *seeds)
    assert rc == 0, err
    assert len(records(out)) == 2
    resumed = replace(load_state(out), resume=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    new = replace(resumed, out_dir=str(empty), resume=False)
    holders = [hold(folder) for folder in (out, empty)]
    try:
        for holder in holders:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        for holder, folder, settings in zip(holders, (out, empty), (resumed, new), strict=True):
            before = tree(folder)
            with pytest.raises(StateError) as exc:
                run_processes(settings)
            assert str(exc.value) == (
                f"{folder} is in use by a running skitter crawl (pid {holder.pid}); wait until "
                f"it ends, or stop it (Ctrl-C, or kill {holder.pid}) first"
            )
            assert tree(folder) == before  # nothing changed, nothing created
        assert list(tree(empty)) == [LOCK_FILE]
        for holder in holders:  # kill -9 of the holder frees the folder
            holder.send_signal(signal.SIGKILL)
            assert holder.wait(60) == -signal.SIGKILL
    finally:
        for holder in holders:
            if holder.poll() is None:
                holder.kill()
                holder.wait()
            for pipe in (holder.stdin, holder.stdout):
                if pipe is not None:
                    pipe.close()
    assert await asyncio.to_thread(seen_from_another_process, out) == "free"
    rc, _, err = await run_cli(*crawl_args(site, hosts, out), "--resume", "--max-pages", "6")
    assert rc == 0, err
    assert sorted(r["url"] for r in records(out)) == sorted(
        site.url(x, p) for x in hosts for p in ("/", "/a", "/b")
    )
    assert os.path.exists(out / "report.json")
