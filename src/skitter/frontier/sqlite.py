"""SQLite frontier: a resumable, crash-safe frontier in one file (WAL mode).

Storage (the database is the source of truth; memory is a cache rebuilt on open)::

    seen0 .. seen3(               -- the exact URL-seen set, in levels (newest first; a key
        fp INTEGER PRIMARY KEY,   -- is in exactly one): skitter.urls.fingerprint(url), or
        seq INTEGER)              -- forced_key(request) for a force=True entry; seq: the
                                  -- queue row last written for this key
    queue, queue_new(             -- pending (or leased) requests: queue_new holds the rows
        seq INTEGER PRIMARY KEY,  -- with seq > meta.merged_seq, queue the older ones
        host, priority, depth,    -- host: hosts.id
        url, referer,
        data,                     -- JSON {"o": origin_url, "h": [[url, status], ...],
                                  --   "c": 1 (check_only)} or NULL when all empty
        attempts)
    done(seq, url, status, etag,  -- a log of acked or marked-done requests, appended in the
         last_modified)           -- order they were done (a queue row moves here, with its
                                  -- seq, when acked); a forced key done twice has two rows
    hosts(id INTEGER PRIMARY KEY, host TEXT UNIQUE, not_before REAL)
    meta(key TEXT PRIMARY KEY, value)   -- schema (2), next_seq, merged_seq, flushes
    index queue_host, queue_new_host ON (host, priority, depth)  -- (+ seq, the rowid)
    views seen(fp, seq) (all levels) and urls(url, state 0/2, ..., seq), for people

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

import bisect
import functools
import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from operator import itemgetter
from types import TracebackType
from typing import Any, Protocol

try:  # a declared dependency; without it the seen prefilter is an exact (larger) set
    from rbloom import Bloom as _RBloom

    _HAVE_RBLOOM = True
except ImportError:  # pragma: no cover
    _HAVE_RBLOOM = False

from skitter.errors import FrontierError, OutputError, SkitterError, StateError
from skitter.frontier.base import (
    AddResult,
    Entry,
    FrontierCounts,
    _CoreFrontier,
    _Host,
    _Queue,
    forced_key,
)
from skitter.models import Hop, Lease, Request
from skitter.urls import fingerprint, host_key

__all__ = ["SqliteFrontier"]

_SCHEMA_VERSION = 2

#: Entries of one host loaded from the index per query.
_CHUNK = 4
#: A host's cache is cut back to _CHUNK entries when pushes make it longer than this.
_CACHE_MAX = 8
#: Recently seen fingerprints kept exactly (two generations of this many each).
_HOT_MAX = 1 << 18
#: False-positive rate of each Bloom filter in the chain (a false positive costs one
#: primary-key lookup; 1e-3 is ~14.4 bits per URL).
_BLOOM_FP = 1e-3
_BLOOM_MIN = 1 << 20
#: Page size of a new database file (bytes).
_PAGE_SIZE = 16384
#: SQLite page cache (KiB).
_CACHE_KIB = 65536
#: Entries of the URL-prefix -> host memo before it is cleared.
_PREFIX_MEMO_MAX = 1 << 18
#: Rows in queue_new (and in seen0) that trigger a merge into queue (seen1).
_NEW_MAX = 1 << 20
#: Seen levels; level i (but the last) is merged into level i+1 once it holds
#: _NEW_MAX * _LEVEL_RATIO**i keys.
_SEEN_LEVELS = 4
_LEVEL_RATIO = 8
#: Primary keys per ``IN (...)`` lookup.
_LOOKUP_CHUNK = 512

_QUEUE_COLUMNS = """(
    seq INTEGER PRIMARY KEY,
    host INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    url TEXT NOT NULL,
    referer TEXT,
    data TEXT,
    attempts INTEGER NOT NULL DEFAULT 0
)"""
#: The levels of the seen set, newest (smallest) first.
_SEEN = tuple(f"seen{i}" for i in range(_SEEN_LEVELS))
#: The two parts of the queue: (rows with seq <= merged seq, newer rows).
_QUEUES = ("queue", "queue_new")

_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE hosts(
    id INTEGER PRIMARY KEY,
    host TEXT NOT NULL UNIQUE,
    not_before REAL NOT NULL
);
{"".join(f"CREATE TABLE {t}(fp INTEGER PRIMARY KEY, seq INTEGER NOT NULL);" for t in _SEEN)}
CREATE TABLE queue{_QUEUE_COLUMNS};
CREATE INDEX queue_host ON queue(host, priority, depth);
CREATE TABLE queue_new{_QUEUE_COLUMNS};
CREATE INDEX queue_new_host ON queue_new(host, priority, depth);
CREATE TABLE done(
    seq INTEGER NOT NULL,
    url TEXT NOT NULL,
    status INTEGER,
    etag TEXT,
    last_modified TEXT
);
CREATE VIEW seen(fp, seq) AS
    {" UNION ALL ".join(f"SELECT fp, seq FROM {t}" for t in _SEEN)};
CREATE VIEW urls(url, state, attempts, last_status, etag, last_modified, seq) AS
    SELECT url, 0, attempts, NULL, NULL, NULL, seq FROM queue
    UNION ALL
    SELECT url, 0, attempts, NULL, NULL, NULL, seq FROM queue_new
    UNION ALL
    SELECT url, 2, NULL, status, etag, last_modified, seq FROM done;
"""

