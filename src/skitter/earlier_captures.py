"""Captures made before a resume, found again in the crawl's own WARC files, so that a page
whose body duplicates one of them is still written as a ``revisit`` record (WARC 1.1 §6.7.2,
profile identical-payload-digest) that points at it.

The in-memory capture map of :class:`skitter.duplicates.DuplicateStage` holds this session's
captures; the earlier ones are read back lazily, the first time a duplicate of an earlier page
is met: the CDXJ index beside each WARC file of this process's series (completed on resume,
:func:`skitter.offline.cdxj.index_missing`) gives the URL, payload digest, file and offset of
every response record; the original's exact ``WARC-Date`` is then read from the record's
header in its WARC file. Nothing is written: the WARC files and their indexes are the state,
so this holds after any crash, and with ``--processes`` (each process reads its own series).
A capture that cannot be found or read gives no revisit (a full response record instead),
never a revisit pointing at nothing.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import zlib

__all__ = ["EarlierCaptures"]

log = logging.getLogger("skitter")

#: bytes of a WARC record's start read at most to find its header
_MAX_HEADER_BYTES = 64 * 1024


class EarlierCaptures:
    """The response records of the WARC files ``{prefix}-*.warc.gz`` in ``directory`` that
    exist when this object is made (the earlier sessions' files; see the module doc).

    Args:
        directory: the WARC folder. prefix: this process's WARC series (``skitter``,
            ``skitter-pK``, ``skitter-wID``).
    """

    def __init__(self, directory: str, prefix: str) -> None:
        pattern = re.compile(rf"^{re.escape(prefix)}-\d{{14}}-\d{{5,}}\.cdxj$")
        try:
            names = sorted(n for n in os.listdir(directory) if pattern.match(n))
        except OSError:
            names = []
        self.directory = directory
        self._indexes = [os.path.join(directory, n) for n in names]
        #: URL -> [(payload digest "sha1:BASE32", WARC file name, offset)], once loaded
        self._by_url: dict[str, list[tuple[str, str, int]]] | None = None

    def __bool__(self) -> bool:
        return bool(self._indexes)

    def _load(self) -> dict[str, list[tuple[str, str, int]]]:
        by_url: dict[str, list[tuple[str, str, int]]] = {}
        for path in self._indexes:
            try:
                with open(path, encoding="utf-8") as fh:
                    for line in fh:
                        _, _, rest = line.partition(" {")
                        try:
                            f = json.loads("{" + rest)
                        except ValueError:
                            continue
                        if f.get("mime") == "warc/revisit" or not str(
                            f.get("status", "")
                        ).startswith("2"):
                            continue
                        url, digest = f.get("url"), f.get("digest")
                        if isinstance(url, str) and isinstance(digest, str):
                            entry = (digest, str(f.get("filename", "")), int(f.get("offset", -1)))
                            by_url.setdefault(url, []).append(entry)
            except (OSError, ValueError) as exc:
                log.warning("cannot read %s: %s (no revisits of its captures)", path, exc)
        return by_url

    def date_of(self, url: str, payload_sha1: bytes) -> str | None:
        """The ``WARC-Date`` of an earlier response record of ``url`` whose payload has the
        SHA-1 ``payload_sha1`` (raw 20 bytes), or None (none, or unreadable). Never raises."""
        if self._by_url is None:
            self._by_url = self._load()
        want = "sha1:" + base64.b32encode(payload_sha1).decode()
        for digest, name, offset in self._by_url.get(url, ()):
            if digest != want or offset < 0 or os.sep in name:
                continue
            date = _record_date(os.path.join(self.directory, name), offset, url)
            if date is not None:
                return date
        return None


def _record_date(path: str, offset: int, url: str) -> str | None:
    """``WARC-Date`` of the response record of ``url`` at ``offset`` of the gzip WARC
    ``path`` (one gzip member per record), or None."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            z = zlib.decompressobj(31)
            head = b""
            while b"\r\n\r\n" not in head and len(head) < _MAX_HEADER_BYTES:
                chunk = fh.read(4096)
                if not chunk:
                    break
                head += z.decompress(chunk, _MAX_HEADER_BYTES)
                if z.eof:
                    break
    except (OSError, zlib.error):
        return None
    fields: dict[str, str] = {}
    for raw in head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, sep, value = raw.decode("utf-8", "replace").partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    if fields.get("warc-type") != "response" or fields.get("warc-target-uri") != url:
        return None
    return fields.get("warc-date")
