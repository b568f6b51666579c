r"""links.tsv: one row per link found in a fetched page.

Format: UTF-8, ``\n``-terminated lines, 7 tab-separated fields. The first line of the file is the
header :data:`HEADER`::

    source	target	fragment	anchor	kind	nofollow	decision

Escaping: so that every row is exactly one line of exactly 7 fields, each field is written with
four characters escaped, backslash first: ``\`` → ``\\``, TAB → ``\t``, LF → ``\n``,
CR → ``\r`` (a backslash followed by the letter). :func:`unescape` reverses it; any other
backslash sequence is left as is. ``nofollow`` is written ``0`` or ``1``.

All rows of one page are appended with one ``os.write`` (see :mod:`skitter.export.base` for the
crash-safety model); :meth:`LinksWriter.repair` cuts a partial last line left by a crash.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from skitter.errors import StateError
from skitter.export.base import LineJournal

__all__ = [
    "HEADER",
    "LinkRow",
    "LinksWriter",
    "escape",
    "format_rows",
    "parse_row",
    "read_rows",
    "unescape",
]

#: The header line of links.tsv (without the trailing newline).
HEADER = "source\ttarget\tfragment\tanchor\tkind\tnofollow\tdecision"
_HEADER_BYTES = HEADER.encode("ascii") + b"\n"
_FIELDS = 7

_ESCAPE_TABLE = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_UNESCAPE_MAP = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
_UNESCAPE_RE = re.compile(r"\\([\\tnr])")
_NEEDS_ESCAPE = re.compile(r"[\\\t\n\r]")


def escape(field: str) -> str:
    r"""Escape ``\``, TAB, LF and CR as ``\\``, ``\t``, ``\n``, ``\r`` (one pass).

    >>> escape("a\tb\\c\n")
    'a\\tb\\\\c\\n'
    """
    if _NEEDS_ESCAPE.search(field) is None:  # the common case: nothing to escape
        return field
    return field.translate(_ESCAPE_TABLE)


def unescape(field: str) -> str:
    r"""Reverse :func:`escape`: ``\\``, ``\t``, ``\n``, ``\r`` become ``\``, TAB, LF, CR.

    Other backslash sequences are kept unchanged. ``unescape(escape(s)) == s`` for every ``s``.
    """
    if "\\" not in field:
        return field
    return _UNESCAPE_RE.sub(lambda m: _UNESCAPE_MAP[m.group(1)], field)


@dataclass(frozen=True, slots=True)
class LinkRow:
    """One links.tsv row.

    Attributes:
        source: URL of the page the link was found in.
        target: the link's absolute URL without fragment ("" if it could not be parsed).
        fragment: the fragment without "#" ("" if none).
        anchor: anchor text (any characters; escaped on write).
        kind: "a", "area", "frame", "iframe", "canonical", "refresh", "redirect".
        nofollow: rel=nofollow or page-level nofollow; written as "1"/"0".
        decision: what the crawler did with it, e.g. "queued", "seen" or a skip reason.
    """

    source: str
    target: str
    fragment: str
    anchor: str
    kind: str
    nofollow: bool
    decision: str

    def to_line(self) -> str:
        """The row as one escaped, tab-separated line including the trailing ``\\n``."""
        return _line(*self.fields())

    def fields(self) -> tuple[str, str, str, str, str, bool, str]:
        """The 7 fields in file order (what :func:`format_rows` takes)."""
        return (
            self.source,
            self.target,
            self.fragment,
            self.anchor,
            self.kind,
            self.nofollow,
            self.decision,
        )


def _line(
    source: str,
    target: str,
    fragment: str,
    anchor: str,
    kind: str,
    nofollow: object,
    decision: str,
) -> str:
    return (
        "\t".join(
            (
                escape(source),
                escape(target),
                escape(fragment),
                escape(anchor),
                escape(kind),
                "1" if nofollow else "0",
                escape(decision),
            )
        )
        + "\n"
    )


def format_rows(rows: Iterable[Sequence[Any]]) -> str:
    """The links.tsv lines of ``rows``, each given as its 7 fields in :class:`LinkRow` order
    (source, target, fragment, anchor, kind, nofollow, decision): the same text as
    ``"".join(LinkRow(*fields).to_line() for fields in rows)``, without building the rows.

    Lines are formatted unescaped, then the whole text is checked once: if it holds no
    backslash, no CR and exactly 6 TABs and 1 LF per row (the common case), no field needed
    escaping; otherwise every line is built again with :func:`escape`.
    """
    rows = rows if isinstance(rows, list | tuple) else list(rows)
    text = "".join(
        [f"{s}\t{t}\t{f}\t{a}\t{k}\t{'1' if n else '0'}\t{d}\n" for s, t, f, a, k, n, d in rows]
    )
    n = len(rows)
    if "\\" in text or "\r" in text or text.count("\n") != n or text.count("\t") != 6 * n:
        text = "".join([_line(*r) for r in rows])
    return text


class LinksWriter(LineJournal):
    """Appends :class:`LinkRow` rows to links.tsv, one ``os.write`` per page.

    Args:
        path: the links.tsv file; created if missing, appended to otherwise. A partial last line
            (crash) is cut first (bytes cut in :attr:`repaired_bytes`); the header is written
            when the file is new or empty.

    Raises:
        StateError: the existing file does not start with :data:`HEADER`.
        OSError: the file cannot be opened, read or repaired.

    Not thread-safe; one writer per file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        try:
            if self._file.offset() == 0:
                self._file.write(_HEADER_BYTES)
            else:
                with open(self.path, "rb") as f:
                    first = f.read(len(_HEADER_BYTES))
                if first != _HEADER_BYTES:
                    raise StateError(f"{self.path}: not a Skitter links.tsv (unexpected header)")
        except BaseException:
            self._file.close()
            raise

    def write_rows(self, rows: Sequence[LinkRow]) -> int:
        """Append all rows of one page with a single ``os.write``.

        Returns:
            Bytes written (0 for no rows; nothing is written then).

        Raises:
            ValueError: the writer is closed.
            OSError: the write failed (the file is left without a partial row).
        """
        if not rows:
            return 0
        return self.write_text(format_rows([row.fields() for row in rows]))

    def write_text(self, text: str) -> int:
        """Append already formatted rows (:func:`format_rows`) with a single ``os.write``.

        Returns:
            Bytes written (0 for ""; nothing is written then).

        Raises:
            ValueError: the writer is closed.
            OSError: the write failed (the file is left without a partial row).
        """
        if not text:
            return 0
        return self._file.write(text.encode("utf-8", "replace"))


