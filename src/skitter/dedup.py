"""Content deduplication: exact (body digest) and near (SimHash) duplicate pages.

Pure: no I/O. The crawl feeds every fetched page to a :class:`Deduper`, which answers
whether an earlier page had the same content and remembers the new one.

* **exact**: two pages are duplicates when the SHA-1 of their decoded bodies (Content-Encoding
  removed; the ``sha1`` of pages.jsonl) are equal.
* **near** (HTML only): Charikar's SimHash (STOC 2002) as used by Manku, Jain and Das Sarma,
  "Detecting near-duplicates for web crawling" (WWW 2007): a 64-bit fingerprint whose bit
  ``i`` is the majority of bit ``i`` over the 64-bit hashes of the page's distinct word
  shingles (3 consecutive words of its visible text, lower-cased, words with digits left
  out). Pages at Hamming distance ``<= k``
  (default 3) are near duplicates. The index splits the 64 bits into ``k + 1`` bands; by the
  pigeonhole principle two fingerprints within distance ``k`` agree exactly on at least one
  band, so a lookup only compares against the pages sharing a band value (a few per band at
  millions of pages with 16-bit bands), never the whole set.

The index is rebuilt on resume from pages.jsonl (``sha1`` and ``simhash`` of each row) with
:meth:`Deduper.remember`.
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from selectolax.lexbor import LexborHTMLParser

__all__ = [
    "DEDUP_MODES",
    "Deduper",
    "Duplicate",
    "NearIndex",
    "digest_key",
    "hamming",
    "simhash",
    "simhash_hex",
    "visible_text",
]

#: Values of ``--dedup``.
DEDUP_MODES = ("off", "exact", "near")
DedupMode = Literal["off", "exact", "near"]

#: Words per shingle.
SHINGLE = 3
_WORD_RE = re.compile(r"\w+")
_DIGIT_RE = re.compile(r"\d")
_MASK64 = (1 << 64) - 1
#: Elements whose text is not visible.
_INVISIBLE = "script, style, noscript, template, head"
#: For byte value v and bit b: _BIT_TABLES[b][v] == 1 if bit b of v is set (bytes.translate).
_BIT_TABLES = tuple(bytes((v >> b) & 1 for v in range(256)) for b in range(8))


def visible_text(html: str) -> str:
    """The visible text of an HTML document, words separated by spaces.

    Parsed with Lexbor (HTML Standard §13.2); the content of ``script``, ``style``,
    ``noscript``, ``template`` and ``head`` is dropped. Never raises (an unparseable document
    gives "").
    """
    try:
        tree = LexborHTMLParser(html)
        for node in tree.css(_INVISIBLE):
            node.decompose()
        root = tree.body if tree.body is not None else tree.root
        if root is None:
            return ""
        return str(root.text(separator=" "))
    except Exception:  # the parser must not take the crawl down
        return ""


def simhash(text: str, shingle: int = SHINGLE) -> int:
    """The 64-bit SimHash of ``text`` over its set of word shingles (unsigned, 0 for no words).

    Words are ``\\w+`` runs, lower-cased; words holding a digit are left out (dates, times,
    counters, ids and version numbers do not move the fingerprint, and number-heavy pages
    are not reduced to one repeated shingle). Shingles are ``shingle`` consecutive words
    (the whole text when it has fewer words), each counted once (a boilerplate line repeated
    on the page does not outvote the rest). Each distinct shingle is hashed with BLAKE2b
    (8 bytes, big-endian); bit ``i`` of the result is set when more than half of the shingle
    hashes have bit ``i`` set (ties: unset). Stable across processes and runs.
    """
    words = [w for w in _WORD_RE.findall(text.lower()) if not _DIGIT_RE.search(w)]
    if not words:
        return 0
    if len(words) <= shingle:
        grams = {" ".join(words)}
    else:
        grams = set(map(" ".join, zip(*(words[i:] for i in range(shingle)), strict=False)))
    b2 = hashlib.blake2b
    data = b"".join(b2(g.encode("utf-8", "surrogatepass"), digest_size=8).digest() for g in grams)
    half = len(grams) / 2
    out = 0
    # bit-sliced majority: the j-th byte of every digest, one bit at a time (C loops only)
    for j in range(8):
        column = data[j::8]
        for b in range(8):
            if column.translate(_BIT_TABLES[b]).count(1) > half:
                out |= 1 << ((7 - j) * 8 + b)
    return out


def digest_key(digest: str) -> int | str:
    """A compact dict key for a hex digest: its first 96 bits as an int (a collision among
    10^8 pages has odds of about 10^-13), or the string itself if it is not hex."""
    try:
        return int(digest[:24], 16)
    except ValueError:
        return digest


def simhash_hex(value: int) -> str:
    """``value`` as 16 lower-case hex digits (the pages.jsonl ``simhash`` field)."""
    return f"{value & _MASK64:016x}"


def hamming(a: int, b: int) -> int:
    """Number of differing bits of two 64-bit fingerprints."""
    return (a ^ b).bit_count()


class NearIndex:
    """Fingerprints within Hamming distance ``distance`` found without scanning.

    The 64 bits are cut into ``distance + 1`` bands of nearly equal width (4 bands of 16
    bits for distance 3); one dict per band maps a band value to the ids of the
    fingerprints having it. A query compares only against those ids (pigeonhole: a
    fingerprint within ``distance`` shares at least one band exactly). An identical
    fingerprint is stored once (the first key kept). Compact: the fingerprints in one
    ``array('Q')``, each band's ids in ``array('I')`` buckets (about 8 + 4 x bands bytes per
    fingerprint, plus the key's reference).

    Args:
        distance: the largest Hamming distance that counts as near (0..31).

    Raises:
        ValueError: ``distance`` out of range.
    """

    __slots__ = ("_bands", "_fps", "_keys", "_shifts", "distance")

    def __init__(self, distance: int = 3) -> None:
        if not 0 <= distance <= 31:
            raise ValueError(f"near-duplicate distance must be 0..31, got {distance}")
        self.distance = distance
        n = distance + 1
        widths = [64 // n + (1 if i < 64 % n else 0) for i in range(n)]
        self._shifts: list[tuple[int, int]] = []
        shift = 0
        for w in widths:
            self._shifts.append((shift, (1 << w) - 1))
            shift += w
        self._bands: list[dict[int, array[int]]] = [{} for _ in range(n)]
        self._fps: array[int] = array("Q")
        self._keys: list[str] = []

    def __len__(self) -> int:
        return len(self._fps)

    def _nearest(self, fp: int) -> tuple[int, int] | None:
        """``(distance, id)`` of the closest stored fingerprint within ``distance``."""
        best: tuple[int, int] | None = None
        fps, limit = self._fps, self.distance
        for (shift, mask), band in zip(self._shifts, self._bands, strict=True):
            ids = band.get((fp >> shift) & mask)
            if ids is None:
                continue
            for i in ids:
                d = (fps[i] ^ fp).bit_count()
                if d <= limit and (best is None or (d, i) < best):
                    best = (d, i)
        return best

    def find(self, fp: int) -> str | None:
        """The key of a stored fingerprint within ``distance`` of ``fp`` (the closest, ties by
        first stored), or None."""
        best = self._nearest(fp)
        return None if best is None else self._keys[best[1]]

    def add(self, fp: int, key: str) -> None:
        """Store ``fp`` (0 <= fp < 2**64) under ``key`` (nothing if ``fp`` is already
        stored)."""
        shift, mask = self._shifts[0]
        fps = self._fps
        same = self._bands[0].get((fp >> shift) & mask)
        if same is not None and any(fps[j] == fp for j in same):
            return
        i = len(fps)
        self._fps.append(fp)
        self._keys.append(key)
        for (shift, mask), band in zip(self._shifts, self._bands, strict=True):
            v = (fp >> shift) & mask
            ids = band.get(v)
            if ids is None:
                band[v] = array("I", (i,))
            else:
                ids.append(i)


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A page found to duplicate an earlier one.

    Attributes:
        kind: "exact" (same decoded body digest) or "near" (SimHash within the distance).
        of: the URL of the earlier page with that content.
    """

    kind: Literal["exact", "near"]
    of: str


