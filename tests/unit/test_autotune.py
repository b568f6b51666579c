"""The concurrency controller (pure): readings in, limit out."""

from __future__ import annotations

import asyncio

import pytest

from skitter.autotune import AutoLimit, ConcurrencyController, Load, ProcessLoad


def load(cpu: float = 0.1, mem: int = 0, lag: float = 0.0, peak: int = 10**6) -> Load:
    return Load(cpu=cpu, memory_bytes=mem, lag_s=lag, peak_inflight=peak)


def test_rises_while_cpu_is_low_and_the_limit_binds_never_past_the_ceiling() -> None:
    c = ConcurrencyController(50, max_memory_bytes=100, start=4, floor=1)
    values = [c.update(load(cpu=0.2), float(t)) for t in range(40)]
    assert values[0] == 5 and values == sorted(values) and values[-1] == 50
    assert c.history[0] == (0.0, 4, "start") and c.history[-1][1:] == (50, "raise")


def test_does_not_rise_when_the_limit_is_not_what_holds_the_crawl_back() -> None:
    c = ConcurrencyController(50, max_memory_bytes=100, start=8)
    assert [c.update(load(cpu=0.1, peak=3), float(t)) for t in range(5)] == [8] * 5


def test_backs_off_on_cpu_lag_and_memory_and_holds_in_the_band() -> None:
    c = ConcurrencyController(64, cpu_target=0.8, max_memory_bytes=1000, start=40, floor=8)
    assert c.update(load(cpu=0.9), 0) == 35  # over the target: -1/8
    assert c.update(load(cpu=0.78), 1) == 35  # inside the headroom band: hold
    assert c.update(load(lag=1.0), 2) == 27  # the event loop lags: -1/4
    for t in range(3, 30):
        c.update(load(cpu=2.0), t)
    assert c.value == 8 == c.floor  # CPU and lag never go below the floor ...
    assert c.update(load(mem=2000), 30) == 4  # ... memory halves below it
    for t in range(31, 40):
        c.update(load(mem=2000), t)
    assert c.value == 1
    whys = [h[2] for h in c.history]
    assert whys[:3] == ["start", "cpu", "lag"] and whys[-3:] == ["memory"] * 3
    assert set(whys[3:-3]) == {"cpu"}


def test_settles_under_a_cpu_cost_per_fetch() -> None:
    """CPU proportional to the fetches in flight (2 % of a core each): the limit climbs,
    then stays in a band around target / cost."""
    c = ConcurrencyController(256, cpu_target=0.85, max_memory_bytes=10**9, start=2, floor=2)
    seen = []
    for t in range(200):
        v = c.value
        seen.append(c.update(load(cpu=0.02 * v, peak=v), float(t)))
    assert max(seen) > 30
    tail = seen[50:]
    assert min(tail) >= 0.85 / 0.02 * 0.6 and max(tail) <= 0.85 / 0.02 * 1.3


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        ConcurrencyController(0, max_memory_bytes=1)


async def test_process_load_and_auto_limit_driven_by_events() -> None:
    cpu = iter([0.0, 0.5])
    wall = iter([0.0, 1.0, 1.25, 1.25])
    pl = ProcessLoad(clock=lambda: next(wall), cpu_clock=lambda: next(cpu), rss=lambda: 123)
    r = await pl.read(7)
    assert r == Load(cpu=0.4, memory_bytes=123, lag_s=0.25, peak_inflight=7)
    ticks: asyncio.Queue[None] = asyncio.Queue()

    async def sleep(_s: float) -> None:
        await ticks.get()

    async def read(peak: int) -> Load:
        return load(cpu=0.1, peak=peak)

    woken = []
    auto = AutoLimit(
        ConcurrencyController(10, max_memory_bytes=1, start=2, floor=1), read=read, sleep=sleep
    )
    auto.controller.max_memory_bytes = 10
    task = asyncio.create_task(auto.run(lambda: 100, lambda: woken.append(1)))
    for _ in range(3):
        ticks.put_nowait(None)
    while auto.readings < 3:
        await asyncio.sleep(0)
    task.cancel()
    assert auto.value == 5 and len(woken) == 3  # 2 -> 3 -> 4 -> 5
    rep = auto.report_sections()["concurrency"]
    assert rep["mode"] == "auto" and rep["readings"] == 3 and rep["history"][-1][1] == 5