def parse_row(line: str) -> LinkRow | None:
    """Parse one links.tsv line (a trailing ``\n`` is allowed) into a :class:`LinkRow`.

    Returns:
        The row with its fields unescaped, or None for the header line or a line that does not
        have exactly 7 fields.
    """
    if line.endswith("\n"):
        line = line[:-1]
    if line == HEADER:
        return None
    parts = line.split("\t")
    if len(parts) != _FIELDS:
        return None
    source, target, fragment, anchor, kind, nofollow, decision = parts
    return LinkRow(
        source=unescape(source),
        target=unescape(target),
        fragment=unescape(fragment),
        anchor=unescape(anchor),
        kind=unescape(kind),
        nofollow=nofollow == "1",
        decision=unescape(decision),
    )


def read_rows(path: str | os.PathLike[str], *, strict: bool = False) -> Iterator[LinkRow]:
    """Yield the rows of a links.tsv (or links.tsv.zst) file (header skipped, fields
    unescaped), in file order.

    A last line without ``\n`` (cut short by a crash) is always skipped. Lines that do not have
    exactly 7 fields are skipped too unless ``strict``. Invalid UTF-8 is replaced with U+FFFD.

    Raises:
        OSError: the file cannot be read.
        ValueError: ``strict`` and a line does not have 7 fields (message has the line number).
    """
    from skitter.export.linkfile import open_links  # links.tsv or links.tsv.zst

    with open_links(path) as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                return
            if lineno == 1 and raw == _HEADER_BYTES:
                continue
            row = parse_row(raw.decode("utf-8", "replace"))
            if row is None:
                if strict:
                    fields = raw.count(b"\t") + 1
                    raise ValueError(
                        f"{os.fspath(path)}:{lineno}: expected {_FIELDS} fields, got {fields}"
                    )
                continue
            yield row
