"""SQLite frontier: a resumable, crash-safe frontier in one file (WAL mode).

Storage: the tables are described in :mod:`skitter.frontier.sqlite_store`; the URL-seen
test in :mod:`skitter.frontier.seen`; adding requests in :mod:`skitter.frontier.sqlite_add`;
each host's queue cache in :mod:`skitter.frontier.host_cache`.

A key is pending iff the row its ``seen`` seq names is in a queue table, else done; so
``done`` count = keys - pending, and acking never writes to ``seen``.

Why this shape: a frontier keyed by fingerprint dirtied a random page of its (large) table
per row. Here rows are appended in ``seq`` order (the table's last page); what is scattered
is one entry in ``seen0`` (by fingerprint) and one in ``queue_new_host`` (by host), both
small B-trees that stay in the page cache. When queue_new (seen0) passes ``_NEW_MAX`` rows
it is merged into queue (seen1) in one statement: a walk of the big B-tree in key order,
instead of a page written per row at every commit once the B-tree outgrows the cache (at 10
M URLs that was ~11 KB of WAL and checkpoint writes per URL). seen1 and seen2 are merged
down in turn past ``_NEW_MAX * _LEVEL_RATIO**level`` keys (an LSM tree of B-trees), so each
key is rewritten about once per level. A merge stalls the call that triggers it (~3 s per
million rows). Acked rows leave the queue tables (which stay as large as the pending work)
for ``done``, appended in ack order.

Leases are not written to the file: a leased row stays in ``queue``, so after a crash (or a
clean close with leases outstanding) every leased request is pending again on open, and
in-flight counts start at zero. The scheduler's storage key for an entry is its ``seq``
(entries are ``(priority, depth, seq, seq)``).

Speed: URL-seen is answered in memory for almost every new URL and recent duplicate (a
bounded set of recently seen fingerprints, then a chain of Bloom filters); only Bloom
positives that are not recent cost a batched primary-key lookup in the ``seen`` levels. A
Bloom false positive therefore costs one lookup, never a dropped URL: the exact table decides.
Writes go into an open transaction that is committed every ``batch_size`` written rows
(checked at the end of each call, so one call's writes are never split across
transactions) and on :meth:`SqliteFrontier.flush`. Each host keeps at most a few of its
smallest pending entries in memory, loaded in chunks through ``queue_host``, so memory grows
with the number of hosts (~2 KB each) and, by ~2-4 bytes each, with URLs seen (the Bloom
filters: 14.4 bits per URL per filter, a chain of filters doubling in size), not with the
number of queued URLs. Temporary files (statement journals of merges) go to disk: with
``temp_store=MEMORY`` a merge held a copy of every page it changed in memory.

Durability (WAL, ``synchronous=NORMAL``):

* A committed transaction survives a crash of the process (``kill -9``); the file is
  always consistent, whatever instant the process dies at.
* Work not yet committed (at most about ``batch_size`` rows plus the current call) is lost
  by a crash; the frontier then looks as it did at the last commit.
* :meth:`SqliteFrontier.flush` commits with ``synchronous=FULL`` (the WAL is fsynced), so
  everything before it also survives power loss or an OS crash. Plain batch commits are not
  fsynced and may roll back after power loss (never corrupting the file).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from operator import itemgetter

from skitter.errors import FrontierError, OutputError, StateError
from skitter.frontier.base import (
    FrontierCounts,
    _Host,
    _Queue,
)
from skitter.frontier.host_cache import _CachedQueue
from skitter.frontier.seen import _Seen
from skitter.frontier.sqlite_add import SqliteAdding
from skitter.frontier.sqlite_store import (
    _ATTEMPTS,
    _DELETE,
    _INSERT_DONE,
    _INSERT_SEEN,
    _KEYS,
    _LOAD,
    _QUEUES,
    _SEEN,
    _SEEN_LEVELS,
    _SET_PRIORITY,
    _TO_DONE,
    _decode,
    _Guard,
    db_error,
    open_database,
)
from skitter.models import Lease, Request
from skitter.urls import fingerprint, host_key

__all__ = ["SqliteFrontier"]

#: Rows in queue_new (and in seen0) that trigger a merge into queue (seen1).
_NEW_MAX = 1 << 20
#: Seen level i (but the last) is merged into level i+1 once it holds
#: _NEW_MAX * _LEVEL_RATIO**i keys.
_LEVEL_RATIO = 8


class SqliteFrontier(SqliteAdding):
    """A :class:`~skitter.frontier.base.Frontier` stored in an SQLite file.

    Opening an existing file resumes it: every URL is still seen, pending and previously
    leased requests are pending, done ones keep their status/ETag/Last-Modified, hosts keep
    their ``not_before`` (so use a clock that is consistent across runs, e.g. wall time, or
    expect hosts to wait until the old ``not_before``). ``host_concurrency`` and
    ``lease_ttl_s`` apply to this run only and may differ from the previous one.

    One process at a time: the file is opened with an exclusive lock. The methods are
    coroutines for the protocol's sake but run their (short, batched) SQLite calls inline.

    Args:
        path: database file (created if missing); ":memory:" for a throwaway database.
        host_concurrency: requests of one host leased at once (>= 1).
        lease_ttl_s: seconds a lease lasts before :meth:`lease` may hand it out again (> 0).
        batch_size: written rows per automatic commit (>= 1); see the module docstring.

    Raises:
        ValueError: on a bad argument.
        StateError: the file was written by an older Skitter (another schema): start a new
            crawl.
        FrontierError: the file cannot be opened (locked by another process, not a
            Skitter frontier, written by a newer Skitter, corrupt).
    """

    def __init__(
        self,
        path: str,
        host_concurrency: int = 1,
        lease_ttl_s: float = 300.0,
        batch_size: int = 50_000,
    ) -> None:
        super().__init__(host_concurrency, lease_ttl_s)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.path = path
        self.batch_size = batch_size
        self._ops = 0
        self._flushes = 0
        self._dirty_hosts: set[_Host] = set()
        self._prefix_hosts: dict[str, _Host] = {}
        self._leased_urls: dict[int, str] = {}  # seq -> url of leased rows (see _load)
        self._by_id: dict[int, _Host] = {}
        self._seq = 0
        self._merged_seq = 0  # rows with seq <= this are in queue, newer ones in queue_new
        self._new_rows = 0  # rows in queue_new
        self._level_rows = [0] * _SEEN_LEVELS  # rows in seen0, seen1, ...
        self._conn: sqlite3.Connection | None = None
        self._seen: _Seen
        self._guard_cm = _Guard(self)
        try:
            self._conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=1.0
            )
            self._open(self._conn)
        except (sqlite3.Error, StateError) as e:
            if self._conn is not None:
                self._conn.close()
            self._closed = True
            if isinstance(e, StateError):
                raise
            err = db_error(e, path) if isinstance(e, sqlite3.Error) else None
            if isinstance(err, OutputError):
                raise err from e  # the disk is full (or failing): not a bad frontier
            raise FrontierError(f"cannot open frontier {path!r}: {e}") from e

    @classmethod
    async def open(
        cls,
        path: str,
        host_concurrency: int = 1,
        lease_ttl_s: float = 300.0,
        batch_size: int = 50_000,
    ) -> SqliteFrontier:
        """Same as the constructor (which opens synchronously); for symmetry with other ports."""
        return cls(path, host_concurrency, lease_ttl_s, batch_size)

    # -- opening ------------------------------------------------------------------------

    def _open(self, db: sqlite3.Connection) -> None:
        meta = open_database(db, self.path)
        self._seq = int(meta.get("next_seq", 0))
        self._merged_seq = int(meta.get("merged_seq", 0))
        pending: dict[int, int] = {}
        for t in _QUEUES:
            for hid, n in db.execute(f"SELECT host, count(*) FROM {t} GROUP BY host"):
                pending[hid] = pending.get(hid, 0) + n
        self._new_rows = db.execute("SELECT count(*) FROM queue_new").fetchone()[0]
        for hid, name, not_before in db.execute("SELECT id, host, not_before FROM hosts"):
            n = pending.get(hid, 0)
            h = _Host(name, hid, not_before, _CachedQueue(self, hid, complete=n == 0))
            h.pending = n
            self._hosts[name] = h
            self._by_id[hid] = h
        self._pending = sum(pending.values())
        self._level_rows = [db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _SEEN]
        total = sum(self._level_rows)
        # Every key in seen has one latest row: pending (in a queue table) or done.
        self._done = total - self._pending
        self._seen = _Seen(total + total // 2)
        for t in _SEEN:
            self._seen.fill(map(itemgetter(0), db.execute(f"SELECT fp FROM {t}")), 0)
        self._seen._room -= total
        for h in self._hosts.values():
            if h.pending:
                self._touch(h)

    # -- plumbing -------------------------------------------------------------------------

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None or self._closed:
            raise FrontierError("frontier is closed")
        return self._conn

    def _guard(self) -> _Guard:
        """``with self._guard() as db``: a write transaction; sqlite errors → FrontierError."""
        if self._closed or self._conn is None:
            raise FrontierError("frontier is closed")
        return self._guard_cm

    def _commit(self, db: sqlite3.Connection, durable: bool = False) -> None:
        """Commit the open transaction (with dirty host times and the next seq).

        ``durable``: then also commit a one-row transaction with ``synchronous=FULL``, whose
        fsync of the WAL covers every earlier frame (SQLite refuses to change
        ``synchronous`` inside a transaction, hence the second transaction).
        """
        if not db.in_transaction:
            db.execute("BEGIN")
        if self._dirty_hosts:
            db.executemany(
                "UPDATE hosts SET not_before = ? WHERE id = ?",
                [(h.not_before, h.hid) for h in self._dirty_hosts],
            )
            self._dirty_hosts.clear()
        db.execute("INSERT OR REPLACE INTO meta VALUES ('next_seq', ?)", (self._seq,))
        db.execute("COMMIT")
        self._ops = 0
        if durable:
            db.execute("PRAGMA synchronous = FULL")
            try:
                self._flushes += 1
                db.execute("BEGIN")
                db.execute("INSERT OR REPLACE INTO meta VALUES ('flushes', ?)", (self._flushes,))
                db.execute("COMMIT")
            finally:
                db.execute("PRAGMA synchronous = NORMAL")

    # -- storage hooks (the key of an entry is its seq: entries are (p, d, seq, seq)) -----

    def _make_queue(self, hid: int) -> _Queue:
        return _CachedQueue(self, hid, complete=True)

    def _new_hid(self, name: str, not_before: float) -> int:
        cur = self._db.execute(
            "INSERT INTO hosts(host, not_before) VALUES (?, ?)", (name, not_before)
        )
        self._ops += 1
        hid = cur.lastrowid
        assert hid is not None
        return hid

    def _host(self, name: str) -> _Host:
        h = super()._host(name)
        self._by_id[h.hid] = h
        return h

    def _load(self, fp: int) -> tuple[Request, int]:
        row = self._db.execute(_LOAD[fp > self._merged_seq], (fp,)).fetchone()
        if row is None:
            raise FrontierError(f"frontier row {fp} vanished")
        url, depth, priority, attempts, referer, data = row
        self._leased_urls[fp] = url
        return _decode(url, depth, priority, referer, data), attempts

    def _store_done(
        self, fp: int, status: int | None, etag: str | None, last_modified: str | None
    ) -> None:
        db = self._db
        new = fp > self._merged_seq
        url = self._leased_urls.pop(fp, None)
        if url is None:
            db.execute(_TO_DONE[new], (status, etag, last_modified, fp))
        else:  # cheaper than reading the row again
            db.execute(_INSERT_DONE, (fp, url, status, etag, last_modified))
        db.execute(_DELETE[new], (fp,))
        self._new_rows -= new
        self._ops += 2

    def _store_attempts(self, fp: int, attempts: int) -> None:
        self._leased_urls.pop(fp, None)
        self._db.execute(_ATTEMPTS[fp > self._merged_seq], (attempts, fp))
        self._ops += 1

    def _host_changed(self, host: _Host) -> None:
        self._dirty_hosts.add(host)

    def _maybe_merge(self, db: sqlite3.Connection) -> None:
        """Move queue_new into queue, and seen0 into seen1 (and so on down the levels),
        when they have grown past their limits; in the open transaction.

        Why: inserts land on scattered pages of a B-tree (by host, by fingerprint), and a
        B-tree much larger than the page cache then costs a page write per row at every
        commit. The small ``*_new``/``seen0`` trees stay cached; a merge walks the big tree
        once, in key order, for ``_NEW_MAX`` rows.
        """
        if self._new_rows >= _NEW_MAX:
            db.execute(
                "INSERT INTO queue(seq, host, priority, depth, url, referer, data, attempts) "
                "SELECT seq, host, priority, depth, url, referer, data, attempts FROM queue_new"
            )
            self._ops += self._new_rows
            db.execute("DELETE FROM queue_new")
            self._new_rows = 0
            self._merged_seq = self._seq
            db.execute("INSERT OR REPLACE INTO meta VALUES ('merged_seq', ?)", (self._seq,))
        rows = self._level_rows
        for i in range(_SEEN_LEVELS - 1):
            if rows[i] < _NEW_MAX * _LEVEL_RATIO**i:
                break
            db.execute(f"INSERT INTO {_SEEN[i + 1]}(fp, seq) SELECT fp, seq FROM {_SEEN[i]}")
            db.execute(f"DELETE FROM {_SEEN[i]}")
            self._ops += rows[i]
            rows[i + 1] += rows[i]
            rows[i] = 0

    # -- the Frontier protocol ----------------------------------------------------------

    async def lease(self, now: float) -> Lease | None:
        """See :meth:`skitter.frontier.base.Frontier.lease`.

        Raises:
            FrontierError: database failure.
        """
        with self._guard():
            return self._lease(now)

    async def ack(
        self,
        lease: Lease,
        *,
        not_before: float,
        status: int | None = None,
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> None:
        """See :meth:`skitter.frontier.base.Frontier.ack`.

        Raises:
            FrontierError: stale or unknown token; database failure.
        """
        with self._guard():
            self._ack(lease, not_before, status, etag, last_modified)

    async def retry(self, lease: Lease, *, not_before: float, count_attempt: bool = True) -> None:
        """See :meth:`skitter.frontier.base.Frontier.retry`.

        Raises:
            FrontierError: stale or unknown token; database failure.
        """
        with self._guard():
            self._retry(lease, not_before, count_attempt)

    async def renew(self, lease: Lease, now: float) -> Lease:
        """See :meth:`skitter.frontier.base.Frontier.renew`.

        Raises:
            FrontierError: stale or unknown token.
        """
        return self._renew(lease, now)

    async def delay_host(self, host: str, not_before: float) -> None:
        """See :meth:`skitter.frontier.base.Frontier.delay_host`.

        Raises:
            FrontierError: database failure.
        """
        with self._guard():
            self._delay_host(host, not_before)

    async def next_ready_at(self) -> float | None:
        """See :meth:`skitter.frontier.base.Frontier.next_ready_at`."""
        return self._next_ready_at()

    async def is_finished(self) -> bool:
        """See :meth:`skitter.frontier.base.Frontier.is_finished`."""
        self._check_open()
        return self._pending == 0 and not self._leases

    async def note_inlinks(self, links: Sequence[tuple[str, str]]) -> int:
        """See :meth:`skitter.frontier.base.Frontier.note_inlinks`.

        Costs a few primary-key lookups per pair (the ``seen`` levels, the queue row, the
        ``inlinks`` table); meant for ``--order inlinks`` only.

        Raises:
            FrontierError: database failure.
        """
        changed = 0
        with self._guard() as db:
            seen = self._seen
            for url, source in links:
                fp = fingerprint(url)
                if not (seen.recent(fp) or seen.maybe(fp)):
                    continue
                seq = self._seq_of(fp)
                if seq is None or seq in self._leased_fps:
                    continue
                new = seq > self._merged_seq
                row = db.execute(_KEYS[new], (seq,)).fetchone()
                if row is None:  # done
                    continue
                hid, priority, depth, _ = row
                h = self._by_id[hid]
                if h.name == source:
                    continue
                cur = db.execute(
                    "INSERT OR IGNORE INTO inlinks(seq, src) VALUES (?, ?)",
                    (seq, fingerprint(source)),
                )
                if cur.rowcount != 1:
                    continue
                db.execute(_SET_PRIORITY[new], (priority - 1, seq))
                self._ops += 2
                self._reprioritised(h, (priority, depth, seq, seq), (priority - 1, depth, seq, seq))
                changed += 1
        return changed

    async def mark_done(self, urls: Sequence[str]) -> None:
        """See :meth:`skitter.frontier.base.Frontier.mark_done`.

        Raises:
            ValueError: an unknown URL has no host.
            FrontierError: database failure.
        """
        with self._guard() as db:
            seen = self._seen
            for url in urls:
                fp = fingerprint(url)
                seq = self._seq_of(fp) if seen.recent(fp) or seen.maybe(fp) else None
                if seq is None:
                    self._host(host_key(url))  # hosts are created as memory does
                    self._seq += 1
                    db.execute(_INSERT_SEEN, (fp, self._seq))
                    db.execute("INSERT INTO done(seq, url) VALUES (?, ?)", (self._seq, url))
                    self._level_rows[0] += 1
                    seen.add(fp)
                    self._done += 1
                    self._ops += 2
                    continue
                new = seq > self._merged_seq
                row = db.execute(_KEYS[new], (seq,)).fetchone()
                if row is None:  # done already
                    continue
                hid, priority, depth, _ = row
                self._leased_urls.pop(seq, None)
                # store first: _finish may refill the host's cache from the table
                db.execute(_TO_DONE[new], (None, None, None, seq))
                db.execute(_DELETE[new], (seq,))
                self._new_rows -= new
                self._ops += 2
                self._finish(self._by_id[hid], (priority, depth, seq, seq))
            self._maybe_merge(db)

    async def counts(self) -> FrontierCounts:
        """See :meth:`skitter.frontier.base.Frontier.counts`."""
        self._check_open()
        return self._counts()

    async def flush(self) -> None:
        """Commit everything so far with an fsync of the WAL.

        After it returns, every earlier operation survives a process crash, an OS crash
        and power loss. Leases are never persisted (they become pending on reopen).

        Raises:
            FrontierError: database failure.
        """
        db = self._db
        try:
            self._commit(db, durable=True)
        except sqlite3.Error as e:
            raise db_error(e, self.path) from e

    async def aclose(self) -> None:
        """Flush, checkpoint the WAL into the main file and close; idempotent.

        Raises:
            FrontierError: database failure (the connection is closed anyway).
        """
        if self._closed or self._conn is None:
            return
        try:
            await self.flush()
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as e:
            raise db_error(e, self.path) from e
        finally:
            self._closed = True
            self._conn.close()
