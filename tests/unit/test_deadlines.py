"""The adaptive deadline estimator (pure)."""

from __future__ import annotations

import pytest

from skitter.deadlines import DeadlineEstimator


def test_no_deadline_before_enough_samples_then_percentile_times_factor() -> None:
    e = DeadlineEstimator(20.0, floor_s=0.5, min_samples=5, factor=3.0, percentile=0.95)
    for _ in range(4):
        e.observe("h", 1.0)
    assert e.deadline("h") is None and e.deadline("other") is None
    e.observe("h", 1.0)
    assert e.deadline("h") == pytest.approx(3.0)
    for s in [0.1] * 18 + [2.0]:  # 20 samples ... 1 slow in 20 is the 95th percentile
        e.observe("h", s)
    assert e.quantile("h") == 1.0 and e.deadline("h") == pytest.approx(3.0)


def test_floor_ceiling_and_backoff_after_a_timeout() -> None:
    e = DeadlineEstimator(10.0, floor_s=2.0, min_samples=3)
    for _ in range(3):
        e.observe("fast", 0.01)
        e.observe("slow", 5.0)
    assert e.deadline("fast") == 2.0  # floor
    assert e.deadline("slow") == 10.0  # ceiling
    e.timed_out("fast")
    assert e.deadline("fast") == 4.0
    e.timed_out("fast")
    assert e.deadline("fast") == 8.0
    e.timed_out("fast")
    assert e.deadline("fast") == 10.0  # never past the ceiling
    e.observe("fast", 0.01)  # an answer: back to its own deadline
    assert e.deadline("fast") == 2.0
    rep = e.report_sections()["timeouts"]
    assert rep["hosts"] == {"fast": 2.0, "slow": 10.0} and rep["mode"] == "auto"


def test_window_forgets_old_samples_and_bad_arguments() -> None:
    e = DeadlineEstimator(30.0, floor_s=0.1, min_samples=1, window=3, factor=1.0)
    for s in (9.0, 1.0, 1.0, 1.0):
        e.observe("h", s)
    assert e.deadline("h") == 1.0
    with pytest.raises(ValueError):
        DeadlineEstimator(1.0, floor_s=2.0)
    with pytest.raises(ValueError):
        DeadlineEstimator(10.0, percentile=0)
