"""Adding requests to the SQLite frontier: the URL-seen test, new queue rows, forced re-adds.

Owns :meth:`SqliteFrontier.add <skitter.frontier.sqlite.SqliteFrontier.add>` (a mixin of
:class:`skitter.frontier.sqlite.SqliteFrontier`, which holds the connection, the commits, the
LSM merges and the rest of the :class:`~skitter.frontier.base.Frontier` protocol): each new
URL gets one ``queue_new`` row and one ``seen0`` row in the open transaction; a seen URL added
with ``force=True`` is enqueued again under its forced key. See the module docstring of
:mod:`skitter.frontier.sqlite` for the storage shape and its durability.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence

from skitter.errors import FrontierError
from skitter.frontier.base import AddResult, _CoreFrontier, _Host, forced_key
from skitter.frontier.host_cache import _CachedQueue
from skitter.frontier.seen import SeenTables
from skitter.frontier.sqlite_store import (
    _INSERT_QUEUE,
    _INSERT_SEEN,
    _KEYS,
    _SEEN,
    _encode,
    _Guard,
    _QueueRow,
)
from skitter.models import Request

__all__ = ["SqliteAdding"]

#: Entries of the URL-prefix -> host memo before it is cleared.
_PREFIX_MEMO_MAX = 1 << 18

_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes


class SqliteAdding(_CoreFrontier, SeenTables):
    """The ``add`` side of :class:`skitter.frontier.sqlite.SqliteFrontier` (a mixin): the
    state it declares here is set up and owned by that class."""

    _seq: int
    _merged_seq: int
    _new_rows: int
    _prefix_hosts: dict[str, _Host]

    def _guard(self) -> _Guard:
        raise NotImplementedError

    def _maybe_merge(self, db: sqlite3.Connection) -> None:
        raise NotImplementedError

    async def add(self, requests: Sequence[Request], *, force: bool = False) -> AddResult:
        """See :meth:`skitter.frontier.base.Frontier.add`.

        Raises:
            ValueError: a request URL has no host; requests before it stay added.
            FrontierError: database failure.
        """
        seen = self._seen
        b2, fb = _blake2b, _from_bytes
        fps = [  # skitter.urls.fingerprint, inlined
            fb(
                b2(r.url.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                "big",
                signed=True,
            )
            for r in requests
        ]
        added: list[str] = []
        touched: set[_Host] = set()
        qrows: list[_QueueRow] = []
        srows: list[tuple[int, int]] = []
        with self._guard() as db:
            known = self._seen_test(fps)
            # From here on ``known`` also holds the keys added by this call.
            memo = self._prefix_hosts
            seq = self._seq
            try:
                for req, fp in zip(requests, fps, strict=True):
                    if fp in known:
                        seen.touch(fp)
                        if force:
                            if qrows:  # _add_forced reads the tables: write the batch first
                                self._seq = seq
                                self._write_new(db, qrows, srows)
                            if self._add_forced(db, req, fp, touched):
                                added.append(req.url)
                            seq = self._seq
                        continue
                    url = req.url
                    end = url.find("/", 8)
                    h = memo.get(url[:end]) if end > 0 else None
                    if h is None:
                        h = self._host_of(url)
                    seq += 1
                    depth, priority = req.depth, req.priority
                    if req.origin_url is None and not req.redirects and not req.check_only:
                        data = None
                    else:
                        data = _encode(req)
                    qrows.append((seq, h.hid, priority, depth, url, req.referer, data))
                    srows.append((fp, seq))
                    known.add(fp)
                    entry = (priority, depth, seq, seq)
                    q: _CachedQueue = h.queue  # type: ignore[assignment]
                    if q.complete or (q.cursor is not None and entry <= q.cursor):
                        q.push(entry)
                        if q.cache[0] is entry:  # a new head may change its ready-heap key
                            touched.add(h)
                    if h.heap_key is None:
                        touched.add(h)
                    h.pending += 1
                    added.append(url)
            finally:
                self._seq = seq
                if qrows:
                    self._write_new(db, qrows, srows)
                for h in touched:
                    self._touch(h)
            self._maybe_merge(db)
        return AddResult(len(added), len(requests) - len(added), frozenset(added))

    def _host_of(self, url: str) -> _Host:
        """The host of ``url`` (created if new), memoised on the URL's prefix up to the first
        ``/`` from offset 8 (for http(s) URLs only: then that prefix holds the whole
        authority, so every URL starting with it has the same host).

        Raises:
            ValueError: the URL has no host.
        """
        h = self._host(self._host_key(url))
        end = url.find("/", 8)
        if end > 0 and url.startswith(("https://", "http://")):
            memo = self._prefix_hosts
            if len(memo) >= _PREFIX_MEMO_MAX:
                memo.clear()
            memo[url[:end]] = h
        return h

    def _write_new(
        self, db: sqlite3.Connection, qrows: list[_QueueRow], srows: list[tuple[int, int]]
    ) -> None:
        """Insert new queue rows and their seen rows (the new URLs of an ``add``), record
        them in the prefilter; clear both lists."""
        self._pending += len(qrows)
        self._new_rows += len(qrows)
        db.executemany(_INSERT_QUEUE, qrows)
        self._ops += len(qrows)
        qrows.clear()
        self._insert_seen(db, srows)
        srows.clear()

    def _add_forced(
        self, db: sqlite3.Connection, req: Request, fp: int, touched: set[_Host]
    ) -> bool:
        """The ``force=True`` path for a seen URL; True if it was enqueued."""
        seq = self._seq_of(fp)
        if seq is None:  # cannot happen: every seen fingerprint is stored
            raise FrontierError(f"seen URL {req.url} has no row")
        plain = db.execute(_KEYS[seq > self._merged_seq], (seq,)).fetchone()
        if plain is not None and seq not in self._leased_fps:  # pending, not leased
            origin = json.loads(plain[3]).get("o") if plain[3] is not None else None
            if (origin if origin is not None else req.url) == req.requested_url:
                return False
        ffp = forced_key(req)
        old = self._seq_of(ffp)
        if old is not None and db.execute(_KEYS[old > self._merged_seq], (old,)).fetchone():
            return False  # pending or leased: one row per key
        h = self._host(self._host_key(req.url))
        self._seq += 1
        seq = self._seq
        if old is None:
            db.execute(_INSERT_SEEN, (ffp, seq))
            self._level_rows[0] += 1
            self._seen.add(ffp)
        else:  # done: enqueue it again with this request (its done row stays, as history)
            for t in _SEEN:
                db.execute(f"UPDATE {t} SET seq = ? WHERE fp = ?", (seq, ffp))
            self._done -= 1
        self._new_rows += 1
        db.execute(
            _INSERT_QUEUE, (seq, h.hid, req.priority, req.depth, req.url, req.referer, _encode(req))
        )
        self._ops += 2
        self._enqueued(h, (req.priority, req.depth, seq, seq))
        touched.add(h)
        return True
