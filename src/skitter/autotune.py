"""``--concurrency auto``: the number of fetches in flight tuned from the process's load.

:class:`ConcurrencyController` is pure: it is given readings (:class:`Load`: the process's
CPU as a share of one core, its resident memory in bytes, the event loop's lag in seconds,
the most fetches in flight since the last reading) and answers the new limit:

- memory above ``max_memory_bytes``: halve (down to 1);
- CPU above ``cpu_target``: lower by an eighth; loop lag above ``max_lag_s``: by a quarter
  (neither below ``floor``, 8: on a crawl whose CPU goes to parsing, not to connections,
  fewer fetches in flight would only cost throughput);
- else, if the limit was reached since the last reading (it is what holds the crawl back)
  and CPU is below ``cpu_target`` × :data:`HEADROOM`: raise by a quarter (at least 1, not
  above ``ceiling``);
- else keep it.

This is additive-increase/multiplicative-decrease in spirit (Crawlee's AutoscaledPool and
the seed crawler's load-based tuning do the same). Per-host (``--host-concurrency``) and
per-IP (``--ip-concurrency``) limits still apply on top.

:class:`AutoLimit` runs the controller in the crawl (a reading every ``interval_s``); the
clock, the sleep and the readings are injected (trio style), so tests drive it by events.
:class:`FixedLimit` is ``--concurrency N``. Both are the crawl loop's concurrency port:
``value`` (read before each lease), ``run(peak, wake)`` (a task), ``report_sections()``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from skitter.settings import CrawlSettings, FocusSettings

__all__ = [
    "HEADROOM",
    "AutoLimit",
    "ConcurrencyController",
    "FixedLimit",
    "Load",
    "ProcessLoad",
    "concurrency_limit",
    "default_max_memory",
    "share_memory",
]

#: Raise the limit only while CPU is below this share of the target.
HEADROOM = 0.9
#: Changes kept in report.json's concurrency history (the latest ones).
MAX_HISTORY = 500


@dataclass(frozen=True, slots=True)
class Load:
    """One reading of the process's load.

    Attributes:
        cpu: CPU time used per second of wall time since the last reading (1.0 = one core).
        memory_bytes: resident set size, bytes.
        lag_s: event loop lag, seconds (how late a callback ran).
        peak_inflight: most fetches in flight at once since the last reading.
    """

    cpu: float
    memory_bytes: int
    lag_s: float
    peak_inflight: int


class ConcurrencyController:
    """The limit on fetches in flight from load readings (pure; see the module doc).

    Args:
        ceiling: highest limit (``--concurrency N``, or 256 with ``auto`` alone).
        cpu_target: share of one core (0.85).
        max_memory_bytes: resident memory ceiling, bytes.
        start: first limit (clamped to floor..ceiling); floor: lowest limit set for CPU or
            lag (memory may lower it to 1).
        max_lag_s: event loop lag above which the limit is lowered, seconds.

    Attributes:
        value: the current limit.
        peak: the highest limit set so far.
        history: ``[(seconds since the first reading, limit, reason)]`` of every change
            (the last :data:`MAX_HISTORY`), reason one of "start", "raise", "cpu", "lag",
            "memory".
    """

    def __init__(
        self,
        ceiling: int,
        *,
        cpu_target: float = 0.85,
        max_memory_bytes: int,
        start: int = 8,
        floor: int = 8,
        max_lag_s: float = 0.25,
    ) -> None:
        if ceiling < 1 or floor < 1 or cpu_target <= 0:
            raise ValueError("ceiling and floor must be >= 1, cpu_target > 0")
        self.ceiling = ceiling
        self.floor = min(floor, ceiling)
        self.cpu_target = cpu_target
        self.max_memory_bytes = max_memory_bytes
        self.max_lag_s = max_lag_s
        self.value = max(1, min(start, ceiling))
        self.peak = self.value
        self.history: list[tuple[float, int, str]] = [(0.0, self.value, "start")]
        self._t0: float | None = None

    def update(self, load: Load, now: float) -> int:
        """Take one reading (``now``: seconds, any monotonic origin); returns the new limit."""
        if self._t0 is None:
            self._t0 = now
        v = self.value
        if load.memory_bytes > self.max_memory_bytes:
            new, why = max(1, v // 2), "memory"
        elif load.cpu > self.cpu_target:
            new, why = min(v, max(self.floor, v - max(1, v // 8))), "cpu"
        elif load.lag_s > self.max_lag_s:
            new, why = min(v, max(self.floor, v - max(1, v // 4))), "lag"
        elif load.peak_inflight >= v and load.cpu < self.cpu_target * HEADROOM:
            new, why = min(self.ceiling, v + max(1, v // 4)), "raise"
        else:
            new, why = v, ""
        if new != v:
            self.value = new
            self.peak = max(self.peak, new)
            self.history.append((round(now - self._t0, 3), new, why))
            if len(self.history) > MAX_HISTORY:
                del self.history[1 : len(self.history) - MAX_HISTORY + 1]
        return new


def default_max_memory() -> int:
    """A quarter of the machine's physical memory, bytes (1 GiB if unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4)
    except (ValueError, OSError, AttributeError):
        return 1 << 30


