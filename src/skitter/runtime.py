"""Process-wide settings of a crawling process: how Python's cyclic garbage collector runs,
and giving freed heap memory back to the operating system.

A crawl allocates tens of thousands of short-lived objects per second (links, rows, requests),
almost none of them in reference cycles. With CPython's default thresholds (700, 10, 10) the
collector ran ~6% of a crawl's CPU time (py-spy, shared benchmark web), mostly re-scanning
the long-lived objects of the start-up (modules, caches, settings) in older generations.

Parsing HTML allocates its trees with C ``malloc`` (Lexbor: 20-28 bytes per byte of markup);
glibc keeps what a freed tree leaves inside its heap for reuse instead of returning it, so a
process's resident set creeps up page after page (rust-doc, 21,635 pages: from ~100 to ~140
MB) although little of it is in use. :func:`trim_heap` hands those free pages back;
:func:`tune_heap` keeps blocks of :data:`MMAP_THRESHOLD_BYTES` and more (a large page's body)
out of the heap altogether.
"""

from __future__ import annotations

import gc
from typing import Any

__all__ = [
    "GC_THRESHOLDS",
    "MMAP_THRESHOLD_BYTES",
    "freeze_for_fork",
    "trim_heap",
    "tune_gc",
    "tune_heap",
]

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


#: Allocations of at least this many bytes get their own memory map (glibc
#: ``M_MMAP_THRESHOLD``), returned to the system when freed: see :func:`tune_heap`.
MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
#: Free memory at the top of the heap kept before glibc gives it back (``M_TRIM_THRESHOLD``):
#: the mmap threshold. Measured on the many-hosts benchmark (minor page faults of a crawl):
#: 1 MiB, 226-246k (the heap's top given back and faulted in again); 4 MiB, 48k, as 8 MiB
#: (twice the mmap threshold, glibc's own pairing), which kept 4 MiB more resident.
TRIM_THRESHOLD_BYTES = MMAP_THRESHOLD_BYTES
_M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
_M_MMAP_THRESHOLD = -3

_malloc_trim: Any = None  # None: not looked up yet; False: not glibc
_heap_tuned = False


def tune_heap() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD_BYTES` and its trim threshold at
    :data:`TRIM_THRESHOLD_BYTES` (``mallopt``; idempotent,
    process-wide, inherited by forked children).

    glibc's threshold is dynamic: each freed mapped block raises it to that block's size (up
    to 32 MiB), so after one 10 MB body every later body and parse buffer under 10 MB came
    from the heap, where what is freed stays resident until a trim. Measured on rust-doc
    ``--processes 2`` (minor page faults of the crawl: each mapped block is faulted in
    anew): 4 MiB, peak PSS of the tree 166 MiB against 178 untuned, +35% page faults;
    1 MiB, 170 MiB, +55%; 256 KiB, +140% and half again the system CPU.

    A fixed mmap threshold also stops glibc from raising its trim threshold (128 KiB by
    default), so the top of the heap was given back and faulted in again all the time: 7x the
    minor page faults of a many-hosts crawl (328k against 48k) and about 0.7 s more system
    CPU on 10k pages. The trim threshold is fixed too, at :data:`TRIM_THRESHOLD_BYTES`.

    Returns:
        True when the threshold was set; False without glibc (a no-op then) or if already set.
    """
    global _heap_tuned
    if _heap_tuned:
        return False
    _heap_tuned = True
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    trimmed = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(trimmed)


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
