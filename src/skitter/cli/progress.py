"""The live progress line on a terminal and the Ctrl-C-aware runner shared by the
crawling commands."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from skitter.crawler import Crawler
from skitter.stats import StatsSnapshot


class Progress:
    """A one-line live display on a terminal (rich), refreshed twice a second, or nothing:
    pages, ok, pages/s, queued, in flight, hosts, errors, robots-blocked."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.live: Any = None
        self._task: asyncio.Task[None] | None = None

    def start(self, crawler: Crawler) -> None:
        if not self.enabled:
            return
        from rich.console import Console
        from rich.live import Live

        self.live = Live("", console=Console(stderr=True), refresh_per_second=4, transient=True)
        self.live.start()
        self._task = asyncio.get_running_loop().create_task(self._refresh(crawler))

    async def _refresh(self, crawler: Crawler) -> None:
        while self.live is not None:
            s = crawler.snapshot()
            c = await crawler.components.frontier.counts()
            if self.live is None:
                break
            self.live.update(
                f"pages {s.records:,}  ok {s.ok:,}  {s.pages_per_s:,.1f} pages/s  "
                f"queued {c.pending:,}  in flight {c.leased:,}  hosts {c.hosts:,}  "
                f"errors {s.errors:,}  robots-blocked {s.robots_disallowed:,}"
            )
            await asyncio.sleep(0.5)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self.live is not None:
            self.live.stop()
            self.live = None


async def run_crawler(crawler: Crawler, progress: Progress) -> tuple[StatsSnapshot, bool]:
    """Run an entered crawler with progress and Ctrl-C handling.

    The first SIGINT/SIGTERM stops leasing (requests in flight finish and are recorded), a
    second one aborts them. Returns ``(snapshot, interrupted)``; interrupted means the
    crawl stopped before its frontier ran dry because of a signal.
    """
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            progress.stop()
            print("stopping: finishing requests in flight (Ctrl-C again to abort)", file=sys.stderr)
            crawler.request_stop()
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
    stopped = crawler.report()["stop_reason"] in ("interrupted", "aborted")
    return snap, bool(signals) or (not crawler.finished and stopped)
