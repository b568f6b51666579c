"""The host-state journal of a ``--processes`` crawler process: delays, backoffs, robots.txt.

pages.jsonl tells the coordinator's status page (:class:`~skitter.status.journal.JournalSource`)
what was fetched, but not how each host is being waited on. Each crawler process runs a
:class:`HostJournal` observer that appends one JSON line to ``SHARD/status-hosts.jsonl`` when a
host's wait (its cause, its backoff end, its delay by more than a fifth) or its robots.txt
state changes: ``{"h": host, "d": delay_s, "c": cause, "u": backoff_until or null, "r":
robots}`` (times in Unix seconds). Each line is one ``write()`` to a file opened for append,
so a crash leaves whole lines and at most a partial last one, which readers skip.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skitter.export.pages import PageRecord

__all__ = ["HOST_JOURNAL", "HostJournal"]

#: The journal's file name in a shard folder.
HOST_JOURNAL = "status-hosts.jsonl"


class HostJournal:
    """A :class:`~skitter.observer.CrawlObserver` writing host-state changes to
    ``folder/status-hosts.jsonl`` (see the module docstring).

    Args:
        folder: the crawler process's shard folder.
        delay_s: the --delay gap, seconds (tells a politeness gap from a longer wait).
        clock: Unix seconds (the crawl's clock).

    Per host it keeps only the last line written (and a Crawl-delay, when robots.txt has one).

    A write failure (disk full) is ignored: the journal only feeds the status page.
    """

    def __init__(
        self, folder: str | Path, delay_s: float = 0.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = Path(folder) / HOST_JOURNAL
        self.delay_s = delay_s
        self._clock = clock
        # per host: the last line's (delay_s, cause, backoff_until, robots); Crawl-delays
        self._last: dict[str, tuple[float, str, float | None, str]] = {}
        self._crawl_delay: dict[str, float] = {}
        self._fd: int | None = None

    def _write(self, host: str, now: tuple[float, str, float | None, str]) -> None:
        was = self._last.get(host)
        small = was is not None and abs(now[0] - was[0]) <= max(0.5, 0.2 * was[0])
        if was is not None and was[1:] == now[1:] and small:
            return
        self._last[host] = now
        line = {"h": host, "d": round(now[0], 3), "c": now[1], "u": now[2], "r": now[3]}
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                end = os.lseek(self._fd, 0, os.SEEK_END)
                if end and os.pread(self._fd, 1, end - 1) != b"\n":
                    os.write(self._fd, b"\n")  # end a crash's partial line: it stays one bad line
            os.write(self._fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())
        except OSError:
            pass

    def _state(self, host: str) -> tuple[float, str, float | None, str]:
        return self._last.get(host, (self.delay_s, "delay", None, "unknown"))

    def on_record(self, rec: PageRecord, host: str) -> None:
        """Ignored (pages.jsonl has it)."""

    def on_robots(self, host: str, decision: str, crawl_delay_s: float | None) -> None:
        """See :meth:`skitter.observer.CrawlObserver.on_robots`."""
        if crawl_delay_s is not None:
            self._crawl_delay[host] = crawl_delay_s
        robots = "unreachable" if decision == "unreachable" else "ok"
        self._write(host, (*self._state(host)[:3], robots))

    def on_schedule(self, host: str, not_before: float, retry: bool) -> None:
        """See :meth:`skitter.observer.CrawlObserver.on_schedule` (the cause as
        :meth:`skitter.status.source.LiveState.on_schedule` names it)."""
        gap = max(0.0, not_before - self._clock())
        robots = self._state(host)[3]
        if retry:
            self._write(host, (gap, "backoff", not_before, robots))
            return
        cd = self._crawl_delay.get(host)
        if gap <= self.delay_s + 0.05:
            cause = "delay"
        elif cd is not None and gap <= cd + 0.05:
            cause = "crawl-delay"
        else:
            cause = "retry-after"
        self._write(host, (gap, cause, None, robots))

    def on_queued(self, urls: frozenset[str]) -> None:
        """Ignored (the coordinator counts queued URLs)."""
