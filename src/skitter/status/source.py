"""What the status server shows, and where it comes from: the data-source protocol.

The server (:mod:`skitter.status.server`) reads a :class:`StatusSource`: headline totals
(:class:`Totals`), one :class:`HostRow` per host, and the Prometheus text. :class:`LiveState` is
the source of one crawling process: an observer the crawl feeds with events (a record written,
links decided, a robots.txt decision, a host made to wait); its frontier counts come from a
callable. A ``--processes`` coordinator or a Redis cluster plugs in another source with the
same three methods; tests drive the server with a fake one.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from skitter.export.pages import PageRecord
    from skitter.status.metrics import CrawlMetrics

__all__ = ["HOST_FIELDS", "HostRow", "LiveState", "StatusSource", "Totals", "status_class"]


def status_class(status: int) -> str:
    """The class label of an HTTP status: ``"2xx"`` for 200-299 ... (RFC 9110 §15); a status
    outside 100-599 is ``"other"``. (Here rather than in :mod:`skitter.status.metrics`, whose
    prometheus_client a process that keeps no metrics does not load.)

    >>> status_class(404)
    '4xx'
    """
    return f"{status // 100}xx" if 100 <= status <= 599 else "other"


@dataclass(slots=True)
class HostRow:
    """One host's live state (a row of ``/api/hosts``).

    Attributes:
        host: host name as crawled (lower case, port kept when not the default).
        queued: URLs of this host queued or in flight (added minus finished).
        fetched: pages.jsonl records of this host.
        errors: records that ended with an error kind (no usable response).
        bytes: decoded body bytes received.
        avg_s: mean whole-fetch time of its records, seconds (0.0 before any).
        delay_s: the gap kept between two requests to it now, seconds.
        delay_cause: ``"delay"`` (--delay), ``"crawl-delay"`` (robots.txt), ``"retry-after"``
            or ``"backoff"`` (after 429/5xx/transport errors).
        backoff_until: Unix time (seconds) until which it waits after a failure, or None.
        robots: ``"unknown"``, ``"allowed"`` (fetched, parsed), ``"unreachable"`` (5xx or
            network error: disallow all, RFC 9309 §2.3.1.4) or ``"ignored"``.
        robots_disallowed: its URLs dropped by robots.txt.
        last_error: the last error kind or HTTP status >= 400 seen (``"timeout"``, ``"503"``).
    """

    host: str
    queued: int = 0
    fetched: int = 0
    errors: int = 0
    bytes: int = 0
    avg_s: float = 0.0
    delay_s: float = 0.0
    delay_cause: str = "delay"
    backoff_until: float | None = None
    robots: str = "unknown"
    robots_disallowed: int = 0
    last_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``/api/hosts`` rows (keys as the attributes)."""
        d = asdict(self)
        d["avg_s"] = round(self.avg_s, 4)
        d["delay_s"] = round(self.delay_s, 3)
        return d


#: The sortable fields of ``/api/hosts``.
HOST_FIELDS = tuple(HostRow.__dataclass_fields__)