# New rows go to queue_new. The tuples below are indexed by ``seq > merged seq``: [0] is the
# statement for a row of queue, [1] for a row of queue_new.
_INSERT_QUEUE = (
    "INSERT INTO queue_new(seq, host, priority, depth, url, referer, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
#: (seq, host id, priority, depth, url, referer, data): a row of _INSERT_QUEUE.
_QueueRow = tuple[int, int, int, int, str, str | None, str | None]
_INSERT_SEEN = "INSERT INTO seen0(fp, seq) VALUES (?, ?)"
_CHUNK_FIRST = (
    " UNION ALL ".join(f"SELECT priority, depth, seq FROM {t} WHERE host = ?1" for t in _QUEUES)
    + " ORDER BY 1, 2, 3 LIMIT ?2"
)
# After the cursor (p, d, seq): first the rest of its (p, d) group, then later groups. (One
# row-value test "(priority, depth, seq) > (...)" would seek on (priority, depth) only, seq
# being the rowid: a scan of the group from its start at every refill.)
_CHUNK_SAME = (
    " UNION ALL ".join(
        f"SELECT priority, depth, seq FROM {t} "
        "WHERE host = ?1 AND priority = ?2 AND depth = ?3 AND seq > ?4"
        for t in _QUEUES
    )
    + " ORDER BY 3 LIMIT ?5"
)
_CHUNK_LATER = (
    " UNION ALL ".join(
        f"SELECT priority, depth, seq FROM {t} WHERE host = ?1 AND (priority, depth) > (?2, ?3)"
        for t in _QUEUES
    )
    + " ORDER BY 1, 2, 3 LIMIT ?4"
)
_LOAD = tuple(
    f"SELECT url, depth, priority, attempts, referer, data FROM {t} WHERE seq = ?" for t in _QUEUES
)
_KEYS = tuple(f"SELECT host, priority, depth, data FROM {t} WHERE seq = ?" for t in _QUEUES)
_TO_DONE = tuple(
    "INSERT INTO done(seq, url, status, etag, last_modified) "
    f"SELECT seq, url, ?, ?, ? FROM {t} WHERE seq = ?"
    for t in _QUEUES
)
_INSERT_DONE = "INSERT INTO done(seq, url, status, etag, last_modified) VALUES (?, ?, ?, ?, ?)"
_DELETE = tuple(f"DELETE FROM {t} WHERE seq = ?" for t in _QUEUES)
_ATTEMPTS = tuple(f"UPDATE {t} SET attempts = ? WHERE seq = ?" for t in _QUEUES)
_SEQ_OF = " UNION ALL ".join(f"SELECT seq FROM {t} WHERE fp = ?1" for t in _SEEN) + " LIMIT 1"


@functools.cache
def _exists_sql(n: int, levels: tuple[str, ...]) -> str:
    """The query for which of ``n`` keys (parameters ?1..?n) are in one of the seen
    ``levels`` (called with powers of two only: a few distinct statements, all cached)."""
    marks = ",".join(f"?{i}" for i in range(1, n + 1))
    return " UNION ALL ".join(f"SELECT fp FROM {t} WHERE fp IN ({marks})" for t in levels)


_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes


def _encode(req: Request) -> str | None:
    """The ``data`` column: the rarely-set fields of ``req`` as JSON, or None."""
    d: dict[str, Any] = {}
    if req.origin_url is not None:
        d["o"] = req.origin_url
    if req.redirects:
        d["h"] = [[h.url, h.status] for h in req.redirects]
    if req.check_only:
        d["c"] = 1
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False) if d else None


def _decode(url: str, depth: int, priority: int, referer: str | None, data: str | None) -> Request:
    if data is None:
        return Request(url, depth, referer=referer, priority=priority)
    d = json.loads(data)
    return Request(
        url,
        depth,
        referer=referer,
        origin_url=d.get("o"),
        redirects=tuple(Hop(u, s) for u, s in d.get("h", ())),
        check_only=bool(d.get("c", 0)),
        priority=priority,
    )


