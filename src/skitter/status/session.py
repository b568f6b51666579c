"""The status parts of one crawl run, started and stopped around it by the command line:
the observer (:class:`~skitter.status.source.LiveState`), the ``--status-port`` server, the
terminal display, and at the end ``OUT/metrics.prom`` and ``OUT/report.html``.
"""

from __future__ import annotations

import ipaddress
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skitter.status.source import HostRow, LiveState, StatusSource, Totals

if TYPE_CHECKING:
    from skitter.crawler import Crawler
    from skitter.settings import CrawlSettings
    from skitter.status.cluster_source import ClusterStatus
    from skitter.status.server import StatusServer

__all__ = [
    "END_FILES",
    "CrawlerSource",
    "StatusOptions",
    "announce",
    "bind_crawler",
    "cluster_status_for",
    "live_state_for",
    "start_server",
    "write_end_files",
]

log = logging.getLogger("skitter")

#: Files the status parts add to an output folder (a new check in the folder removes them).
END_FILES = ("report.html", "metrics.prom", "status.url")


@dataclass(frozen=True, slots=True)
class StatusOptions:
    """``--status-port`` / ``--status-host``: port None = no server, 0 = a free port."""

    port: int | None = None
    host: str = "127.0.0.1"

    @classmethod
    def from_args(cls, args: Any) -> StatusOptions:
        """From parsed command-line arguments (missing attributes: defaults)."""
        host = getattr(args, "status_host", None) or "127.0.0.1"  # (worker: None if not given)
        return cls(getattr(args, "status_port", None), host)


def live_state_for(settings: CrawlSettings) -> LiveState:
    """A :class:`LiveState` for a crawl of ``settings`` (its --delay, --max-pages as the
    target, --ignore-robots; a link check is bounded); :func:`bind_crawler` then connects it
    to the crawl."""
    p = settings.politeness
    return LiveState(
        delay_s=p.delay_s,
        target=settings.max_pages,
        ignore_robots=p.ignore_robots,
        bounded=settings.check_links,
    )


def cluster_status_for(settings: CrawlSettings, live: LiveState) -> ClusterStatus | None:
    """On a Redis crawl, the worker's :class:`~skitter.status.cluster_source.ClusterStatus`
    (publishes ``live`` to Redis, serves the whole crawl once bound); None otherwise."""
    from skitter.settings import is_redis_url

    if not is_redis_url(settings.frontier):
        return None
    from skitter.status.cluster_source import ClusterStatus

    return ClusterStatus(live, target=settings.max_pages)


def bind_crawler(live: LiveState, crawler: Crawler) -> None:
    """Read the frontier counts and link decisions of ``crawler`` (entered) when ``live``'s
    figures are asked for."""

    async def counts() -> tuple[int, int, int]:
        c = await crawler.components.frontier.counts()
        return (c.pending, c.leased, c.hosts)

    def decisions() -> Mapping[str, int]:
        return crawler.stats.by_decision

    live.attach(counts, decisions)


def announce(server: StatusServer, out_dir: str | Path, quiet: bool = False) -> None:
    """Write ``OUT/status.url`` and print the URL on stderr (unless quiet); a write failure
    is a warning (the crawl goes on)."""
    try:
        server.write_url(out_dir)
    except OSError as exc:
        log.warning("cannot write %s/status.url: %s", out_dir, exc)
    if not quiet:
        print(f"status: {server.url}", file=sys.stderr)


async def start_server(
    source: StatusSource, opts: StatusOptions, title: str = ""
) -> StatusServer | None:
    """Start the status server when ``opts.port`` is set (None otherwise); announce it with
    :func:`announce` once the output folder exists.

    Raises:
        OSError: the address cannot be bound (the caller reports it as one line).
    """
    if opts.port is None:
        return None
    if not _is_loopback(opts.host):
        log.warning(
            "the status server on %s can be reached from other machines (no authentication)",
            opts.host,
        )
    from skitter.status.server import StatusServer  # aiohttp.web: only with --status-port

    server = StatusServer(source, opts.host, opts.port, title=title)
    await server.start()
    return server


def write_end_files(out_dir: str | Path, gauges: tuple[int, int, int, int] | None = None) -> None:
    """Write ``OUT/metrics.prom`` (the counters rebuilt from pages.jsonl, links.tsv and
    report.json, so they equal the files' counts even after resumes; ``gauges`` =
    (queued, leased, active hosts, hosts in backoff) at the end) and ``OUT/report.html``.
    A failure is logged as a warning: the crawl's own files are already written."""
    from skitter.report import TABLE_CAP, write_report
    from skitter.report.data import ReportData, read_output
    from skitter.status.metrics import CrawlMetrics, RecordCounts

    out = Path(out_dir)
    try:
        # one pass over pages.jsonl feeds both (the metrics' link counts: report.json)
        metrics = CrawlMetrics.from_output(out, rows=False)
        counts = RecordCounts()
        data: ReportData | FileNotFoundError
        try:
            data = read_output(out, TABLE_CAP, on_row=counts.add_row)
        except FileNotFoundError as exc:  # no pages.jsonl: metrics.prom all the same
            data = exc
        metrics.add_counts(counts)
        if gauges is not None:
            metrics.set_frontier(*gauges)
        metrics.write_textfile(out / "metrics.prom")
        if isinstance(data, FileNotFoundError):
            raise data
        write_report(out, data=data)
    except (OSError, ValueError) as exc:
        log.warning("cannot write metrics.prom/report.html in %s: %s", out, exc)


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class CrawlerSource:
    """A status source read from a crawler's own counters, for a crawl run without a
    :class:`LiveState` observer (``crawl --levels``): headline totals and per-host records,
    errors and bytes; no timings, delays or robots columns."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    async def totals(self) -> Totals:
        """See :meth:`~skitter.status.source.StatusSource.totals`."""
        s = self.crawler.snapshot()
        c = await self.crawler.components.frontier.counts()
        return Totals(
            fetched=s.records,
            ok=s.ok,
            errors=s.errors,
            bytes=s.bytes,
            queued=c.pending,
            in_flight=c.leased,
            hosts=c.hosts,
            robots_disallowed=s.robots_disallowed,
            elapsed_s=s.elapsed_s,
            by_status=dict(s.by_status),
            by_error=dict(s.by_error),
        )

    def hosts(self) -> Sequence[HostRow]:
        """See :meth:`~skitter.status.source.StatusSource.hosts`."""
        return [
            HostRow(
                h, fetched=v.get("records", 0), errors=v.get("errors", 0), bytes=v.get("bytes", 0)
            )
            for h, v in self.crawler.stats.by_host.items()
        ]

    async def metrics_text(self) -> str:
        """See :meth:`~skitter.status.source.StatusSource.metrics_text` (the record counters
        are not kept per status class here: an empty exposition)."""
        return ""
