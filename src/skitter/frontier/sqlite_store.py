"""SQLite frontier storage (:class:`skitter.frontier.sqlite.SqliteFrontier`): the tables,
the statements, the row codec, opening a file and the transaction guard.

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
    inlinks(seq, src)             -- note_inlinks: source host fingerprints that linked
                                  -- to the pending row ``seq`` (created on open if missing)
    meta(key TEXT PRIMARY KEY, value)   -- schema (2), next_seq, merged_seq, flushes
    index queue_host, queue_new_host ON (host, priority, depth)  -- (+ seq, the rowid)
    views seen(fp, seq) (all levels) and urls(url, state 0/2, ..., seq), for people
"""

from __future__ import annotations

import functools
import json
import sqlite3
from types import TracebackType
from typing import TYPE_CHECKING, Any

from skitter.errors import FrontierError, StateError
from skitter.models import Hop, Request

if TYPE_CHECKING:
    from skitter.frontier.sqlite import SqliteFrontier

_SCHEMA_VERSION = 2
#: Page size of a new database file (bytes).
_PAGE_SIZE = 16384
#: SQLite page cache (KiB).
_CACHE_KIB = 65536
#: Seen levels; level i (but the last) is merged into level i+1 once it holds
#: _NEW_MAX * _LEVEL_RATIO**i keys.
_SEEN_LEVELS = 4
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
_INLINKS = (
    "CREATE TABLE IF NOT EXISTS inlinks(seq INTEGER NOT NULL, src INTEGER NOT NULL, "
    "PRIMARY KEY (seq, src)) WITHOUT ROWID"
)
_SET_PRIORITY = tuple(f"UPDATE {t} SET priority = ? WHERE seq = ?" for t in _QUEUES)
_SEQ_OF = " UNION ALL ".join(f"SELECT seq FROM {t} WHERE fp = ?1" for t in _SEEN) + " LIMIT 1"


@functools.cache
def _exists_sql(n: int, levels: tuple[str, ...]) -> str:
    """The query for which of ``n`` keys (parameters ?1..?n) are in one of the seen
    ``levels`` (called with powers of two only: a few distinct statements, all cached)."""
    marks = ",".join(f"?{i}" for i in range(1, n + 1))
    return " UNION ALL ".join(f"SELECT fp FROM {t} WHERE fp IN ({marks})" for t in levels)


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
            raise FrontierError(f"frontier database error: {e}") from e
        return db

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, sqlite3.Error):
            raise FrontierError(f"frontier database error: {exc}") from exc
        owner = self.owner
        if exc is None and owner._ops >= owner.batch_size:
            try:
                owner._commit(owner._db)
            except sqlite3.Error as e:
                raise FrontierError(f"frontier database error: {e}") from e


def _check_schema(db: sqlite3.Connection, path: str) -> bool:
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
            f"{path}: frontier written by an older Skitter (format {version}, "
            f"this one reads {_SCHEMA_VERSION}); start a new crawl"
        )
    if version != _SCHEMA_VERSION:
        raise sqlite3.DatabaseError(f"unsupported frontier schema version {version!r}")
    return False


def open_database(db: sqlite3.Connection, path: str) -> dict[str, Any]:
    """Set up a connection to the frontier file ``path`` (exclusive lock, WAL, caches),
    create the schema in an empty file; returns the ``meta`` table as a dict.

    Raises:
        StateError: the file was written by an older Skitter.
        sqlite3.Error: the file is locked, not a Skitter frontier, newer, or corrupt.
    """
    db.execute("PRAGMA locking_mode = EXCLUSIVE")
    # Larger pages: fewer B-tree levels and splits for the scattered inserts (+8% at 1 M
    # URLs); applies to a new file only (the page size of a file is fixed).
    db.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
    mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode != "wal" and path != ":memory:":
        raise sqlite3.OperationalError(f"cannot switch to WAL (journal_mode={mode})")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
    # Checkpoint every ~40 MiB of WAL instead of 4 MiB: rows land on scattered B-tree
    # pages (seen, queue_host), and rarer checkpoints rewrite each hot page fewer times.
    db.execute("PRAGMA wal_autocheckpoint = 10000")
    db.execute("PRAGMA journal_size_limit = 67108864")
    db.execute("BEGIN IMMEDIATE")  # takes the exclusive lock now
    try:
        if _check_schema(db, path):
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            db.execute("INSERT INTO meta VALUES ('schema', ?)", (_SCHEMA_VERSION,))
        db.execute(_INLINKS)  # additive: older files of this schema gain it
        meta = dict(db.execute("SELECT key, value FROM meta"))
        db.execute("COMMIT")
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
    return meta
