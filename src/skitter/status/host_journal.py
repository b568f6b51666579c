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
from pathlib import Path
from typing import TYPE_CHECKING

from skitter.status.source import LiveState

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

    A write failure (disk full) is ignored: the journal only feeds the status page.
    """

    def __init__(self, folder: str | Path, delay_s: float = 0.0) -> None:
        self.path = Path(folder) / HOST_JOURNAL
        self._live = LiveState(delay_s=delay_s)
        self._last: dict[str, tuple[float, str, float | None, str]] = {}
        self._fd: int | None = None

    def _write(self, host: str) -> None:
        self._live._dirty.clear()  # (no cluster publisher reads it here)
        h = self._live._hosts[host]
        now = (h.delay_s, h.delay_cause, h.backoff_until, h.robots)
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

    def on_record(self, rec: PageRecord, host: str) -> None:
        """Ignored (pages.jsonl has it)."""

    def on_robots(self, host: str, decision: str, crawl_delay_s: float | None) -> None:
        """See :meth:`skitter.observer.CrawlObserver.on_robots`."""
        self._live.on_robots(host, decision, crawl_delay_s)
        self._write(host)

    def on_schedule(self, host: str, not_before: float, retry: bool) -> None:
        """See :meth:`skitter.observer.CrawlObserver.on_schedule`."""
        self._live.on_schedule(host, not_before, retry)
        self._write(host)

    def on_queued(self, urls: frozenset[str]) -> None:
        """Ignored (the coordinator counts queued URLs)."""
