"""Prometheus metrics of one crawl (prometheus-client, a registry per crawl).

Every metric lives in the :class:`CrawlMetrics` object's own ``CollectorRegistry`` (never the
process-global one), so two crawls in one process, or a test, never mix their counts. Names follow
the Prometheus conventions (``_total`` counters, base units: seconds, bytes); no label is per-host
(hosts are unbounded), so the series count is fixed by the error kinds, status classes and
decisions.

The counters are fed one pages.jsonl record at a time (:meth:`CrawlMetrics.observe_record`), so at
the end of a crawl ``skitter_fetches_total`` and ``skitter_fetch_errors_total`` equal pages.jsonl's
counts; :meth:`CrawlMetrics.from_output` rebuilds them from an output folder (a ``--processes``
crawl, ``skitter report``). The text is the Prometheus text exposition format 0.0.4; written to a
file (:meth:`CrawlMetrics.write_textfile`) it suits node_exporter's textfile collector.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Info
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from skitter import __version__
from skitter.status.source import status_class as status_class

if TYPE_CHECKING:
    from skitter.report.rows import PageRow

__all__ = ["DURATION_BUCKETS_S", "CrawlMetrics", "RecordCounts", "status_class"]

#: Upper bounds (seconds) of the ``skitter_fetch_duration_seconds`` buckets.
DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: Content type of the text exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class RecordCounts:
    """What :class:`CrawlMetrics` counts of pages.jsonl records, tallied in plain Python (one
    row costs a few dict updates, not a prometheus-client call per metric) and added to a
    :class:`CrawlMetrics` at once (:meth:`CrawlMetrics.add_counts`).

    Attributes:
        fetches: records with an HTTP status, by status class (:func:`status_class`).
        errors: records with an error kind, by kind.
        bytes: decoded body bytes; retries: attempts beyond the first.
        durations: records per :data:`DURATION_BUCKETS_S` bucket (the last: +Inf), of those
            with a fetch time >= 0; duration_sum: their fetch times added in order (seconds).
    """

    __slots__ = ("bytes", "duration_sum", "durations", "errors", "fetches", "retries")

    def __init__(self) -> None:
        self.fetches: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.bytes = 0
        self.retries = 0
        self.durations = [0] * (len(DURATION_BUCKETS_S) + 1)
        self.duration_sum = 0.0

    def add_row(self, row: PageRow) -> None:
        """Count one pages.jsonl row (missing fields count as absent).

        Raises:
            ValueError, TypeError: ``bytes``, ``elapsed_s`` or ``attempts`` is not a number.
        """
        status = row.status
        if isinstance(status, int):
            cls = _CLASSES.get(status) or status_class(status)
            self.fetches[cls] = self.fetches.get(cls, 0) + 1
        error = row.error
        if error:
            kind = str(error)
            self.errors[kind] = self.errors.get(kind, 0) + 1
        nbytes = int(row.bytes or 0)
        if nbytes > 0:
            self.bytes += nbytes
        attempts = int(row.attempts or 1)
        if attempts > 1:
            self.retries += attempts - 1
        elapsed = float(row.elapsed_s or 0.0)
        if elapsed >= 0:
            self.durations[bisect_left(DURATION_BUCKETS_S, elapsed)] += 1
            self.duration_sum += elapsed


_CLASSES = {s: status_class(s) for s in range(100, 600)}


class CrawlMetrics:
    """The metrics of one crawl, in a registry of their own.

    Counters: ``skitter_fetches_total{status_class}`` (records with an HTTP response),
    ``skitter_fetch_errors_total{kind}`` (records with an error kind), ``skitter_bytes_total``
    (decoded body bytes), ``skitter_robots_decisions_total{decision}`` (``allowed``,
    ``disallowed``, ``unreachable``), ``skitter_link_decisions_total{decision}`` (links.tsv
    decisions), ``skitter_retries_total`` (attempts beyond the first). Gauges:
    ``skitter_queued_urls``, ``skitter_leased_requests``, ``skitter_active_hosts``,
    ``skitter_hosts_in_backoff``. Histogram: ``skitter_fetch_duration_seconds`` (a record's
    whole fetch, retries included). Info: ``skitter_info{version}``.

    Not thread-safe beyond what prometheus-client guarantees; the crawl updates it from its
    event loop.
    """

    def __init__(self, version: str = __version__) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.fetches = Counter(
            "skitter_fetches", "Records with an HTTP response, by status class",
            ["status_class"], registry=r,
        )  # fmt: skip
        self.fetch_errors = Counter(
            "skitter_fetch_errors", "Records that ended with an error, by kind",
            ["kind"], registry=r,
        )  # fmt: skip
        self.bytes = Counter("skitter_bytes", "Decoded body bytes received", registry=r)
        self.robots = Counter(
            "skitter_robots_decisions", "robots.txt decisions on URLs (RFC 9309)",
            ["decision"], registry=r,
        )  # fmt: skip
        self.links = Counter(
            "skitter_link_decisions", "Links found, by links.tsv decision",
            ["decision"], registry=r,
        )  # fmt: skip
        self.retries = Counter("skitter_retries", "Fetch attempts beyond the first", registry=r)
        self.queued = Gauge("skitter_queued_urls", "URLs waiting in the frontier", registry=r)
        self.leased = Gauge("skitter_leased_requests", "Requests in flight (leased)", registry=r)
        self.active_hosts = Gauge(
            "skitter_active_hosts", "Hosts with URLs queued or in flight", registry=r
        )
        self.hosts_in_backoff = Gauge(
            "skitter_hosts_in_backoff", "Hosts waiting after 429/5xx/errors", registry=r
        )
        self.duration = _Histogram(
            "skitter_fetch_duration_seconds", "Whole fetch time of a record",
            DURATION_BUCKETS_S, r,
        )  # fmt: skip
        self.info = Info("skitter", "Skitter build", registry=r)
        #: labelled children already made: ``labels()`` checks and locks on every call
        self._children: dict[tuple[int, str], Any] = {}
        self.info.info({"version": version})

    # ------------------------------------------------------------------ feeding

    def _child(self, metric: Counter, label: str) -> Any:
        """``metric.labels(label)``, made once per label."""
        key = (id(metric), label)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(label)
        return child

    def observe_record(
        self,
        status: int | None,
        error: str | None,
        nbytes: int,
        elapsed_s: float,
        attempts: int,
    ) -> None:
        """Count one pages.jsonl record: its status class (when it has a response), its error
        kind (when it has one), its bytes, its fetch time (seconds) and its retries."""
        if status is not None:
            self._child(self.fetches, status_class(status)).inc()
        if error is not None:
            self._child(self.fetch_errors, error).inc()
        if nbytes > 0:
            self.bytes.inc(nbytes)
        if attempts > 1:
            self.retries.inc(attempts - 1)
        if elapsed_s >= 0:
            self.duration.observe(elapsed_s)

    def add_counts(self, counts: RecordCounts) -> None:
        """Add records tallied apart (e.g. every row of a pages.jsonl file): the same counts
        as :meth:`observe_record` of each."""
        for cls, n in counts.fetches.items():
            self._child(self.fetches, cls).inc(n)
        for kind, n in counts.errors.items():
            self._child(self.fetch_errors, kind).inc(n)
        if counts.bytes:
            self.bytes.inc(counts.bytes)
        if counts.retries:
            self.retries.inc(counts.retries)
        self.duration.add(counts.durations, counts.duration_sum)

    def observe_links(self, decisions: Mapping[str, int]) -> None:
        """Add links.tsv decision counts ``{decision: n}``."""
        for decision, n in decisions.items():
            if n > 0:
                self._child(self.links, decision).inc(n)

    def observe_robots(self, decision: str, n: int = 1) -> None:
        """Count ``n`` robots.txt decisions (``allowed``, ``disallowed``, ``unreachable``)."""
        if n > 0:
            self._child(self.robots, decision).inc(n)

    def set_frontier(self, queued: int, leased: int, active_hosts: int, in_backoff: int) -> None:
        """Set the gauges from the frontier's current state (counts, not rates)."""
        self.queued.set(queued)
        self.leased.set(leased)
        self.active_hosts.set(active_hosts)
        self.hosts_in_backoff.set(in_backoff)

    # ------------------------------------------------------------------ reading

    def text(self) -> str:
        """The metrics in the Prometheus text exposition format 0.0.4 (without the
        ``_created`` timestamps, which mean nothing in a textfile)."""
        return generate_latest(_WithoutCreated(self.registry)).decode("utf-8")

    def write_textfile(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`text` to ``path`` atomically (a temporary file in the same folder,
        fsynced, then renamed), as node_exporter's textfile collector expects.

        Raises:
            OSError: the folder cannot be written.
        """
        target = Path(path)
        tmp = target.with_name(f".{target.name}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(self.text())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)

    # ------------------------------------------------------------------ rebuilding

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[PageRow],
        link_decisions: Mapping[str, int] | None = None,
        robots: Mapping[str, int] | None = None,
    ) -> CrawlMetrics:
        """Metrics of a finished crawl from its pages.jsonl rows, links.tsv decision counts and
        robots decision counts (the gauges stay 0: nothing is queued any more)."""
        m = cls()
        counts = RecordCounts()
        for row in rows:
            counts.add_row(row)
        m.add_counts(counts)
        m.observe_links(link_decisions or {})
        for decision, n in (robots or {}).items():
            m.observe_robots(decision, n)
        return m

    @classmethod
    def from_output(cls, out_dir: str | os.PathLike[str], *, rows: bool = True) -> CrawlMetrics:
        """Rebuild the counters from an output folder: pages.jsonl rows, and the link and
        robots decisions of report.json (``totals.by_decision``, ``totals.robots_disallowed``,
        the ``allowed`` counts of ``robots``).
        A truncated last line (a crash) is skipped; missing files count as empty. With
        ``rows`` False pages.jsonl is not read (the caller adds them: :meth:`add_counts`).
        """
        out = Path(out_dir)
        report: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            report = json.loads((out / "report.json").read_text(encoding="utf-8"))
        totals = report.get("totals", {}) if isinstance(report, dict) else {}
        robots = {"disallowed": int(totals.get("robots_disallowed", 0) or 0)}
        per_origin = report.get("robots", {}) if isinstance(report, dict) else {}
        if isinstance(per_origin, dict):
            robots["allowed"] = sum(
                int(v.get("allowed", 0) or 0) for v in per_origin.values() if isinstance(v, dict)
            )
        return cls.from_rows(
            _rows(out / "pages.jsonl") if rows else (),
            dict(totals.get("by_decision", {})),
            robots,
        )


class _WithoutCreated(Collector):
    """A registry's families without their ``_created`` samples, in registration order."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        for fam in self._registry.collect():
            fam.samples = [s for s in fam.samples if not s.name.endswith("_created")]
            yield fam


def _rows(path: Path) -> Iterable[PageRow]:
    """The rows of pages.jsonl (:func:`skitter.report.rows.iter_page_rows`); nothing if the
    file is missing."""
    from skitter.report.rows import iter_page_rows

    if path.is_file():
        yield from iter_page_rows(path)


class _Histogram(Collector):
    """A histogram without labels, exposed as prometheus-client's ``Histogram`` is (the same
    samples, less ``_created``), that can also take counts made elsewhere (:meth:`add`).
    Thread-safe (a lock around each update and each collection).

    Args:
        name, documentation: the metric's name (base unit: seconds) and HELP text.
        bounds: the buckets' upper bounds, ascending (+Inf is added).
        registry: where it is registered.
    """

    def __init__(
        self, name: str, documentation: str, bounds: Iterable[float], registry: CollectorRegistry
    ) -> None:
        self.name, self.documentation = name, documentation
        self.bounds = (*bounds, math.inf)
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0
        self._lock = threading.Lock()
        registry.register(self)

    def observe(self, amount: float) -> None:
        """Count one observation (into the first bucket whose bound is >= ``amount``)."""
        with self._lock:
            self.counts[bisect_left(self.bounds, amount)] += 1
            self.sum += amount

    def add(self, counts: Iterable[int], total: float) -> None:
        """Add observations counted per bucket (``counts``: one per bound, +Inf last) whose
        values add up to ``total``."""
        with self._lock:
            self.counts = [a + b for a, b in zip(self.counts, counts, strict=True)]
            self.sum += total

    def collect(self) -> Iterable[Metric]:
        """The histogram family: cumulative ``_bucket`` samples, ``_count``, ``_sum``."""
        with self._lock:
            counts, total = list(self.counts), self.sum
        fam = HistogramMetricFamily(self.name, self.documentation)
        acc = 0.0
        buckets = []
        for bound, n in zip(self.bounds, counts, strict=True):
            acc += n
            buckets.append(("+Inf" if bound == math.inf else repr(float(bound)), acc))  # as Go's
        fam.add_metric([], buckets, total)
        return [fam]