@dataclass(slots=True)
class Totals:
    """The headline figures of a crawl at one instant (``/api/status`` ``totals``).

    Attributes:
        state: ``"running"``, ``"stopping"`` or ``"finished"``.
        fetched: pages.jsonl records so far; ``ok``: 2xx among them; ``errors``: with an error
            kind; ``bytes``: decoded body bytes.
        queued, in_flight: frontier requests waiting / leased; ``hosts``: hosts with work;
        hosts_in_backoff: hosts waiting after a failure.
        robots_disallowed: URLs dropped by robots.txt.
        elapsed_s: seconds since the crawl (this run) started.
        target: the number of records the crawl is known to end at (link checks, --max-pages),
            or None when the frontier does not know its size.
        by_status_class, by_status, by_error, by_content_type: record counts.
        workers, worker_runs: on a Redis crawl, the worker runs alive now and all the runs
            whose counts are summed (finished and dead ones too); None otherwise.
    """

    state: str = "running"
    fetched: int = 0
    ok: int = 0
    errors: int = 0
    bytes: int = 0
    queued: int = 0
    in_flight: int = 0
    hosts: int = 0
    hosts_in_backoff: int = 0
    robots_disallowed: int = 0
    elapsed_s: float = 0.0
    target: int | None = None
    by_status_class: dict[str, int] = field(default_factory=dict)
    by_status: dict[str, int] = field(default_factory=dict)
    by_error: dict[str, int] = field(default_factory=dict)
    by_content_type: dict[str, int] = field(default_factory=dict)
    workers: int | None = None
    worker_runs: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (keys as the attributes)."""
        d = asdict(self)
        d["elapsed_s"] = round(self.elapsed_s, 3)
        return d


class StatusSource(Protocol):
    """What the status server reads; each call returns a fresh view (never cached by it)."""

    async def totals(self) -> Totals:
        """The headline figures now."""
        ...

    def hosts(self) -> Sequence[HostRow]:
        """One row per host known so far (any order; the server sorts and pages)."""
        ...

    async def metrics_text(self) -> str:
        """The Prometheus text exposition (format 0.0.4) of the crawl now."""
        ...


#: A frontier's counts: ``(queued, in_flight, hosts)``.
CountsFn = Callable[[], Awaitable[tuple[int, int, int]]]


class LiveState:
    """The status source of one crawling process, fed by the crawl's events.

    Args:
        counts: async callable giving the frontier's ``(queued, in_flight, hosts)``.
        delay_s: the --delay politeness gap in seconds (a host's default delay).
        target: records the crawl ends at, when known (see :attr:`Totals.target`).
        metrics: the crawl's :class:`CrawlMetrics` (a new one by default).
        clock: Unix time in seconds (``time.time``; tests pass their own).
        link_decisions: callable giving the crawl's links.tsv decision counts so far (read
            when the figures are asked for, instead of an event per page).
        ignore_robots: robots.txt is not consulted (the hosts' robots column says so).
        bounded: the frontier holds all the work there will be (a link check: links are
            checked, never followed far), so the target is what is fetched, queued and in
            flight.
    """

    def __init__(
        self,
        counts: CountsFn | None = None,
        *,
        delay_s: float = 0.0,
        target: int | None = None,
        metrics: CrawlMetrics | None = None,
        clock: Callable[[], float] = time.time,
        link_decisions: Callable[[], Mapping[str, int]] | None = None,
        ignore_robots: bool = False,
        bounded: bool = False,
    ) -> None:
        self.bounded = bounded
        self._link_decisions = link_decisions
        self._links_seen: Counter[str] = Counter()
        self._robots_default = "ignored" if ignore_robots else "unknown"
        if metrics is None:  # (prometheus_client: loaded by a crawl that keeps metrics only)
            from skitter.status.metrics import CrawlMetrics

            metrics = CrawlMetrics()
        self.metrics = metrics
        self.state = "running"
        self.target = target
        self._counts = counts
        self._delay_s = delay_s
        self._clock = clock
        self._started = clock()
        self._hosts: dict[str, HostRow] = {}
        self._elapsed_sum: dict[str, float] = {}
        self._added: Counter[str] = Counter()
        #: hosts whose row changed since :meth:`take_dirty` (a cluster publisher reads it)
        self._dirty: set[str] = set()
        self._crawl_delay: dict[str, float] = {}
        self._t = Totals()
        self._by_class: Counter[str] = Counter()
        self._by_status: Counter[str] = Counter()
        self._by_error: Counter[str] = Counter()
        self._by_type: Counter[str] = Counter()

    def attach(
        self, counts: CountsFn | None, link_decisions: Callable[[], Mapping[str, int]] | None
    ) -> None:
        """Set where the frontier counts and the link decisions are read from."""
        self._counts = counts
        self._link_decisions = link_decisions

    def _host(self, host: str) -> HostRow:
        self._dirty.add(host)
        h = self._hosts.get(host)
        if h is None:
            h = self._hosts[host] = HostRow(
                host, delay_s=self._delay_s, robots=self._robots_default
            )
        return h

    # ------------------------------------------------------------------ events

    def queued(self, counts: Mapping[str, int]) -> None:
        """URLs newly queued, ``{host: n}``."""
        for host, n in counts.items():
            self._host(host).queued += n
            self._added[host] += n

    def record(
        self,
        host: str,
        status: int | None,
        error: str | None,
        content_type: str | None,
        nbytes: int,
        elapsed_s: float,
        attempts: int,
    ) -> None:
        """One pages.jsonl record of ``host`` was written (``elapsed_s`` in seconds)."""
        self.metrics.observe_record(status, error, nbytes, elapsed_s, attempts)
        t = self._t
        t.fetched += 1
        t.bytes += nbytes
        h = self._host(host)
        h.queued = max(0, h.queued - 1)
        h.fetched += 1
        h.bytes += nbytes
        total = self._elapsed_sum.get(host, 0.0) + elapsed_s
        self._elapsed_sum[host] = total
        h.avg_s = total / h.fetched
        if status is not None:
            self._by_class[status_class(status)] += 1
            self._by_status[str(status)] += 1
            if 200 <= status < 300:
                t.ok += 1
            elif status >= 400:
                h.last_error = str(status)
        if error is not None:
            t.errors += 1
            h.errors += 1
            h.last_error = error
            self._by_error[error] += 1
        if content_type:
            self._by_type[content_type] += 1

    def links(self, decisions: Mapping[str, int]) -> None:
        """A page's links.tsv decision counts ``{decision: n}``."""
        self.metrics.observe_links(decisions)

    def robots(self, host: str, decision: str, state: str | None = None) -> None:
        """A robots.txt decision on one URL of ``host`` (``allowed``, ``disallowed``,
        ``unreachable``); ``state`` updates the host's robots column."""
        self.metrics.observe_robots(decision)
        h = self._host(host)
        if decision == "disallowed":
            h.robots_disallowed += 1
            h.queued = max(0, h.queued - 1)
            self._t.robots_disallowed += 1
        if state is not None:
            h.robots = state

    def wait(self, host: str, delay_s: float, cause: str, until: float | None = None) -> None:
        """``host`` now keeps ``delay_s`` seconds between requests because of ``cause``
        (see :attr:`HostRow.delay_cause`); ``until`` (Unix seconds) marks a backoff."""
        h = self._host(host)
        h.delay_s = delay_s
        h.delay_cause = cause
        h.backoff_until = until

    # ------------------------------------------------------------------ CrawlObserver

    def on_record(self, rec: PageRecord, host: str) -> None:
        """See :meth:`skitter.observer.CrawlObserver.on_record`."""
        self.record(
            host, rec.status, rec.error, rec.content_type, rec.bytes, rec.elapsed_s, rec.attempts
        )

    def on_robots(self, host: str, decision: str, crawl_delay_s: float | None) -> None:
        """See :meth:`skitter.observer.CrawlObserver.on_robots`."""
        self.robots(host, decision, "unreachable" if decision == "unreachable" else "ok")
        if crawl_delay_s is not None:
            self._crawl_delay[host] = crawl_delay_s

    def on_schedule(self, host: str, not_before: float, retry: bool) -> None:
        """See :meth:`skitter.observer.CrawlObserver.on_schedule`: the gap's cause is
        ``backoff`` for a retry, else ``delay`` (--delay), ``crawl-delay`` (robots.txt) or
        ``retry-after`` (a longer gap: a final 429/503's Retry-After)."""
        gap = max(0.0, not_before - self._clock())
        if retry:
            self.wait(host, gap, "backoff", not_before)
            return
        cd = self._crawl_delay.get(host)
        if gap <= self._delay_s + 0.05:
            cause = "delay"
        elif cd is not None and gap <= cd + 0.05:
            cause = "crawl-delay"
        else:
            cause = "retry-after"
        self.wait(host, gap, cause)

    def on_queued(self, urls: frozenset[str]) -> None:
        """See :meth:`skitter.observer.CrawlObserver.on_queued`."""
        # canonical URLs: lower-case host, default port dropped, so the authority is the key
        self.queued(Counter(_authority(u) for u in urls))

    def finish(self, state: str = "finished") -> None:
        """The crawl ended (or is stopping)."""
        self.state = state

    # ------------------------------------------------------------------ StatusSource

    async def totals(self) -> Totals:
        """See :meth:`StatusSource.totals`."""
        return self.totals_now(await self._counts() if self._counts is not None else None)

    def totals_now(self, counts: tuple[int, int, int] | None = None) -> Totals:
        """:meth:`totals` with the frontier's ``(queued, in_flight, hosts)`` given (None:
        keep the last ones)."""
        t = self._t
        now = self._clock()
        if self._link_decisions is not None:
            for decision, n in self._link_decisions().items():
                if n > self._links_seen[decision]:
                    self.metrics.observe_links({decision: n - self._links_seen[decision]})
                    self._links_seen[decision] = n
        if counts is not None:
            t.queued, t.in_flight, t.hosts = counts
        t.hosts_in_backoff = sum(
            1 for h in self._hosts.values() if h.backoff_until is not None and h.backoff_until > now
        )
        t.state = self.state
        t.elapsed_s = now - self._started
        t.target = self.target
        if t.target is None and self.bounded:  # everything known is queued: fetched + the rest
            t.target = t.fetched + t.queued + t.in_flight
        t.by_status_class = dict(self._by_class)
        t.by_status = dict(self._by_status)
        t.by_error = dict(self._by_error)
        t.by_content_type = dict(self._by_type)
        return Totals(**{k: getattr(t, k) for k in t.__dataclass_fields__})

    def hosts(self) -> Sequence[HostRow]:
        """See :meth:`StatusSource.hosts`."""
        return list(self._hosts.values())

    def take_dirty(self) -> list[tuple[HostRow, int, float]]:
        """The hosts whose row changed since the last call, as ``(row, urls queued here in
        all, seconds of fetch time in all)``; the set is then emptied."""
        out = [
            (self._hosts[h], self._added[h], self._elapsed_sum.get(h, 0.0))
            for h in self._dirty
            if h in self._hosts
        ]
        self._dirty.clear()
        return out

    async def metrics_text(self) -> str:
        """See :meth:`StatusSource.metrics_text` (the gauges are refreshed first)."""
        t = await self.totals()
        self.metrics.set_frontier(t.queued, t.in_flight, t.hosts, t.hosts_in_backoff)
        return self.metrics.text()


def _authority(url: str) -> str:
    """``host[:port]`` of a canonical absolute URL (userinfo dropped), without parsing it."""
    rest = url.split("://", 1)[-1]
    for sep in "/?#":
        rest = rest.split(sep, 1)[0]
    return rest.rsplit("@", 1)[-1]