class _BloomLike(Protocol):
    def add(self, obj: Any, /) -> None: ...
    def update(self, *others: Iterable[Any]) -> None: ...
    def __contains__(self, obj: Any) -> bool: ...


class _ExactSet:
    """Stand-in for a Bloom filter when rbloom is missing: exact, ~70 bytes per URL."""

    def __init__(self) -> None:
        self._set: set[int] = set()

    def add(self, obj: Any, /) -> None:
        self._set.add(obj)

    def update(self, *others: Iterable[Any]) -> None:
        for it in others:
            self._set.update(it)

    def __contains__(self, obj: Any) -> bool:
        return obj in self._set


def _new_bloom(capacity: int) -> _BloomLike:
    if _HAVE_RBLOOM:
        bloom: _BloomLike = _RBloom(capacity, _BLOOM_FP)
        return bloom
    return _ExactSet()


class _Seen:
    """Approximate-then-exact URL-seen prefilter over fingerprints (64-bit signed ints).

    ``recent`` is exact for the last ~2 * _HOT_MAX fingerprints added or confirmed;
    ``maybe`` is a Bloom-filter answer (False = certainly never added; True = look it up:
    with probability ~``_BLOOM_FP`` per filter it was never added).
    """

    def __init__(self, capacity: int) -> None:
        self._blooms: list[_BloomLike] = []
        self._room = 0
        self._next_cap = max(capacity, _BLOOM_MIN)
        self._young: set[int] = set()
        self._old: set[int] = set()
        self._grow()

    def _grow(self) -> None:
        self._blooms.append(_new_bloom(self._next_cap))
        self._room = self._next_cap
        self._next_cap *= 2

    def recent(self, fp: int) -> bool:
        return fp in self._young or fp in self._old

    def maybe(self, fp: int) -> bool:
        for b in self._blooms:  # noqa: SIM110 (no generator per call: hot path)
            if fp in b:
                return True
        return False

    def add(self, fp: int) -> None:
        """Record a fingerprint now stored in the table."""
        if self._room <= 0:
            self._grow()
        self._blooms[-1].add(fp)
        self._room -= 1
        self.touch(fp)

    def add_many(self, fps: list[int]) -> None:
        """Record fingerprints now stored in the table (same as ``add`` on each)."""
        i = 0
        while i < len(fps):
            if self._room <= 0:
                self._grow()
            part = fps[i : i + self._room]
            self._blooms[-1].update(part)
            self._room -= len(part)
            i += len(part)
        young = self._young
        young.update(fps)
        if len(young) >= _HOT_MAX:
            self._old = young
            self._young = set()

    def fill(self, fps: Iterable[int], count: int) -> None:
        """Record ``count`` stored fingerprints in the Bloom filter only (on open, when the
        filter was sized for at least ``count``)."""
        self._blooms[-1].update(fps)
        self._room -= count

    def touch(self, fp: int) -> None:
        """Remember ``fp`` (known seen) exactly for a while."""
        young = self._young
        young.add(fp)
        if len(young) >= _HOT_MAX:
            self._old = young
            self._young = set()


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
            self.owner._refill(self)
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


#: SQLite result codes that mean the file could not be written (SQLITE_READONLY,
#: SQLITE_IOERR, SQLITE_FULL), not that the database is wrong.
_WRITE_FAILURES = frozenset({8, 10, 13})


