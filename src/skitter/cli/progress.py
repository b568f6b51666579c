"""The live progress line on a terminal and the Ctrl-C-aware runner shared by the
crawling commands."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skitter.cli.outcome import stats_line as stats_line
from skitter.stats import StatsSnapshot
from skitter.status.source import StatusSource

if TYPE_CHECKING:
    from skitter.crawler import Crawler
    from skitter.settings import CrawlSettings
    from skitter.status.session import StatusOptions


class Progress:
    """The live display on a terminal (rich, :mod:`skitter.status.terminal`), refreshed about
    twice a second from a status source, or nothing: a progress bar when the crawl's end is
    known (``--max-pages``, a link check), else a panel with the headline figures (fetched,
    2xx, pages/s, queued, in flight, hosts, errors...) and the five slowest and most failing
    hosts. On stderr only. With ``stats_interval_s`` > 0 (stderr not a terminal), a stats line
    every that many seconds instead, as Scrapy logs, so a crawl under nohup or CI is not
    silent."""

    def __init__(
        self, enabled: bool, source: StatusSource | None = None, stats_interval_s: float = 0.0
    ) -> None:
        self.enabled = enabled
        self.source = source  # None: the crawler's own counters (CrawlerSource)
        self.stats_interval_s = stats_interval_s
        self.live: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stats_task: asyncio.Task[None] | None = None

    @classmethod
    def for_settings(
        cls, quiet: bool, stats_interval_s: float, source: StatusSource | None = None
    ) -> Progress:
        """The live display on a terminal; else, unless quiet, a stats line every
        ``stats_interval_s`` seconds (0 = off)."""
        tty = sys.stderr.isatty()
        return cls(not quiet and tty, source, stats_interval_s if not quiet and not tty else 0.0)

    def start(self, crawler: Crawler) -> None:
        if self.stats_interval_s > 0:
            loop = asyncio.get_running_loop()
            self._stats_task = loop.create_task(self._stats(crawler))
        if not self.enabled:
            return
        if self.source is None:
            from skitter.status.session import CrawlerSource

            self.source = CrawlerSource(crawler)
        from rich.console import Console
        from rich.live import Live

        self.live = Live("", console=Console(stderr=True), auto_refresh=False, transient=True)
        self.live.start()
        self._task = asyncio.get_running_loop().create_task(self._refresh(self.source))

    async def _refresh(self, source: StatusSource) -> None:
        from skitter.status.terminal import RateMeter, render

        meter = RateMeter(window_s=30.0)
        while self.live is not None:
            t = await source.totals()
            rate = meter.add(t.fetched)
            view = render(t, rate, [] if t.target else source.hosts())
            if self.live is None:
                break
            self.live.update(view, refresh=True)
            await asyncio.sleep(0.5)

    async def _stats(self, crawler: Crawler) -> None:
        while True:
            await asyncio.sleep(self.stats_interval_s)
            s = crawler.snapshot()
            c = await crawler.components.frontier.counts()
            print(
                stats_line(s.records, s.pages_per_s, c.pending, c.leased, s.errors),
                file=sys.stderr,
                flush=True,
            )

    def stop(self) -> None:
        if self._stats_task is not None:
            self._stats_task.cancel()
            self._stats_task = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self.live is not None:
            self.live.stop()
            self.live = None


async def run_crawler(crawler: Crawler, progress: Progress) -> tuple[StatsSnapshot, bool]:
    """Run an entered crawler with progress and Ctrl-C handling.

    The first SIGINT/SIGTERM stops at once (:meth:`Crawler.interrupt`: fetches in flight
    are abandoned, fetched again on resume; pages already fetched are recorded), a second one
    also cancels those. Returns ``(snapshot, interrupted)``; interrupted means the
    crawl stopped before its frontier ran dry because of a signal.
    """
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            progress.stop()
            print("stopping: recording the pages fetched (Ctrl-C again to abort)", file=sys.stderr)
            crawler.interrupt()
        else:
            crawler.abort()

    handled = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal)
            handled.append(sig)
        except (ValueError, RuntimeError, NotImplementedError):
            pass  # not the main thread (library/test use): no signal handling
    progress.start(crawler)
    try:
        snap = await crawler.run()
    finally:
        progress.stop()
        for sig in handled:
            loop.remove_signal_handler(sig)
    stopped = crawler.report()["stop_reason"] in ("interrupted",)
    return snap, bool(signals) or (not crawler.finished and stopped)


@dataclass(frozen=True, slots=True)
class WatchedRun:
    """How a watched crawl ended: its counters, whether a signal stopped it, its stop
    reason, and the frontier gauges at the end (queued, leased, active hosts, in backoff)."""

    snapshot: StatsSnapshot
    interrupted: bool
    stop_reason: str
    gauges: tuple[int, int, int, int]


async def run_watched(
    settings: CrawlSettings,
    status: StatusOptions,
    prepare: Callable[[Crawler], None] | None = None,
    stats_interval_s: float = 0.0,
) -> WatchedRun:
    """Run one crawl of ``settings`` in this process, observed (:mod:`skitter.status`): the
    terminal display on a TTY (not with --quiet), the ``--status-port`` server (bound before
    the output folder is touched, then announced), a stats line every ``stats_interval_s``
    seconds when stderr is not a terminal. ``prepare`` is called on the entered crawler
    before it runs.

    Raises:
        OSError: the status server cannot bind its address.
    """
    from skitter.crawler import Crawler
    from skitter.events import CrawlHooks
    from skitter.status.session import (
        announce,
        bind_crawler,
        cluster_status_for,
        live_state_for,
        start_server,
    )

    live = live_state_for(settings)
    progress = Progress.for_settings(settings.quiet, stats_interval_s, live)
    cluster = cluster_status_for(settings, live)  # a Redis crawl: the page covers every worker
    server = await start_server(cluster or live, status, str(settings.out_dir))
    try:
        async with Crawler.from_settings(settings, hooks=CrawlHooks(observer=live)) as crawler:
            if prepare is not None:
                prepare(crawler)
            bind_crawler(live, crawler)
            if cluster is not None:
                cluster.bind(crawler.components.frontier)
            if server is not None:
                announce(server, settings.out_dir, settings.quiet)
            try:
                snap, interrupted = await run_crawler(crawler, progress)
            finally:
                live.finish("finished" if crawler.stop_reason == "done" else "stopped")
                if cluster is not None:
                    await cluster.close(live.state)
            t = await live.totals()
            stop_reason = crawler.stop_reason
    finally:
        if server is not None:
            await server.stop()
    return WatchedRun(
        snap, interrupted, stop_reason, (t.queued, t.in_flight, t.hosts, t.hosts_in_backoff)
    )
