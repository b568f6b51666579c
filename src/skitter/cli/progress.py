"""The live progress line on a terminal and the Ctrl-C-aware runner shared by the
crawling commands."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from skitter.crawler import Crawler
from skitter.stats import StatsSnapshot

#: The progress line never gets wider than this (an 80-column terminal, no wrapping).
WIDTH = 79


def fit(fields: list[str], width: int = WIDTH) -> str:
    """Join ``fields`` with two spaces, dropping fields from the end (the least important
    last) until the line is at most ``width`` columns."""
    fields = list(fields)
    line = "  ".join(fields)
    while len(line) > width and len(fields) > 1:
        fields.pop()
        line = "  ".join(fields)
    return line[:width]


def crawl_line(
    records: int,
    ok: int,
    rate: float,
    queued: int,
    inflight: int,
    hosts: int,
    errors: int,
    robots_blocked: int,
    processes: int = 1,
) -> str:
    """The crawl progress line (at most :data:`WIDTH` columns)."""
    fields = [
        f"pages {records:,}",
        f"queued {queued:,}",
        f"in flight {inflight:,}",
        f"ok {ok:,}",
        f"{rate:,.1f}/s",
        f"errors {errors:,}",
        f"hosts {hosts:,}",
        f"robots-blocked {robots_blocked:,}",
    ]
    if processes > 1:
        fields.insert(5, f"{processes} proc")
    return fit(fields)


def check_line(by_verdict: dict[str, int], rate: float, queued: int, inflight: int) -> str:
    """The check-links progress line: links checked and their verdicts so far."""
    v = by_verdict
    checked = sum(v.get(k, 0) for k in ("ok", "broken", "unverified", "redirected"))
    return fit(
        [
            f"links checked {checked:,}",
            f"broken {v.get('broken', 0):,}",
            f"unverified {v.get('unverified', 0):,}",
            f"queued {queued:,}",
            f"in flight {inflight:,}",
            f"{rate:,.1f}/s",
            f"ok {v.get('ok', 0):,}",
            f"redirected {v.get('redirected', 0):,}",
        ]
    )


def stats_line(records: int, rate: float, queued: int, inflight: int, errors: int) -> str:
    """The periodic ``--stats-interval`` line (stderr not a terminal), as Scrapy's."""
    from skitter.cli.common import plural

    return (
        f"skitter: stats: {plural(records, 'page')} ({rate:,.1f} pages/s), {queued:,} queued, "
        f"{inflight:,} in flight, {plural(errors, 'error')}"
    )


class Progress:
    """A one-line live display on a terminal (rich), refreshed twice a second, or nothing:
    for a crawl pages, ok, pages/s, queued, in flight, errors, hosts, robots-blocked; for a
    link check (``checking``) links checked, broken, unverified, queued, in flight."""

    def __init__(
        self, enabled: bool, checking: bool = False, stats_interval_s: float = 0.0
    ) -> None:
        self.enabled = enabled
        self.checking = checking
        self.stats_interval_s = stats_interval_s
        self.live: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stats_task: asyncio.Task[None] | None = None

    @classmethod
    def for_settings(cls, quiet: bool, checking: bool, stats_interval_s: float) -> Progress:
        """The live line on a terminal; else, unless quiet, a stats line every
        ``stats_interval_s`` seconds (0 = off) so that a crawl under nohup or CI is not
        silent."""
        tty = sys.stderr.isatty()
        return cls(
            not quiet and tty,
            checking,
            stats_interval_s if not quiet and not tty else 0.0,
        )

    def start(self, crawler: Crawler) -> None:
        if self.stats_interval_s > 0:
            loop = asyncio.get_running_loop()
            self._stats_task = loop.create_task(self._stats(crawler))
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
            if self.checking:
                line = check_line(s.by_verdict, s.pages_per_s, c.pending, c.leased)
            else:
                line = crawl_line(
                    s.records,
                    s.ok,
                    s.pages_per_s,
                    c.pending,
                    c.leased,
                    c.hosts,
                    s.errors,
                    s.robots_disallowed,
                )
            self.live.update(line)
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
    stopped = crawler.report()["stop_reason"] in ("interrupted",)
    return snap, bool(signals) or (not crawler.finished and stopped)
