"""Revisit records of ``skitter extract``: deferred while files are read, resolved at the end.

A ``revisit`` (WARC 1.1 §6.7) takes its body from the record it refers to
(``WARC-Refers-To``, else the same ``WARC-Payload-Digest``) in any of the files given. While
file ``i`` is read, :func:`note_original` writes where each candidate original is to the part
file ``i.keys`` and :func:`defer_revisit` writes each revisit to ``i.revisits``; once every file
is read, :func:`resolve_revisits` reads each original back and hands the completed page to an
emit callback. Part files live in one folder, named by :func:`part_file`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import IO

from skitter.offline.payload import HttpPayload, payload_of
from skitter.offline.reader import Record, WarcReader

__all__ = ["Emit", "defer_revisit", "note_original", "part_file", "resolve_revisits"]

#: ``emit(url, warc_date, payload)``: write one completed page
Emit = Callable[[str, str, HttpPayload], None]

#: bytes kept past the body cap when an original is read back (its HTTP header block)
_HEADER_SLACK = 65536


def part_file(part_dir: str, index: int | None, suffix: str) -> str:
    """The part file of WARC number ``index`` (0-based; None: of the resolved revisits) with
    ``suffix`` (``"links"``...)."""
    name = "revisits" if index is None else f"{index:06d}"
    return os.path.join(part_dir, f"{name}.{suffix}")


def note_original(rec: Record, index: int, keys_f: IO[str]) -> None:
    """Remember where ``rec`` (of WARC number ``index``) is, by record id and payload digest,
    for the revisits that may refer to it."""
    loc = f"{rec.offset}\t{rec.inner}\n"
    rid = rec.headers.get("warc-record-id")
    if rid:
        keys_f.write(f"{rid}\t{index}\t{loc}")
    digest = rec.headers.get("warc-payload-digest")
    if digest:
        keys_f.write(f"{digest}\t{index}\t{loc}")


def defer_revisit(rec: Record, url: str, path: str, rev_f: IO[str]) -> None:
    """A revisit is completed at the end, once every file's originals are known."""
    p = payload_of(rec, max_body_bytes=0)
    obj = {
        "url": url,
        "date": rec.headers.get("warc-date", ""),
        "refers_to": rec.headers.get("warc-refers-to", ""),
        "digest": rec.headers.get("warc-payload-digest", ""),
        "status": p.status if p is not None else None,
        "headers": p.headers if p is not None else {},
        "truncated": rec.headers.get("warc-truncated"),
        "file": path,
        "offset": rec.offset,
    }
    rev_f.write(json.dumps(obj) + "\n")


def _read_at(path: str, offset: int, inner: int, keep: int) -> Record | None:
    """The record at (member ``offset``, ``inner`` decompressed bytes into it), or None."""
    with open(path, "rb") as f:
        f.seek(offset)
        reader = WarcReader(f, lambda d: None, keep_bytes=keep)
        reader.skip(inner)
        for rec in reader:
            return rec
    return None


def resolve_revisits(
    paths: Sequence[str], part_dir: str, max_body_bytes: int, emit: Emit
) -> tuple[int, int]:
    """Complete every deferred revisit of the ``paths`` (their part files in ``part_dir``)
    and ``emit`` it: with its original's body and headers when found, else as it is with a
    note in ``error_detail``.

    Returns:
        ``(resolved, unresolved)`` revisit counts.

    Raises:
        OSError: a part file or WARC cannot be read, or ``emit`` failed.
    """
    rev_files = [part_file(part_dir, i, "revisits") for i in range(len(paths))]
    wanted: set[str] = set()
    for rf in rev_files:
        with open(rf, encoding="utf-8") as f:
            for line in f:
                obj = json.loads(line)
                wanted.update(k for k in (obj["refers_to"], obj["digest"]) if k)
    if not wanted:
        return 0, 0
    where: dict[str, tuple[int, int, int]] = {}
    for i in range(len(paths)):
        with open(part_file(part_dir, i, "keys"), encoding="utf-8") as f:
            for line in f:
                key, idx, off, inner = line.rstrip("\n").split("\t")
                if key in wanted and key not in where:
                    where[key] = (int(idx), int(off), int(inner))
    resolved = unresolved = 0
    for rf in rev_files:
        with open(rf, encoding="utf-8") as f:
            for line in f:
                obj = json.loads(line)
                loc = where.get(obj["refers_to"]) or where.get(obj["digest"])
                orig = None
                if loc is not None:
                    orig = _read_at(paths[loc[0]], loc[1], loc[2], max_body_bytes + _HEADER_SLACK)
                op = payload_of(orig, max_body_bytes=max_body_bytes) if orig else None
                if op is None:
                    unresolved += 1
                    p = HttpPayload(status=obj["status"], headers=obj["headers"])
                    p.note = "revisit: the record it refers to is not in these files"
                else:
                    resolved += 1
                    headers = obj["headers"] or op.headers
                    ct = headers.get("content-type") or (
                        [op.content_type] if op.content_type else []
                    )
                    p = HttpPayload(
                        status=obj["status"] if obj["status"] is not None else op.status,
                        headers=headers,
                        body=op.body,
                        stored=op.stored,
                        content_type=ct[0] if ct else None,
                        truncated=obj["truncated"] or op.truncated,
                        note=op.note,
                    )
                emit(obj["url"], obj["date"], p)
    return resolved, unresolved
