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
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from skitter import __version__

__all__ = ["DURATION_BUCKETS_S", "CrawlMetrics", "status_class"]

#: Upper bounds (seconds) of the ``skitter_fetch_duration_seconds`` buckets.
DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: Content type of the text exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def status_class(status: int) -> str:
    """The class label of an HTTP status: ``"2xx"`` for 200-299 ... (RFC 9110 §15); a status
    outside 100-599 is ``"other"``.

    >>> status_class(404)
    '4xx'
    """
    return f"{status // 100}xx" if 100 <= status <= 599 else "other"


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
        self.duration = Histogram(
            "skitter_fetch_duration_seconds", "Whole fetch time of a record",
            buckets=DURATION_BUCKETS_S, registry=r,
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

    def observe_row(self, row: Mapping[str, Any]) -> None:
        """Count one pages.jsonl row (a decoded JSON object; missing keys count as absent)."""
        status = row.get("status")
        self.observe_record(
            status if isinstance(status, int) else None,
            row.get("error") or None,
            int(row.get("bytes") or 0),
            float(row.get("elapsed_s") or 0.0),
            int(row.get("attempts") or 1),
        )

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
        rows: Iterable[Mapping[str, Any]],
        link_decisions: Mapping[str, int] | None = None,
        robots: Mapping[str, int] | None = None,
    ) -> CrawlMetrics:
        """Metrics of a finished crawl from its pages.jsonl rows, links.tsv decision counts and
        robots decision counts (the gauges stay 0: nothing is queued any more)."""
        m = cls()
        for row in rows:
            m.observe_row(row)
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
        ``rows`` False pages.jsonl is not read (the caller feeds :meth:`observe_row`).
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
            iter_rows(out / "pages.jsonl") if rows else (),
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


def iter_rows(path: Path) -> Iterable[dict[str, Any]]:
    """The JSON objects of a pages.jsonl file, skipping lines that do not parse (a crash can
    leave a partial last line); nothing if the file is missing."""
    if not path.is_file():
        return
    with open(path, "rb") as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield row
