"""Crash-safe output writers: WARC 1.1 files, pages.jsonl and links.tsv.

Each writer appends one unit per ``os.write`` to an ``O_APPEND`` file, exposes ``offset()``
(bytes written, for checkpoints), ``sync()`` (fsync) and ``close()``, and a ``repair()``
classmethod that cuts a partial tail left by a crash (see :mod:`skitter.export.base`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skitter.export.base import AppendFile, Writer
from skitter.export.links import LinkRow, LinksWriter, escape, parse_row, read_rows, unescape
from skitter.export.pages import PageRecord, PagesWriter, iso_utc, read_records

if TYPE_CHECKING:
    from skitter.export.warc import WarcWriter, WarcWritten

__all__ = [
    "AppendFile",
    "LinkRow",
    "LinksWriter",
    "PageRecord",
    "PagesWriter",
    "WarcWriter",
    "WarcWritten",
    "Writer",
    "escape",
    "iso_utc",
    "parse_row",
    "read_records",
    "read_rows",
    "unescape",
]


def __getattr__(name: str) -> Any:
    """The WARC writer's names, imported on first use (PEP 562): a process that writes no WARC
    (the coordinator of ``--processes``) does not load FastWARC and ISA-L."""
    if name in ("WarcWriter", "WarcWritten"):
        from skitter.export import warc

        return getattr(warc, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
