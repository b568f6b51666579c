"""skitter.parse_stage and skitter.parse_lanes: which pages go to a sibling process to be
parsed, and what happens when that sibling is gone (real forked processes, real pipes)."""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from multiprocessing.process import BaseProcess
from typing import Any

import pytest

from skitter.html_chunks import SEGMENT_MIN_BYTES
from skitter.links import extract
from skitter.models import Page
from skitter.parse_lanes import LaneExecutor, ParseMesh, serve
from skitter.parse_stage import ParseStage

FN = functools.partial(extract, bot_token=None, resources=False, ids=False)
SMALL = b'<a href="/s">s</a>'


def _sibling(mesh: ParseMesh) -> None:  # pragma: no cover - runs in the forked sibling
    _clients, servers = mesh.bind(1)
    for t in serve(servers):
        t.join()  # until the client's end closes


def run_closing(stage: ParseStage, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """``run()`` on a fresh event loop, then ``stage`` closed whatever happened."""
    try:
        asyncio.run(run())
    finally:
        stage.close()


def _refusing(body: bytes, url: str, ct: str | None, xr: Sequence[str]) -> Page:
    raise ValueError(f"cannot parse {url}")


def _unsendable(body: bytes, url: str, ct: str | None, xr: Sequence[str]) -> Any:
    return threading.Lock()  # cannot be pickled back


FREE: list[Any] = []  # the last mesh's shared flags (the fixture's)


@pytest.fixture
def sibling() -> Iterator[tuple[BaseProcess, LaneExecutor]]:
    """Process 1 of a two-process mesh (serving parse jobs; its flag says free), and process
    0's executor."""
    ctx = multiprocessing.get_context("fork")
    mesh = ParseMesh.make(ctx, 2)
    mesh.free[1] = 1
    FREE[:] = [mesh.free]
    proc = ctx.Process(target=_sibling, args=(mesh,), daemon=True)
    proc.start()
    clients, servers = mesh.bind(0)
    for s in servers:  # process 0 serves nobody here
        s.close()
    lanes = LaneExecutor(clients, FREE[0], 0)
    try:
        yield proc, lanes
    finally:
        lanes.shutdown(wait=False, cancel_futures=True)
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join()


def test_large_pages_are_parsed_here_small_ones_by_the_sibling_when_host_bound(
    sibling: tuple[BaseProcess, LaneExecutor],
) -> None:
    """Regression (issue 16, rust-doc --processes 2): a 10 MB page sent elsewhere was held
    three times (body, pickle, the other process's copy): large pages are parsed here. The
    small ones go to the sibling crawler process, not to a forked helper."""
    proc, lanes = sibling
    stage = ParseStage(FN, remote=FN, executor=lanes)
    large = b"<p>" + b'<a href="/x">x</a>\n' * (SEGMENT_MIN_BYTES // 19 + 10)
    assert len(large) > SEGMENT_MIN_BYTES

    async def run() -> None:
        try:
            stage.host_bound = False  # many ready hosts: always here
            page = await stage.parse(SMALL, "http://a.test/", "text/html", ())
            assert [link.url for link in page.links] == ["http://a.test/s"]
            stage.host_bound = True
            page = await stage.parse(SMALL, "http://a.test/", "text/html", ())
            assert [link.url for link in page.links] == ["http://a.test/s"]
            page = await stage.parse(large, "http://a.test/", "text/html", ())
            assert {link.url for link in page.links} == {"http://a.test/x"}
            assert len(page.links) == SEGMENT_MIN_BYTES // 19 + 10
        finally:
            stage.close()

    asyncio.run(run())
    sections = stage.report_sections()["parse"]
    assert sections["pid"] == os.getpid()
    assert sections["here"] == 2  # the first small page and the large one
    assert sections["helpers"] == {str(proc.pid): 1}  # the host-bound small page
    proc.join(60)  # closing the stage closed the lane: the sibling's server saw EOF
    assert proc.exitcode == 0


def test_an_error_in_the_sibling_is_raised_here(
    sibling: tuple[BaseProcess, LaneExecutor],
) -> None:
    _proc, lanes = sibling
    stage = ParseStage(FN, remote=_refusing, executor=lanes)
    stage.host_bound = True

    async def run() -> None:
        with pytest.raises(ValueError, match=r"cannot parse http://a\.test/e"):
            await stage.parse(SMALL, "http://a.test/e", "text/html", ())
        stage.remote = _unsendable  # an answer that cannot be pickled: an error, no hang
        with pytest.raises(RuntimeError, match="cannot be sent back"):
            await stage.parse(SMALL, "http://a.test/u", "text/html", ())
        stage.remote = lambda *a: None  # a call that cannot be pickled: its error, no hang
        with pytest.raises(Exception, match="pickle"):
            await stage.parse(SMALL, "http://a.test/l", "text/html", ())
        # the lane still works after those errors
        stage.remote = FN
        page = await stage.parse(SMALL, "http://a.test/", "text/html", ())
        assert [link.url for link in page.links] == ["http://a.test/s"]

    run_closing(stage, run)
    assert sum(stage.report_sections()["parse"]["helpers"].values()) == 1


def test_a_killed_sibling_breaks_the_lane_and_pages_are_parsed_here(
    sibling: tuple[BaseProcess, LaneExecutor],
) -> None:
    """kill -9 of the sibling: its end of the pipe closes, the waiting page gets EOF and is
    parsed here, and so is every later page (no hang, nothing lost)."""
    proc, lanes = sibling
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    stage = ParseStage(FN, remote=FN, executor=lanes)
    stage.host_bound = True

    async def run() -> None:
        for _ in range(3):
            page = await stage.parse(SMALL, "http://a.test/", "text/html", ())
            assert [link.url for link in page.links] == ["http://a.test/s"]

    run_closing(stage, run)
    sections = stage.report_sections()
    assert sections == {} or sections["parse"]["helpers"] == {}
    assert stage._here == 3
    assert stage.workers == 0  # the broken lanes are not tried again


def test_mesh_bind_keeps_only_the_processes_own_ends() -> None:
    ctx = multiprocessing.get_context("fork")
    mesh = ParseMesh.make(ctx, 3)
    assert sorted(mesh.pipes) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    ends = dict(mesh.pipes)
    clients, servers = mesh.bind(1)
    assert clients == [ends[1, 0][0], ends[1, 2][0]]
    assert servers == [ends[0, 1][1], ends[2, 1][1]]
    assert all(not c.closed for c in clients + servers)
    others = [e for key, pair in ends.items() for e in pair if e not in clients + servers]
    assert len(others) == 8 and all(e.closed for e in others)
    for c in clients + servers:
        c.close()


def test_a_busy_sibling_is_not_given_pages_and_host_bound_is_published(
    sibling: tuple[BaseProcess, LaneExecutor],
) -> None:
    """A sibling whose own hosts keep its loop busy (flag 0) parses nothing for others: its
    parse thread would take the GIL from its event loop (the many-hosts shape)."""
    proc, lanes = sibling
    free = FREE[0]
    stage = ParseStage(FN, remote=FN, executor=lanes)
    assert list(free) == [0, 1]
    stage.host_bound = True
    assert list(free) == [1, 1]  # this process published that it has room

    async def run() -> None:
        free[1] = 0  # the sibling is busy
        await stage.parse(SMALL, "http://a.test/", "text/html", ())
        free[1] = 1
        await stage.parse(SMALL, "http://a.test/", "text/html", ())

    try:
        asyncio.run(run())
    finally:
        stage.host_bound = False
        assert list(free) == [0, 1]
        stage.close()
    sections = stage.report_sections()["parse"]
    assert sections["here"] == 1
    assert sections["helpers"] == {str(proc.pid): 1}
