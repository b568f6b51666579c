"""Process-wide settings of a crawling process: how Python's cyclic garbage collector runs,
and giving freed heap memory back to the operating system.

A crawl allocates tens of thousands of short-lived objects per second (links, rows, requests),
almost none of them in reference cycles. With CPython's default thresholds (700, 10, 10) the
collector ran ~6% of a crawl's CPU time (py-spy, shared benchmark web), mostly re-scanning
the long-lived objects of the start-up (modules, caches, settings) in older generations.

Parsing HTML allocates its trees with C ``malloc`` (Lexbor: 20-28 bytes per byte of markup);
glibc keeps what a freed tree leaves inside its heap for reuse instead of returning it, so a
process's resident set creeps up page after page (rust-doc, 21,635 pages: from ~100 to ~140
MB) although little of it is in use. :func:`trim_heap` hands those free pages back.
"""

from __future__ import annotations

import gc
from typing import Any

__all__ = ["GC_THRESHOLDS", "freeze_for_fork", "trim_heap", "tune_gc"]

#: Young-generation collections every 20,000 net allocations (CPython's default: 700); the
#: older generations at CPython's default ratios. At ~100 bytes an object this lets at most a
#: few MB of cyclic garbage wait for a collection.
GC_THRESHOLDS = (20_000, 10, 10)


def tune_gc() -> None:
    """Freeze what exists now (the start-up's modules and objects: never scanned again,
    :func:`gc.freeze`) and raise the young-generation threshold to :data:`GC_THRESHOLDS`.
    Call once in a crawling process, after start-up and before the crawl. Cycles are still
    collected; nothing is freed later than at the next collection."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def freeze_for_fork() -> None:
    """Call just before ``fork()``: collect, then freeze every object (:func:`gc.freeze`) so
    that no later collection in the parent or the child writes to the objects they share
    (a collection writes into every object it scans, which turns the shared copy-on-write
    pages into private copies: Python's advice for forking servers, see :func:`gc.freeze`)."""
    gc.collect()
    gc.freeze()


_malloc_trim: Any = None  # None: not looked up yet; False: not glibc


def trim_heap() -> bool:
    """Return the free memory of the C heap to the operating system (glibc
    ``malloc_trim(0)``: free pages inside the heap too, not only at its top). Costs about
    20 ms after a few hundred parsed pages, microseconds when there is nothing to give back.

    Returns:
        True when something was released; False otherwise or without glibc (a no-op then).
    """
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        try:
            import ctypes

            _malloc_trim = ctypes.CDLL(None).malloc_trim  # the C library this process uses
            _malloc_trim.argtypes = [ctypes.c_size_t]
            _malloc_trim.restype = ctypes.c_int
        except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to call
            pass
    if _malloc_trim is False:
        return False
    return bool(_malloc_trim(0))
