"""Process-wide settings of a crawling process: how Python's cyclic garbage collector runs.

A crawl allocates tens of thousands of short-lived objects per second (links, rows, requests),
almost none of them in reference cycles. With CPython's default thresholds (700, 10, 10) the
collector ran ~6% of a crawl's CPU time (py-spy, shared benchmark web), mostly re-scanning
the long-lived objects of the start-up (modules, caches, settings) in older generations.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_gc"]

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
