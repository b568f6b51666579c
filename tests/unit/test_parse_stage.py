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
from skitter.parse_lanes import BUSY, IDLE, RAW_BYTES_MIN, ROOM, LaneExecutor, ParseMesh, serve
from skitter.parse_stage import (
    LANE_BATCH_PAGES,
    LANE_DEPTH,
    LANE_MAX_BYTES,
    ParseStage,
    _parse_jobs,
)

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


def _refusing_bad(body: bytes, url: str, ct: str | None, xr: Sequence[str]) -> Page:
    if "bad" in url:
        raise ValueError(f"cannot parse {url}")
    return FN(body, url, ct, xr)


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
        lanes.shutdown()
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join()


def _large_page() -> bytes:
    """A page over LANE_MAX_BYTES (parsed segment by segment): a <base>, a title, links of
    every kind, links inside a script (not links) and rel=nofollow ones."""
    head = (
        b'<!doctype html><html><head><title>Big  page</title><base href="/docs/">'
        b'<link rel="canonical" href="/docs/big.html"></head><body>'
    )
    rows = []
    for i in range(LANE_MAX_BYTES // 40):
        if i % 1000 == 7:
            rows.append(b"<script>var s = \"<a href='/no'>\";</script>")
        rel = b' rel="nofollow"' if i % 97 == 0 else b""
        rows.append(b'<p><a href="p%d.html#s%d"%s>page %d</a></p>\n' % (i % 4000, i, rel, i))
    return head + b"".join(rows) + b"</body></html>"


def _digest(body: bytes, tag: str) -> tuple[str, int, str]:
    import hashlib

    return hashlib.sha1(body).hexdigest(), len(body), tag


def test_pages_are_parsed_by_the_sibling_when_host_bound_segmented_ones_here(
    sibling: tuple[BaseProcess, LaneExecutor],
) -> None:
    """Small pages go to the sibling crawler process when host-bound (not to a forked
    helper), and so do pages up to LANE_MAX_BYTES (sent raw, parsed there by segments),
    giving the inline Page. Regression (issue 16, rust-doc --processes 2): pages up to 4 MiB
    went to the sibling, which then stayed ~5-10 MiB larger (the summed peak RSS of the
    processes 216-222 MiB); over 1 MiB they are parsed here."""
    proc, lanes = sibling
    stage = ParseStage(FN, remote=FN, executor=lanes)
    large = _large_page()
    assert LANE_MAX_BYTES == 1024 * 1024 < len(large)
    inline = FN(large, "http://a.test/d/big.html", "text/html", ())
    assert len(inline.links) == LANE_MAX_BYTES // 40 + 1 and inline.title == "Big page"
    assert inline.links[1].url == "http://a.test/docs/p0.html#s0"
    # the largest page a sibling parses (not segmented; its body travels raw)
    edge = large[: LANE_MAX_BYTES - len(b"</body></html>")] + b"</body></html>"
    assert len(edge) == LANE_MAX_BYTES > SEGMENT_MIN_BYTES and len(edge) >= RAW_BYTES_MIN
    edge_inline = FN(edge, "http://a.test/d/edge.html", "text/html", ())

    async def run() -> None:
        try:
            stage.host_bound = False  # many ready hosts: always here
            page = await stage.parse(SMALL, "http://a.test/", "text/html", ())
            assert [link.url for link in page.links] == ["http://a.test/s"]
            stage.host_bound = True
            page = await stage.parse(SMALL, "http://a.test/", "text/html", ())
            assert [link.url for link in page.links] == ["http://a.test/s"]
            page = await stage.parse(edge, "http://a.test/d/edge.html", "text/html", ())
            assert page == edge_inline
            page = await stage.parse(large, "http://a.test/d/big.html", "text/html", ())
            assert page == inline
        finally:
            stage.close()

    asyncio.run(run())
    sections = stage.report_sections()["parse"]
    assert sections["pid"] == os.getpid()
    assert sections["here"] == 2  # the first small page and the one over LANE_MAX_BYTES
    assert sections["helpers"] == {str(proc.pid): 2}  # host-bound: small and edge
    proc.join(60)  # closing the stage closed the lane: the sibling's server saw EOF
    assert proc.exitcode == 0


def test_past_lane_depth_pages_in_flight_the_next_is_parsed_here(
    sibling: tuple[BaseProcess, LaneExecutor],
) -> None:
    """Up to LANE_DEPTH pages wait for the one sibling at once (regression: with 2, the busy
    process of rust-doc parsed 11% of its pages itself while the sibling mostly idled); the
    next one is parsed here, and every page gets its own links."""
    proc, lanes = sibling
    stage = ParseStage(FN, remote=FN, executor=lanes)
    stage.host_bound = True
    n = LANE_DEPTH + 1

    async def run() -> None:
        pages = await asyncio.gather(
            *(
                stage.parse(b'<a href="/p%d">p</a>' % i, "http://a.test/", None, ())
                for i in range(n)
            )
        )
        assert [[link.url for link in p.links] for p in pages] == [
            [f"http://a.test/p{i}"] for i in range(n)
        ]

    run_closing(stage, run)
    sections = stage.report_sections()["parse"]
    assert LANE_DEPTH == 8
    assert sections["here"] == 1
    assert sections["helpers"] == {str(proc.pid): LANE_DEPTH}


def test_large_bytes_arguments_are_sent_raw_and_arrive_whole(
    sibling: tuple[BaseProcess, LaneExecutor],
) -> None:
    """Bytes of RAW_BYTES_MIN or more travel unpickled after the call, smaller ones in it;
    the sibling gets each argument whole and in its place, job after job."""
    import hashlib

    _proc, lanes = sibling
    bodies = [b"x" * (RAW_BYTES_MIN - 1), bytes(range(256)) * (RAW_BYTES_MIN // 16), b"", b"a"]

    async def run() -> list[Any]:  # all sent at once: queued in the lane, answered in order
        return await asyncio.gather(
            *(lanes.call(_digest, b, f"t{i}") for i, b in enumerate(bodies))
        )

    got = asyncio.run(run())
    assert got == [(hashlib.sha1(b).hexdigest(), len(b), f"t{i}") for i, b in enumerate(bodies)]

    async def cancelled() -> Any:  # a cancelled call's answer is not taken for the next one's
        first = asyncio.ensure_future(lanes.call(_digest, bodies[1], "gone"))
        await asyncio.sleep(0)  # sent
        first.cancel()
        return await lanes.call(_digest, b"a", "next")

    assert asyncio.run(cancelled()) == (hashlib.sha1(b"a").hexdigest(), 1, "next")


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
    """kill -9 of the sibling: its end of the pipe closes, the waiting page (a large one,
    whose body is sent raw) gets EOF and is parsed here, and so is every later page (no
    hang, nothing lost)."""
    proc, lanes = sibling
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    stage = ParseStage(FN, remote=FN, executor=lanes)
    stage.host_bound = True

    large = _large_page()

    async def run() -> None:
        page = await stage.parse(large, "http://a.test/d/big.html", "text/html", ())
        assert page == FN(large, "http://a.test/d/big.html", "text/html", ())
        for _ in range(3):
            page = await stage.parse(SMALL, "http://a.test/", "text/html", ())
            assert [link.url for link in page.links] == ["http://a.test/s"]

    run_closing(stage, run)
    sections = stage.report_sections()
    assert sections == {} or sections["parse"]["helpers"] == {}
    assert stage._here == 4  # the large page too: parsed here, segment by segment
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


def test_a_busy_process_gives_its_pages_to_an_idle_sibling(
    sibling: tuple[BaseProcess, LaneExecutor],
) -> None:
    """Regression (issue 16, many-hosts benchmark): when one process's hosts were done, the
    other still had ~10% of the pages, all parsed on its own core (not host-bound: its hosts
    kept it full) while the idle process's core was free. A sibling with nothing in flight
    (IDLE) is given pages even by a process that is not host-bound; a sibling that only has
    room (ROOM) is not; and the stage publishes IDLE over ROOM over BUSY."""
    proc, lanes = sibling
    free = FREE[0]
    stage = ParseStage(FN, remote=FN, executor=lanes)
    assert stage.host_bound is False and stage.idle is False

    async def run() -> None:
        free[1] = ROOM  # the sibling has room, this process is busy: parsed here
        await stage.parse(SMALL, "http://a.test/", "text/html", ())
        free[1] = IDLE  # the sibling's hosts are done: it parses
        page = await stage.parse(SMALL, "http://a.test/", "text/html", ())
        assert [link.url for link in page.links] == ["http://a.test/s"]

    try:
        asyncio.run(run())
        stage.host_bound = True
        assert free[0] == ROOM
        stage.idle = True
        assert free[0] == IDLE
        stage.host_bound = False
        assert free[0] == IDLE
        stage.idle = False
        assert free[0] == BUSY
    finally:
        stage.close()
    sections = stage.report_sections()["parse"]
    assert sections["here"] == 1
    assert sections["helpers"] == {str(proc.pid): 1}


def test_small_pages_go_to_the_sibling_in_batches_each_caller_gets_its_own(
    sibling: tuple[BaseProcess, LaneExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages for a sibling are sent LANE_BATCH_PAGES to a call (one message each way, parsed
    back to back there); each caller gets its own page, or its own error; past LANE_DEPTH
    pages in flight the rest are parsed here."""
    _proc, lanes = sibling
    assert LANE_BATCH_PAGES == LANE_DEPTH == 8
    stage = ParseStage(_refusing_bad, remote=_refusing_bad, executor=lanes, batch_wait_s=0.001)
    stage.host_bound = True
    calls: list[tuple[str, int]] = []
    real = lanes.call

    async def counting(fn: Callable[..., Any], /, *args: Any) -> Any:
        calls.append((fn.__name__, len(args[1]) if fn is _parse_jobs else 1))
        return await real(fn, *args)

    monkeypatch.setattr(lanes, "call", counting)
    n = LANE_BATCH_PAGES + 3
    urls = [f"http://a.test/{'bad' if i == 2 else 'ok'}{i}" for i in range(n)]

    async def run() -> None:
        got = await asyncio.gather(
            *(
                stage.parse(b'<a href="/p%d">p</a>' % i, u, "text/html", ())
                for i, u in enumerate(urls)
            ),
            return_exceptions=True,
        )
        for i, page in enumerate(got):
            if i == 2:
                assert isinstance(page, ValueError) and str(page) == f"cannot parse {urls[2]}"
            else:
                assert isinstance(page, Page) and [ln.url for ln in page.links] == [
                    f"http://a.test/p{i}"
                ]

    run_closing(stage, run)
    assert calls == [("_parse_jobs", LANE_BATCH_PAGES)]  # one call for the first 8
    parse = stage.report_sections()["parse"]
    assert (sum(parse["helpers"].values()), parse["here"]) == (LANE_BATCH_PAGES - 1, 3)
