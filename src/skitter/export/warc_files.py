"""The WARC files of a crawl on disk: their names, the order of their serials, crash repair.

Files are named ``{prefix}-{YYYYMMDDhhmmss}-{serial:05d}.warc.gz`` (UTC time of creation,
serial counting on from the highest one already in the directory; WARC 1.1 Annex B) and are
sequences of gzip members, one per record (WARC 1.1 Annex A). A crash can leave only the newest
file partial (files are never reopened; rotation happens between writes):
:func:`repair_newest` cuts it back to its last complete exchange. The writer is
:class:`skitter.export.warc.WarcWriter`.
"""

from __future__ import annotations

import os
import re
import zlib

__all__ = ["file_name", "list_files", "repair_newest"]

_SCAN_CHUNK_BYTES = 1 << 20
_HEAD_KEEP_BYTES = 1024
_WARC_TYPE_RE = re.compile(rb"\r\nWARC-Type:[ \t]*([A-Za-z]+)", re.IGNORECASE)


def file_name(prefix: str, stamp: str, serial: int) -> str:
    """``{prefix}-{stamp}-{serial:05d}.warc.gz`` (``stamp``: UTC ``YYYYMMDDhhmmss``)."""
    return f"{prefix}-{stamp}-{serial:05d}.warc.gz"


def repair_newest(directory: str | os.PathLike[str], prefix: str) -> list[tuple[str, int]]:
    """Make the newest ``{prefix}-*.warc.gz`` file in ``directory`` valid after a crash.

    Scans its gzip members (``zlib`` with ``wbits=31``, following ``unused_data``) and
    truncates it at the end of the last complete member whose content starts like a WARC
    record; if that last record is a ``request`` (its ``response`` was lost), it is cut too.
    A file left without any complete record is deleted.

    Returns:
        ``[(path, bytes_cut)]`` for the file changed, or ``[]`` if nothing was cut.

    Raises:
        OSError: the directory or file cannot be read, truncated or removed.
    """
    files = list_files(os.fspath(directory), prefix)
    if not files:
        return []
    path = files[-1][1]
    size = os.path.getsize(path)
    keep = _complete_length(path)
    if keep == size:
        return []
    if keep == 0:
        os.remove(path)
    else:
        os.truncate(path, keep)
    return [(path, size - keep)]


def list_files(directory: str, prefix: str) -> list[tuple[int, str]]:
    """``(serial, path)`` of this prefix's WARC files in ``directory``, by serial then name."""
    pattern = re.compile(rf"^{re.escape(prefix)}-\d{{14}}-(\d{{5,}})\.warc\.gz$")
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        m = pattern.match(name)
        if m:
            found.append((int(m.group(1)), name))
    found.sort()
    return [(serial, os.path.join(directory, name)) for serial, name in found]


def _complete_length(path: str) -> int:
    """Bytes of ``path`` made of complete WARC gzip members, minus a trailing lone request."""
    good_end = 0  # end of the last complete member
    before_last = 0  # end of the member before it
    last_is_request = False
    read_pos = 0
    with open(path, "rb") as f:
        d = zlib.decompressobj(wbits=31)
        head = b""
        pending = b""
        while True:
            if not pending:
                pending = f.read(_SCAN_CHUNK_BYTES)
                if not pending:
                    break
                read_pos += len(pending)
            try:
                out = d.decompress(pending)
            except zlib.error:
                break
            if len(head) < _HEAD_KEEP_BYTES:
                head += out[: _HEAD_KEEP_BYTES - len(head)]
            if not d.eof:
                pending = b""
                continue
            if not head.startswith(b"WARC/"):
                break
            m = _WARC_TYPE_RE.search(head)
            before_last, good_end = good_end, read_pos - len(d.unused_data)
            last_is_request = m is not None and m.group(1).lower() == b"request"
            pending = d.unused_data
            d = zlib.decompressobj(wbits=31)
            head = b""
    return before_last if last_is_request else good_end