def _rss_bytes() -> int:
    """Resident set size of this process, bytes (``/proc/self/statm``; else peak RSS)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class ProcessLoad:
    """Readings of this process: CPU share since the previous call, RSS, loop lag.

    Args:
        clock: wall seconds (monotonic); cpu_clock: process CPU seconds; rss: bytes.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.process_time,
        rss: Callable[[], int] = _rss_bytes,
    ) -> None:
        self._clock = clock
        self._cpu_clock = cpu_clock
        self._rss = rss
        self._last = (clock(), cpu_clock())

    async def read(self, peak_inflight: int) -> Load:
        """A reading; the lag is how long one pass of the event loop took just now."""
        t0 = self._clock()
        await asyncio.sleep(0)
        lag = self._clock() - t0
        now, cpu = self._clock(), self._cpu_clock()
        wall = now - self._last[0]
        share = (cpu - self._last[1]) / wall if wall > 0 else 0.0
        self._last = (now, cpu)
        return Load(cpu=share, memory_bytes=self._rss(), lag_s=lag, peak_inflight=peak_inflight)


class FixedLimit:
    """``--concurrency N``: the crawl loop's concurrency port, constant."""

    def __init__(self, value: int) -> None:
        self.value = value

    async def run(self, peak: Callable[[], int], wake: Callable[[], None]) -> None:
        """Nothing to tune."""

    def report_sections(self) -> dict[str, Any]:
        """No section."""
        return {}


class AutoLimit:
    """``--concurrency auto``: a :class:`ConcurrencyController` fed every ``interval_s``.

    Args:
        controller: the pure part.
        read: ``await read(peak_inflight) -> Load`` (default :meth:`ProcessLoad.read`).
        sleep: ``await sleep(seconds)`` between readings (tests pass an event wait).
        clock: seconds (monotonic) for the history.
        interval_s: seconds between readings.
    """

    def __init__(
        self,
        controller: ConcurrencyController,
        *,
        read: Callable[[int], Awaitable[Load]] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = 0.5,
    ) -> None:
        self.controller = controller
        self._read = read if read is not None else ProcessLoad().read
        self._sleep = sleep
        self._clock = clock
        self.interval_s = interval_s
        self.readings = 0

    @property
    def value(self) -> int:
        """The current limit."""
        return self.controller.value

    async def run(self, peak: Callable[[], int], wake: Callable[[], None]) -> None:
        """Read, update, repeat (until cancelled). ``peak()`` returns and resets the most
        fetches in flight since the last call; ``wake()`` tells the loop the limit rose."""
        while True:
            await self._sleep(self.interval_s)
            load = await self._read(peak())
            before = self.controller.value
            self.readings += 1
            if self.controller.update(load, self._clock()) > before:
                wake()

    def report_sections(self) -> dict[str, Any]:
        """``{"concurrency": {"mode": "auto", "ceiling", "floor", "cpu_target",
        "max_memory_bytes", "current", "peak", "readings", "history": [[s, limit, reason],
        ...]}}`` of this session (report.json's covers every session:
        :func:`skitter.reporting.whole_tuning_sections`)."""
        c = self.controller
        return {
            "concurrency": {
                "mode": "auto",
                "ceiling": c.ceiling,
                "floor": c.floor,
                "cpu_target": c.cpu_target,
                "max_memory_bytes": c.max_memory_bytes,
                "current": c.value,
                "peak": c.peak,
                "readings": self.readings,
                "history": [list(h) for h in c.history],
            }
        }


def share_memory(focus: FocusSettings, processes: int) -> FocusSettings:
    """``focus`` for one of ``processes`` crawler processes: its share of ``--max-memory``
    (the default, a quarter of the machine, is for all of them)."""
    total = focus.max_memory_bytes or default_max_memory()
    return replace(focus, max_memory_bytes=max(1, total // max(1, processes)))


def concurrency_limit(settings: CrawlSettings) -> FixedLimit | AutoLimit:
    """The concurrency port of a crawl: :class:`AutoLimit` with ``focus.concurrency_auto``
    (ceiling ``politeness.concurrency``), else :class:`FixedLimit`."""
    p, f = settings.politeness, settings.focus
    if not f.concurrency_auto:
        return FixedLimit(p.concurrency)
    ctl = ConcurrencyController(
        p.concurrency,
        cpu_target=f.cpu_target,
        max_memory_bytes=f.max_memory_bytes or default_max_memory(),
    )
    return AutoLimit(ctl)
