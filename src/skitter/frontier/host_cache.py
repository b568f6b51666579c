"""A host's queue in the SQLite frontier: its smallest pending entries cached in memory,
the rest read in chunks from the ``queue_host`` indexes (:mod:`skitter.frontier.sqlite_store`),
so memory grows with the number of hosts, not of queued URLs."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from skitter.frontier.base import Entry
from skitter.frontier.sqlite_store import _CHUNK_FIRST, _CHUNK_LATER, _CHUNK_SAME

if TYPE_CHECKING:
    from skitter.frontier.sqlite import SqliteFrontier

#: Entries of one host loaded from the index per query.
_CHUNK = 4
#: A host's cache is cut back to _CHUNK entries when pushes make it longer than this.
_CACHE_MAX = 8


class _CachedQueue:
    """A host's smallest available entries; the rest stay in the table.

    Invariant: ``cache`` (ascending) holds exactly the host's available entries that are
    ``<= cursor`` (all of them when ``complete``); larger ones are only in the table.
    """

    __slots__ = ("cache", "complete", "cursor", "hid", "owner")

    def __init__(self, owner: SqliteFrontier, hid: int, complete: bool) -> None:
        self.owner = owner
        self.hid = hid
        self.cache: list[Entry] = []
        self.complete = complete
        self.cursor: Entry | None = None

    def head(self) -> Entry | None:
        if not self.cache and not self.complete:
            self.refill()
        return self.cache[0] if self.cache else None

    def pop(self) -> Entry:
        return self.cache.pop(0)

    def push(self, entry: Entry) -> None:
        if self.complete or (self.cursor is not None and entry <= self.cursor):
            cache = self.cache
            if not cache or entry > cache[-1]:
                cache.append(entry)
            else:
                bisect.insort(cache, entry)
            if len(cache) > _CACHE_MAX:
                del cache[_CHUNK:]
                self.complete = False
                self.cursor = cache[-1]

    def discard(self, entry: Entry) -> None:
        cache = self.cache
        i = bisect.bisect_left(cache, entry)
        if i < len(cache) and cache[i] == entry:
            del cache[i]

    def refill(self) -> None:
        """Load the next chunk of the host from the index (skipping leased rows)."""
        q = self
        db = self.owner._db
        leased = self.owner._leased_fps
        while True:
            if q.cursor is None:
                rows = db.execute(_CHUNK_FIRST, (q.hid, _CHUNK)).fetchall()
            else:
                p, d, s, _ = q.cursor
                rows = db.execute(_CHUNK_SAME, (q.hid, p, d, s, _CHUNK)).fetchall()
                if len(rows) < _CHUNK:
                    rows += db.execute(_CHUNK_LATER, (q.hid, p, d, _CHUNK - len(rows))).fetchall()
            if len(rows) < _CHUNK:
                q.complete = True
            entries = [(p, d, s, s) for p, d, s in rows]
            if entries:
                q.cursor = entries[-1]
            q.cache = [e for e in entries if e[3] not in leased]
            if q.cache or q.complete:
                return
