"""pages.jsonl: one JSON object per fetched URL (its final outcome), one line each.

Line shape (keys always in this order; compact separators, UTF-8, non-ASCII kept as is)::

    {"url":"https://example.org/a","final_url":"https://example.org/b","status":200,"depth":1,
     "content_type":"text/html","bytes":5120,"sha1":"3f78...","fetched_at":"2024-05-01T12:00:00.123Z",
     "elapsed_s":0.231,"attempts":1,"redirects":[{"url":"https://example.org/a","status":301}],
     "error":null,"error_detail":null}

followed, only when set, by ``duplicate``, ``duplicate_of``, ``simhash``, ``etag``,
``last_modified`` and ``fence`` (:data:`OPTIONAL_PAGE_KEYS`; ``fence`` only from a worker of a
Redis crawl).

Each line is appended with one ``os.write`` (see :mod:`skitter.export.base` for the crash-safety
model); :meth:`PagesWriter.repair` cuts a partial last line left by a crash.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from skitter import compact_json
from skitter.export.base import LineJournal
from skitter.models import Hop

__all__ = ["OPTIONAL_PAGE_KEYS", "PageRecord", "PagesWriter", "iso_utc", "read_records"]

#: The keys of a pages.jsonl line, in the order they are written.
PAGE_KEYS = (
    "url",
    "final_url",
    "status",
    "depth",
    "content_type",
    "bytes",
    "sha1",
    "fetched_at",
    "elapsed_s",
    "attempts",
    "redirects",
    "error",
    "error_detail",
)
#: Keys written after :data:`PAGE_KEYS`, in this order, only when they have a value.
OPTIONAL_PAGE_KEYS = ("duplicate", "duplicate_of", "simhash", "etag", "last_modified", "fence")


def iso_utc(epoch_s: float) -> str:
    """Format a Unix time (seconds) as ISO 8601 UTC with millisecond precision and a ``Z``.

    >>> iso_utc(0)
    '1970-01-01T00:00:00.000Z'
    >>> iso_utc(1714564800.1234)
    '2024-05-01T12:00:00.123Z'

    Raises:
        ValueError / OverflowError: ``epoch_s`` is not finite or out of datetime's range.
    """
    # isoformat truncates to milliseconds as ``microsecond // 1000`` would (2x strftime's speed)
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


@dataclass(slots=True)
class PageRecord:
    """The outcome of one requested URL, as written to pages.jsonl.

    Attributes:
        url: the URL requested (origin of a redirect chain).
        final_url: the URL that gave the final answer (== url without redirects).
        status: final HTTP status, or None if no response was received (see ``error``).
        depth: hops from a seed (seed = 0).
        content_type: media type without parameters, lower-cased, or None.
        bytes: decoded body size in bytes (0 for none).
        sha1: hex SHA-1 of the decoded body, or None if there was no body.
        fetched_at: when the fetch started, ISO 8601 UTC with "Z" (see :func:`iso_utc`).
        elapsed_s: seconds the whole fetch took (written rounded to 3 decimals).
        attempts: fetch attempts made (1 = no retry).
        redirects: redirect hops followed, in order.
        error: a stable error kind (:data:`skitter.errors.ERROR_KINDS`) or None.
        error_detail: human-readable detail of the error, or None.
        duplicate: "exact" or "near" when the page duplicates an earlier one
            (:mod:`skitter.dedup`), else None (key left out).
        duplicate_of: the URL of that earlier page (with ``duplicate``).
        simhash: the page's 64-bit SimHash as 16 hex digits (HTML pages, ``--dedup near``).
        etag / last_modified: the response's ETag / Last-Modified as received (for a
            recrawl's conditional requests), None when absent.
        fence: the fencing token of the lease the URL was fetched under (a worker of a Redis
            crawl; ``skitter merge`` keeps the record of the newest one), else None.
    """

    url: str
    final_url: str
    status: int | None
    depth: int
    content_type: str | None
    bytes: int
    sha1: str | None
    fetched_at: str
    elapsed_s: float
    attempts: int
    redirects: list[Hop] = field(default_factory=list)
    error: str | None = None
    error_detail: str | None = None
    duplicate: str | None = None
    duplicate_of: str | None = None
    simhash: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    fence: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object for this record, keys in :data:`PAGE_KEYS` order.

        Raises:
            ValueError: ``elapsed_s`` is NaN or infinite.
        """
        if not math.isfinite(self.elapsed_s):
            raise ValueError(f"elapsed_s must be finite, got {self.elapsed_s!r}")
        d = {
            "url": self.url,
            "final_url": self.final_url,
            "status": self.status,
            "depth": self.depth,
            "content_type": self.content_type,
            "bytes": self.bytes,
            "sha1": self.sha1,
            "fetched_at": self.fetched_at,
            "elapsed_s": round(self.elapsed_s, 3),
            "attempts": self.attempts,
            "redirects": [{"url": h.url, "status": h.status} for h in self.redirects],
            "error": self.error,
            "error_detail": self.error_detail,
        }
        for key in OPTIONAL_PAGE_KEYS:
            value = getattr(self, key)
            if value is not None:
                d[key] = value
        return d


def _encode_line(obj: dict[str, Any]) -> bytes:
    """One pages.jsonl line: ``obj`` as compact JSON in UTF-8 (:func:`skitter.compact_json.encode`:
    lone surrogates escaped) plus ``\n``."""
    return compact_json.encode(obj) + b"\n"


class PagesWriter(LineJournal):
    """Appends :class:`PageRecord` lines to pages.jsonl, crash-safely.

    Args:
        path: the pages.jsonl file; created if missing, appended to otherwise. A partial last
            line (crash) is cut first; the number of bytes cut is in :attr:`repaired_bytes`.

    Raises:
        OSError: the file cannot be opened or repaired.

    Not thread-safe; one writer per file.

    Attributes:
        stamp: called with each record before it is written (a mode's port fills a field,
            e.g. a Redis worker's lease ``fence``); None = records as given.
    """

    stamp: Callable[[PageRecord], None] | None = None

    def write(self, record: PageRecord) -> int:
        """Append one record as one JSON line with a single ``os.write``.

        Returns:
            The bytes written (line length including ``\\n``).

        Raises:
            ValueError: the writer is closed, or ``elapsed_s`` is not finite.
            OSError: the write failed (the file is left without a partial line).
        """
        if self.stamp is not None:
            self.stamp(record)
        return self._file.write(_encode_line(record.to_dict()))


def read_records(path: str | os.PathLike[str], *, strict: bool = False) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of a pages.jsonl file, in file order.

    A last line without ``\\n`` (cut short by a crash) is always skipped. Lines that are not a
    JSON object are skipped too unless ``strict``.

    Raises:
        OSError: the file cannot be read.
        ValueError: ``strict`` and a complete line is not a JSON object (message has the line
            number).
    """
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                return
            try:
                obj = json.loads(raw)
            except ValueError:
                if strict:
                    raise ValueError(f"{os.fspath(path)}:{lineno}: not valid JSON") from None
                continue
            if not isinstance(obj, dict):
                if strict:
                    raise ValueError(f"{os.fspath(path)}:{lineno}: not a JSON object")
                continue
            yield obj