class Deduper:
    """Decides whether a page duplicates an earlier one, and remembers it.

    Args:
        mode: "off" (nothing is a duplicate), "exact" or "near" (exact, then near for pages
            with a SimHash).
        distance: the near-duplicate Hamming distance (see :class:`NearIndex`).

    Raises:
        ValueError: unknown mode or bad distance.
    """

    __slots__ = ("_digests", "_near", "mode")

    def __init__(self, mode: str = "exact", distance: int = 3) -> None:
        if mode not in DEDUP_MODES:
            raise ValueError(f"dedup mode must be one of {', '.join(DEDUP_MODES)}, got {mode!r}")
        self.mode = mode
        self._digests: dict[int | str, str] = {}  # digest_key(digest) -> first URL
        self._near = NearIndex(distance) if mode == "near" else None

    @property
    def wants_simhash(self) -> bool:
        """True when the caller should compute SimHashes (mode "near")."""
        return self._near is not None

    def check(self, url: str, digest: str | None, fp: int | None) -> Duplicate | None:
        """Is the page at ``url`` (body digest ``digest``, SimHash ``fp`` or None) a duplicate
        of an earlier page? Remembers it when not (a duplicate is never an original).

        An empty body (``digest`` None) is never a duplicate.
        """
        if self.mode == "off" or digest is None:
            return None
        first = self._digests.get(digest_key(digest))
        if first is not None and first != url:
            return Duplicate("exact", first)
        near = self._near
        if near is not None and fp is not None:
            other = near.find(fp)
            if other is not None and other != url:
                return Duplicate("near", other)
        self.remember(url, digest, fp)
        return None

    def remember(self, url: str, digest: str | None, fp: int | None) -> None:
        """Record an original page (also used to rebuild the index on resume)."""
        if self.mode == "off" or digest is None:
            return
        self._digests.setdefault(digest_key(digest), url)
        if self._near is not None and fp is not None:
            self._near.add(fp, url)

    def rebuild(self, rows: Iterable[tuple[str, str | None, str | None, bool]]) -> int:
        """Rebuild from pages.jsonl rows ``(url, sha1, simhash hex or None, duplicate)`` in
        file order; duplicate rows are skipped. Returns the originals remembered.

        A malformed ``simhash`` is ignored (the page still counts for exact dedup).
        """
        n = 0
        for url, digest, hexfp, dup in rows:
            if dup or digest is None:
                continue
            fp: int | None = None
            if hexfp:
                try:
                    fp = int(hexfp, 16) & _MASK64
                except ValueError:
                    fp = None
            self.remember(url, digest, fp)
            n += 1
        return n
