"""skitter.runtime: the crawling process's garbage-collector settings and heap trimming."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Sequence

import pytest

from skitter.runtime import (
    GC_THRESHOLDS,
    MMAP_THRESHOLD_BYTES,
    TRIM_THRESHOLD_BYTES,
    freeze_for_fork,
    trim_heap,
    tune_gc,
)


def test_tune_gc_freezes_startup_objects_and_raises_young_threshold() -> None:
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS == (20_000, 10, 10)
        assert gc.get_freeze_count() > 0  # start-up objects are out of every collection
        assert gc.isenabled()  # cycles are still collected
        a: list[object] = []
        a.append(a)
        del a
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim")
def test_trim_heap_gives_free_heap_pages_back() -> None:
    # 100 kB blocks come from the heap (below glibc's mmap threshold); a block kept at the end
    # stops the heap's top from shrinking by itself, so only malloc_trim returns the rest
    blocks = [bytearray(100_000) for _ in range(600)]
    for b in blocks:
        b[::4096] = b"x" * len(b[::4096])  # touch every page: resident
    tail = bytearray(100_000)
    tail[::4096] = b"y" * len(tail[::4096])
    del blocks
    before = _rss_bytes()
    assert trim_heap() is True
    assert before - _rss_bytes() > 30_000_000  # most of the ~60 MB freed is given back
    assert tail[0] == ord("y")
    assert trim_heap() in (True, False)  # nothing left to give: still fine


def test_freeze_for_fork_freezes_everything_live() -> None:
    try:
        freeze_for_fork()
        assert gc.get_freeze_count() > 0
        assert gc.get_count()[0] < 100  # collected first
    finally:
        gc.unfreeze()


def test_parse_stage_trims_every_32_mib_and_after_large_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    import skitter.parse_stage as ps
    from skitter.models import Page

    trims: list[int] = []
    monkeypatch.setattr(ps, "trim_heap", lambda: trims.append(1) or True)

    def extract(body: bytes, url: str, ct: str | None, xr: Sequence[str]) -> Page:
        return Page(links=[], base_url=url, encoding="utf-8", title="", noindex=False,
                    nofollow=False, ids=frozenset())  # fmt: skip

    stage = ps.ParseStage(extract)
    body = b"<p>" + b"x" * (256 * 1024 - 3)  # 256 KiB: not a large page

    async def parse_n(n: int) -> None:
        for _ in range(n):
            await stage.parse(body, "http://a.test/", "text/html", ())

    asyncio.run(parse_n(127))
    assert trims == []  # 31.75 MiB
    asyncio.run(parse_n(1))
    assert trims == [1]  # 32 MiB
    asyncio.run(parse_n(128))
    assert trims == [1, 1]
    # a page larger than TRIM_PAGE_BYTES: trimmed right after it
    small = b"<p>x</p>"
    asyncio.run(stage.parse(small, "http://a.test/", "text/html", ()))
    assert trims == [1, 1]
    big = b"<p>" + b"x" * ps.TRIM_PAGE_BYTES
    asyncio.run(stage.parse(big, "http://a.test/", "text/html", ()))
    assert trims == [1, 1, 1]
    assert ps.TRIM_EVERY_BYTES == 32 * 1024 * 1024
    # issue 16: after every page over 256 KiB (was 1 MiB: rust-doc -p2 peaked ~7 MiB higher)
    assert ps.TRIM_PAGE_BYTES == 256 * 1024
    asyncio.run(stage.parse(b"<p>" + b"x" * (300 * 1024), "http://a.test/", "text/html", ()))
    assert trims == [1, 1, 1, 1]


#: glibc's mallinfo2() in a child process: ``libc.mallinfo2()`` (keepcost, hblkhd, ...)
_PRELUDE = """
import ctypes, sys
from skitter.runtime import MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES, tune_heap
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
"""


def _in_child(script: str, mode: str) -> int:
    """The number ``script`` (after :data:`_PRELUDE`) prints in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", script, mode], capture_output=True, text=True, check=True
    ).stdout
    return int(out)


_MALLINFO = (
    _PRELUDE
    + """
if sys.argv[1] == "tuned":
    assert tune_heap() is True and tune_heap() is False  # once per process
big = bytearray(10_000_000)  # a 10 MB body, mapped, then freed
del big
before = libc.mallinfo2().hblkhd
body = bytearray(2 * MMAP_THRESHOLD_BYTES)
print(libc.mallinfo2().hblkhd - before)
"""
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
@pytest.mark.parametrize(("mode", "mapped"), [("tuned", True), ("default", False)])
def test_tune_heap_keeps_blocks_past_the_threshold_in_maps_of_their_own(
    mode: str, mapped: bool
) -> None:
    # glibc's default threshold rises to the size of a freed mapped block: after a 10 MB body
    # a 2 MiB block came from the heap (resident until trimmed); tuned, it has its own map
    grown = _in_child(_MALLINFO, mode)
    assert (grown >= 2 * MMAP_THRESHOLD_BYTES) is mapped, grown


_KEEPCOST = (
    _PRELUDE
    + """
if sys.argv[1] == "tuned":
    tune_heap()
else:  # the mmap threshold alone: the trim threshold stays at glibc's 128 KiB
    libc.mallopt(-3, MMAP_THRESHOLD_BYTES)
block = bytearray(MMAP_THRESHOLD_BYTES // 2)  # from the heap, at its top
del block
print(libc.mallinfo2().keepcost)
"""
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
@pytest.mark.parametrize(("mode", "kept"), [("tuned", True), ("mmap-only", False)])
def test_tune_heap_keeps_the_freed_top_of_the_heap_below_the_trim_threshold(
    mode: str, kept: bool
) -> None:
    # with the mmap threshold fixed alone, every free at the heap's top past 128 KiB gave the
    # memory back, and the next allocation faulted it in again (7x the page faults of a crawl)
    keepcost = _in_child(_KEEPCOST, mode)
    assert (keepcost >= MMAP_THRESHOLD_BYTES // 2) is kept, keepcost
    assert keepcost < TRIM_THRESHOLD_BYTES + MMAP_THRESHOLD_BYTES
