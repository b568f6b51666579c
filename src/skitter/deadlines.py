"""``--timeout auto``: each host's idle-read deadline from its observed response times.

:class:`DeadlineEstimator` is pure: it is told how long each response of a host took
(``observe``) and when a fetch of it timed out (``timed_out``), and answers the host's
idle-read deadline in seconds: ``percentile`` (0.95) of its last ``window`` response times
× ``factor`` (3), kept between ``floor_s`` and ``ceiling_s``; before ``min_samples``
responses it answers None (the fixed deadline applies). After a timeout the host's deadline
is doubled (up to the ceiling) until its next answer, so a live host that slowed down is
given more time on the retry while a dead one is still given up quickly. A slow but steady
host is never cut off: its deadline grows with its response times.

The fixed ``--timeout`` stays the hard cap on the whole fetch (:mod:`skitter.fetch.aiohttp`);
the ceiling is the fixed idle-read deadline.

:class:`DeadlineFetcher` applies the estimator to page fetches (a
:class:`~skitter.fetch.base.Fetcher` wrapper, wired by :mod:`skitter.build`).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from skitter.errors import FetchTimeout
from skitter.models import Request, Response
from skitter.urls import host_key

__all__ = ["DeadlineEstimator", "DeadlineFetcher"]

#: Hosts remembered (the least recently added are forgotten past this).
MAX_HOSTS = 50_000


class DeadlineEstimator:
    """Per-host idle-read deadlines (pure; see the module doc).

    Args:
        ceiling_s: the longest deadline (the fixed idle-read deadline), seconds.
        floor_s: the shortest deadline, seconds.
        percentile: 0 < p <= 1, of the last ``window`` response times.
        factor: multiplier on that percentile.
        min_samples: responses needed before the host gets its own deadline.
    Raises:
        ValueError: floor above ceiling, percentile outside (0, 1], factor < 1.
    """

    def __init__(
        self,
        ceiling_s: float,
        *,
        floor_s: float = 3.0,
        percentile: float = 0.95,
        factor: float = 3.0,
        min_samples: int = 5,
        window: int = 50,
    ) -> None:
        if not 0 < floor_s <= ceiling_s or not 0 < percentile <= 1 or factor < 1:
            raise ValueError("need 0 < floor_s <= ceiling_s, 0 < percentile <= 1, factor >= 1")
        self.ceiling_s = ceiling_s
        self.floor_s = floor_s
        self.percentile = percentile
        self.factor = factor
        self.min_samples = min_samples
        self.window = window
        self._samples: dict[str, deque[float]] = {}
        self._backoff: dict[str, int] = {}
        self.cut = 0  # fetches cut by an adaptive deadline

    def observe(self, host: str, seconds: float) -> None:
        """A response of ``host`` took ``seconds`` (request start to end of body)."""
        q = self._samples.get(host)
        if q is None:
            if len(self._samples) >= MAX_HOSTS:
                self._samples.pop(next(iter(self._samples)))
            q = self._samples[host] = deque(maxlen=self.window)
        q.append(max(0.0, seconds))
        self._backoff.pop(host, None)

    def timed_out(self, host: str) -> None:
        """A fetch of ``host`` hit its deadline: double it until the next response."""
        self._backoff[host] = min(self._backoff.get(host, 0) + 1, 16)

    def quantile(self, host: str) -> float | None:
        """The ``percentile`` of ``host``'s response times (nearest rank), seconds."""
        q = self._samples.get(host)
        if not q or len(q) < self.min_samples:
            return None
        ordered = sorted(q)
        return ordered[max(0, math.ceil(self.percentile * len(ordered)) - 1)]

    def deadline(self, host: str) -> float | None:
        """``host``'s idle-read deadline in seconds, or None (not enough responses yet)."""
        p = self.quantile(host)
        if p is None:
            return None
        d = min(self.ceiling_s, max(self.floor_s, p * self.factor))
        return min(self.ceiling_s, d * float(2 ** self._backoff.get(host, 0)))

    def report_sections(self) -> dict[str, Any]:
        """``{"timeouts": {"mode": "auto", "floor_s", "ceiling_s", "percentile", "factor",
        "cut", "hosts": {host: deadline_s}}}`` (the first 100 hosts with a deadline) of this
        session (report.json's covers every session:
        :func:`skitter.reporting.whole_tuning_sections`)."""
        hosts: dict[str, float] = {}
        for h in self._samples:
            d = self.deadline(h)
            if d is not None:
                hosts[h] = round(d, 3)
                if len(hosts) >= 100:
                    break
        return {
            "timeouts": {
                "mode": "auto",
                "floor_s": self.floor_s,
                "ceiling_s": self.ceiling_s,
                "percentile": self.percentile,
                "factor": self.factor,
                "cut": self.cut,
                "hosts": hosts,
            }
        }


class DeadlineFetcher:
    """A :class:`~skitter.fetch.base.Fetcher` giving each GET its host's adaptive idle-read
    deadline and learning from the answers. Other attributes are the wrapped fetcher's.

    Args:
        inner: the fetcher (e.g. :class:`skitter.fetch.aiohttp.AiohttpFetcher`).
        estimator: the deadlines.
    """

    def __init__(self, inner: Any, estimator: DeadlineEstimator) -> None:
        self._inner = inner
        self.estimator = estimator

    async def fetch(self, request: Request, **kw: Any) -> Response:
        """:meth:`Fetcher.fetch` with ``read_timeout_s`` = the host's deadline (if known).

        Raises: what the inner fetch raises; a timeout at the adaptive deadline says so in
        its detail."""
        est = self.estimator
        host = host_key(request.url)
        deadline = est.deadline(host)
        if deadline is not None and "read_timeout_s" not in kw:
            kw["read_timeout_s"] = deadline
        try:
            resp: Response = await self._inner.fetch(request, **kw)
        except FetchTimeout as exc:
            est.timed_out(host)
            if deadline is None or "idle read" not in exc.detail:
                raise
            est.cut += 1
            raise FetchTimeout(
                f"{exc.detail} (adaptive deadline {deadline:.3g} s from the host's "
                f"response times; fixed idle deadline {est.ceiling_s:g} s)",
                bytes_read=exc.bytes_read,
            ) from exc
        est.observe(host, resp.elapsed_s)
        return resp

    async def aclose(self) -> None:
        """Close the wrapped fetcher."""
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