def _db_error(e: sqlite3.Error, path: str) -> SkitterError:
    """``e`` as a :class:`FrontierError`, or as an :class:`OutputError` naming the file when
    it could not be written (disk full, I/O error, read-only)."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _WRITE_FAILURES:
        cause = {8: "read-only", 10: "I/O error", 13: "database or disk is full"}[code & 0xFF]
        return OutputError(path, cause)
    return FrontierError(f"frontier database error: {e}")


class _Guard:
    """Context manager around one frontier call (a class: cheaper than @contextmanager).

    Enter: open a transaction if none is open. Exit: commit when ``batch_size`` rows were
    written since the last commit; turn ``sqlite3.Error`` into :class:`FrontierError`.
    """

    __slots__ = ("owner",)

    def __init__(self, owner: SqliteFrontier) -> None:
        self.owner = owner

    def __enter__(self) -> sqlite3.Connection:
        db = self.owner._db
        try:
            if not db.in_transaction:
                db.execute("BEGIN")
        except sqlite3.Error as e:
            raise _db_error(e, self.owner.path) from e
        return db

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, sqlite3.Error):
            raise _db_error(exc, self.owner.path) from exc
        owner = self.owner
        if exc is None and owner._ops >= owner.batch_size:
            try:
                owner._commit(owner._db)
            except sqlite3.Error as e:
                raise _db_error(e, owner.path) from e


class SqliteFrontier(_CoreFrontier):
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
            err = _db_error(e, path)
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

    def _check_schema(self, db: sqlite3.Connection) -> bool:
        """True if the file is an empty database (to be created), False if it holds this
        schema. Raises StateError (older schema) or sqlite3.DatabaseError (anything else)."""
        names = {n for (n,) in db.execute("SELECT name FROM sqlite_master")}
        if not names:
            return True
        row = None
        if "meta" in names:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None:
            raise sqlite3.DatabaseError("not a Skitter frontier (no schema version)")
        version = row[0]
        if isinstance(version, int) and version < _SCHEMA_VERSION:
            raise StateError(
                f"{self.path}: frontier written by an older Skitter (format {version}, "
                f"this one reads {_SCHEMA_VERSION}); start a new crawl"
            )
        if version != _SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"unsupported frontier schema version {version!r}")
        return False

    def _open(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA locking_mode = EXCLUSIVE")
        # Larger pages: fewer B-tree levels and splits for the scattered inserts (+8% at 1 M
        # URLs); applies to a new file only (the page size of a file is fixed).
        db.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal" and self.path != ":memory:":
            raise sqlite3.OperationalError(f"cannot switch to WAL (journal_mode={mode})")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        # Checkpoint every ~40 MiB of WAL instead of 4 MiB: rows land on scattered B-tree
        # pages (seen, queue_host), and rarer checkpoints rewrite each hot page fewer times.
        db.execute("PRAGMA wal_autocheckpoint = 10000")
        db.execute("PRAGMA journal_size_limit = 67108864")
        db.execute("BEGIN IMMEDIATE")  # takes the exclusive lock now
        try:
            if self._check_schema(db):
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        db.execute(stmt)
                db.execute("INSERT INTO meta VALUES ('schema', ?)", (_SCHEMA_VERSION,))
            meta = dict(db.execute("SELECT key, value FROM meta"))
            self._seq = int(meta.get("next_seq", 0))
            self._merged_seq = int(meta.get("merged_seq", 0))
            db.execute("COMMIT")
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")

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

    def _refill(self, q: _CachedQueue) -> None:
        """Load the next chunk of ``q``'s host from the index (skipping leased rows)."""
        db = self._db
        leased = self._leased_fps
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

    def _exists(self, fps: list[int]) -> set[int]:
        """The subset of ``fps`` stored in ``seen`` (the non-empty levels only)."""
        db = self._db
        found: set[int] = set()
        levels = tuple(t for t, rows in zip(_SEEN, self._level_rows, strict=True) if rows)
        if not levels:
            return found
        for i in range(0, len(fps), _LOOKUP_CHUNK):
            part = fps[i : i + _LOOKUP_CHUNK]
            n = 1 << (len(part) - 1).bit_length()  # pad to a power of two (repeat a key)
            part += part[:1] * (n - len(part))
            found.update(fp for (fp,) in db.execute(_exists_sql(n, levels), part))
        return found

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

    def _seq_of(self, fp: int) -> int | None:
        """The seq recorded in ``seen`` for key ``fp`` (None if never seen)."""
        row = self._db.execute(_SEQ_OF, (fp,)).fetchone()
        return None if row is None else int(row[0])

    # -- the Frontier protocol ----------------------------------------------------------

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

    def _seen_test(self, fps: list[int]) -> set[int]:
        """The URL-seen test: the subset of ``fps`` (keys) already stored in ``seen``.

        Exact: recent keys are answered from memory, keys the Bloom filters have never
        seen are new, and every Bloom positive is looked up in ``seen`` (so a Bloom false
        positive costs one lookup and never makes a new key look seen).

        Raises:
            sqlite3.Error: the lookup failed (callers turn it into FrontierError).
        """
        seen = self._seen
        known: set[int] = set()
        check: list[int] = []  # Bloom positives to look up
        young, old, maybe = seen._young, seen._old, seen.maybe
        for fp in fps:
            if fp in young or fp in old:
                known.add(fp)
            elif maybe(fp):
                check.append(fp)
        if check:
            known |= self._exists(check)
        return known

    def _insert_seen(self, db: sqlite3.Connection, srows: list[tuple[int, int]]) -> None:
        """Store new ``(key, seq)`` rows in ``seen`` (keys not stored yet) and record the
        keys in the prefilter.

        Raises:
            sqlite3.IntegrityError: a key was already stored.
        """
        db.executemany(_INSERT_SEEN, srows)
        self._level_rows[0] += len(srows)
        self._seen.add_many([fp for fp, _ in srows])
        self._ops += len(srows)

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
            raise _db_error(e, self.path) from e

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
            raise _db_error(e, self.path) from e
        finally:
            self._closed = True
            self._conn.close()
