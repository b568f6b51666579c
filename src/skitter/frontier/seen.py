"""The URL-seen test of the SQLite frontier: an in-memory prefilter (recent keys exactly,
then a chain of Bloom filters) in front of the exact ``seen0..`` tables (an LSM tree of
B-trees, :mod:`skitter.frontier.sqlite_store`). A Bloom false positive costs one lookup,
never a dropped URL."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any, Protocol

try:  # a declared dependency; without it the seen prefilter is an exact (larger) set
    from rbloom import Bloom as _RBloom

    _HAVE_RBLOOM = True
except ImportError:  # pragma: no cover
    _HAVE_RBLOOM = False

from skitter.frontier.sqlite_store import (
    _INSERT_SEEN,
    _LOOKUP_CHUNK,
    _SEEN,
    _SEQ_OF,
    _exists_sql,
)

#: Recently seen fingerprints kept exactly (two generations of this many each).
_HOT_MAX = 1 << 18
#: False-positive rate of each Bloom filter in the chain (a false positive costs one
#: primary-key lookup; 1e-3 is ~14.4 bits per URL).
_BLOOM_FP = 1e-3
_BLOOM_MIN = 1 << 20


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


class SeenTables:
    """The URL-seen side of :class:`skitter.frontier.sqlite.SqliteFrontier` (a mixin): the
    prefilter ``_seen`` over the ``seen`` levels, whose row counts are ``_level_rows``."""

    _seen: _Seen
    _level_rows: list[int]
    _ops: int

    @property
    def _db(self) -> sqlite3.Connection:
        raise NotImplementedError

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

    def _seq_of(self, fp: int) -> int | None:
        """The seq recorded in ``seen`` for key ``fp`` (None if never seen)."""
        row = self._db.execute(_SEQ_OF, (fp,)).fetchone()
        return None if row is None else int(row[0])

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
