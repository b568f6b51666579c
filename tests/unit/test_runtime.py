"""skitter.runtime: the crawling process's garbage-collector settings."""

from __future__ import annotations

import gc

from skitter.runtime import GC_THRESHOLDS, tune_gc


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
