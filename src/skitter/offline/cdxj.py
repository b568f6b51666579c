"""CDXJ indexes of WARC files, the lines pywb and cdxj-indexer write.

One line per ``response``, ``revisit`` and ``resource`` record (not ``resource`` records of
``application/warc-fields``), sorted (plain string order, as ``cdxj-indexer --sort``)::

    com,example)/a 20240501120000 {"url": "http://example.com/a", "mime": "text/html",
    "status": "200", "digest": "sha1:...", "length": "1043", "offset": "0", "filename": "x.warc.gz"}

(one line in the file).

* key: the SURT form of the URL (:func:`surt.surt`, the Internet Archive's "Sort-friendly URI
  Reordering Transform", the key pywb looks up), then the 14-digit UTC timestamp of
  ``WARC-Date``;
* JSON (keys in this order, absent ones left out, values strings): ``url`` (the
  ``WARC-Target-URI``), ``mime`` (``warc/revisit`` for a revisit, else the HTTP or WARC
  ``Content-Type`` up to ``;`` or a space), ``status`` (HTTP status of a response or revisit
  that has an HTTP header block), ``digest`` (``WARC-Payload-Digest``, else the
  ``sha1:`` base32 digest of the stored payload), ``length`` (bytes from the record's gzip
  member to the next one's; uncompressed, the record's header and block without the blank
  lines after it, as warcio counts), ``offset`` (its file offset), ``filename`` (the WARC's
  base name).

``X.warc.gz`` (or ``X.warc``) gets ``X.cdxj`` beside it, written atomically. A file compressed as
one gzip stream has no per-record offsets and is refused.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import heapq
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from skitter.errors import ConfigError
from skitter.export.warc import RecordWritten
from skitter.offline.reader import Damage, Record, WarcReader
from skitter.offline.surt_key import surt_key

__all__ = [
    "CrawlIndexer",
    "IndexResult",
    "cdxj_path_for",
    "index_lines",
    "index_missing",
    "index_quietly",
    "write_index",
]

log = logging.getLogger("skitter")

_INDEXED = frozenset({"response", "revisit", "resource"})
_MIME_SPLIT = re.compile(r"[;\s]")
#: a ``WARC-Date`` as the writer writes it (UTC, ``Z``): its 14 digits are the time stamp
_UTC_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z", re.ASCII)
_LINE_KEYS = ("url", "mime", "status", "digest")
_json_str: Callable[[str], str] = json.encoder.encode_basestring_ascii
_STATUS = re.compile(rb"\AHTTP/\d(?:\.\d)?[ \t]+(\d{3})")
#: block bytes kept per record: the HTTP header block (a missing digest: the whole payload)
_HEAD_BYTES = 64 * 1024
_DIGEST_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class IndexResult:
    """One indexed file: its CDXJ path, line count and damaged parts skipped."""

    path: str
    lines: int = 0
    skipped: list[Damage] = field(default_factory=list)


def cdxj_path_for(warc_path: str) -> str:
    """``X.warc.gz`` / ``X.warc`` / ``X.gz`` → ``X.cdxj`` (same folder)."""
    base = warc_path
    for ext in (".gz", ".warc"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base + ".cdxj"


def _timestamp(date: str) -> str:
    if _UTC_DATE.fullmatch(date):  # (what the writer writes; the same digits as below)
        return date[0:4] + date[5:7] + date[8:10] + date[11:13] + date[14:16] + date[17:19]
    try:
        dt = datetime.fromisoformat(date.strip())
        if dt.tzinfo is not None:
            dt = dt.astimezone(UTC)
        return dt.strftime("%Y%m%d%H%M%S")
    except ValueError:
        return "".join(c for c in date if c.isdigit())[:14]


def _url_key(url: str) -> str:
    return surt_key(url)  # surt.surt(url), or url where surt raises (as cdxj-indexer keys it)


def _http_head(block: bytes) -> tuple[str | None, dict[str, str], int] | None:
    """(status, headers lower-cased, payload start) of an HTTP response block, or None. The
    head ends at its first empty line, CRLF or bare LF (as warcio reads it)."""
    m = _STATUS.match(block)
    if m is None:
        return None
    end = block.find(b"\r\n\r\n")
    sep = 4
    lf = block.find(b"\n\n", 0, end if end >= 0 else len(block))
    if lf >= 0:
        end, sep = lf, 2
    head = block if end < 0 else block[:end]
    headers: dict[str, str] = {}
    for raw in head.decode("latin-1").split("\n")[1:]:  # (latin-1: byte for character)
        name, colon, value = raw.rstrip("\r").partition(":")
        if colon:
            headers.setdefault(name.strip().lower(), value.strip())
    return m.group(1).decode(), headers, (len(block) if end < 0 else end + sep)


def _keep(headers: dict[str, str]) -> int:
    if headers.get("warc-type", "").lower() not in _INDEXED:
        return 0
    return _HEAD_BYTES if headers.get("warc-payload-digest") else _DIGEST_BYTES


def _fields(rec: Record, filename: str) -> tuple[str, dict[str, Any]] | None:
    return _entry_fields(
        rec.type,
        rec.headers.get("content-type"),
        rec.target_uri,
        rec.block,
        rec.headers.get("warc-payload-digest"),
        rec.dropped,
        _timestamp(rec.headers.get("warc-date", "")),
        rec.offset,
        filename,
    )


def _entry_fields(
    rtype: str | None,
    wct: str | None,
    url: str,
    block: bytes,
    digest: str | None,
    dropped: int,
    timestamp: str,
    offset: int,
    filename: str,
) -> tuple[str, dict[str, Any]] | None:
    """(key, index fields) of one record, or None if it is not indexed: the record's type,
    WARC ``Content-Type``, target URI, block (as kept: :func:`_keep`), payload digest
    header, bytes cut off the block, 14-digit time stamp, offset and file name."""
    if rtype not in _INDEXED:
        return None
    if rtype == "resource" and wct == "application/warc-fields":
        return None
    status: str | None = None
    mime: str | None = None
    start = 0
    http = _http_head(block) if rtype != "resource" else None
    if http is not None:
        status, headers, start = http
        mime = headers.get("content-type")
    elif rtype == "resource":
        mime = wct
    if rtype == "revisit":
        mime = "warc/revisit"
    elif mime:
        mime = _MIME_SPLIT.split(mime, 1)[0].strip()
    if not digest and not dropped:
        payload = memoryview(block)[start:]
        digest = "sha1:" + base64.b32encode(hashlib.sha1(payload).digest()).decode()
    index: dict[str, Any] = {"url": url}
    if mime is not None:
        index["mime"] = mime
    if status is not None:
        index["status"] = status
    if digest:
        index["digest"] = digest
    key = f"{_url_key(url)} {timestamp}"
    index["offset"] = str(offset)
    index["filename"] = filename
    return key, index


def _line(key: str, index: dict[str, Any], length: int) -> str:
    """One CDXJ line (ending ``\\n``): JSON keys in cdxj-indexer's order."""
    # = json.dumps of the ordered dict (string values), without building it
    fields = [f'"{k}": {_json_str(index[k])}' for k in _LINE_KEYS if k in index]
    fields.append(f'"length": "{length}"')
    fields.append(f'"offset": {_json_str(index["offset"])}')
    fields.append(f'"filename": {_json_str(index["filename"])}')
    return f"{key} {{{', '.join(fields)}}}\n"


def index_lines(path: str, on_damage: Callable[[Damage], None]) -> list[str]:
    """The sorted CDXJ lines (each ending ``\\n``) of one WARC file.

    Raises:
        ConfigError: the file is one gzip stream holding several records (no offsets).
        OSError: the file cannot be read.
    """
    filename = os.path.basename(path)
    entries: list[tuple[int, str, dict[str, Any]] | tuple[int, None, None]] = []
    plain_lengths: dict[int, int] = {}

    def damage(d: Damage) -> None:
        entries.append((d.offset, None, None))  # a record's length stops at the damage
        on_damage(d)

    with open(path, "rb") as f:
        reader = WarcReader(f, damage, keep_bytes=_keep)
        for rec in reader:
            if rec.multi and reader.compressed:
                raise ConfigError(
                    f"{path}: one gzip stream for many records (whole-file gzip): records "
                    "cannot be addressed; recompress it one gzip member per record"
                )
            if not reader.compressed:
                plain_lengths[rec.offset] = rec.header_bytes + rec.content_length
            got = _fields(rec, filename)
            if got is None:
                entries.append((rec.offset, None, None))
            else:
                entries.append((rec.offset, got[0], got[1]))
        end = f.seek(0, os.SEEK_END)
    lines: list[str] = []
    for i, (offset, key, index) in enumerate(entries):
        if key is None or index is None:
            continue
        nxt = entries[i + 1][0] if i + 1 < len(entries) else end
        lines.append(_line(key, index, plain_lengths.get(offset, nxt - offset)))
    lines.sort()
    return lines


def write_index(
    warc_path: str,
    cdxj_path: str | None = None,
    on_damage: Callable[[Damage], None] | None = None,
) -> IndexResult:
    """Index ``warc_path`` into ``cdxj_path`` (default :func:`cdxj_path_for`), atomically
    (temp file, fsync, rename).

    Raises:
        ConfigError: whole-file gzip (see :func:`index_lines`).
        OSError: reading or writing failed.
    """
    out = cdxj_path or cdxj_path_for(warc_path)
    result = IndexResult(out)

    def damage(d: Damage) -> None:
        result.skipped.append(d)
        if on_damage is not None:
            on_damage(d)

    lines = index_lines(warc_path, damage)
    _write_lines(out, lines)
    result.lines = len(lines)
    return result


def _write_lines(out: str, lines: Iterable[str]) -> None:
    """Write ``lines`` to ``out`` atomically (temp file, fsync, rename).

    Raises:
        OSError: writing failed (no temporary file is left).
    """
    tmp = out + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(lines)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except OSError:
        with contextlib.suppress(OSError):  # never leave a stray temporary file (disk full)
            os.unlink(tmp)
        raise


#: Index lines of a WARC file kept in memory; past this many they are sorted and written to
#: the file's spool as one run (:class:`_Spool`), about 1.5 MB at rust-doc's ~380 bytes a line.
SPOOL_RUN_LINES = 4096


class _Spool:
    """The index lines of one WARC file being written, in bounded memory: up to ``run_lines``
    in a list, the rest in sorted runs in an unnamed temporary file beside the WARC file
    (``O_TMPFILE``: never seen in the folder, gone when closed or the process is killed; the
    index of a killed crawl's file is read back from the file on resume,
    :func:`index_missing`). :meth:`sorted_lines` merges the runs (``heapq.merge``): the same
    lines in the same order as ``sorted()`` of them all. Measured on rust-doc (21,663
    pages, one WARC file): the lines held in memory were 7.4 MB of the busy crawler's heap.
    """

    def __init__(self, warc_path: str, run_lines: int) -> None:
        self._dir = os.path.dirname(warc_path) or "."
        self._run_lines = run_lines
        self._buf: list[str] = []
        self._runs: list[tuple[int, int]] = []  # (offset, bytes) in the spool file
        self._file: Any = None

    def add(self, line: str) -> None:
        self._buf.append(line)
        if len(self._buf) >= self._run_lines:
            if self._file is None:
                self._file = tempfile.TemporaryFile(dir=self._dir)  # noqa: SIM115 (see close)
            data = "".join(sorted(self._buf)).encode("utf-8", "surrogatepass")
            start = self._file.seek(0, os.SEEK_END)
            self._file.write(data)
            self._runs.append((start, len(data)))
            self._buf = []

    def sorted_lines(self) -> Iterator[str]:
        """Every line added, sorted."""
        if self._file is None:
            yield from sorted(self._buf)
            return
        self._file.flush()
        runs = [self._run(start, size) for start, size in self._runs]
        yield from heapq.merge(*runs, iter(sorted(self._buf)))

    def _run(self, start: int, size: int) -> Iterator[str]:
        fd = self._file.fileno()
        pos, end, rest = start, start + size, b""
        while pos < end:
            chunk = os.pread(fd, min(64 * 1024, end - pos), pos)
            if not chunk:
                raise OSError(f"CDXJ spool of {self._dir} truncated")
            pos += len(chunk)
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                yield line.decode("utf-8", "surrogatepass") + "\n"

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._buf = []


class CrawlIndexer:
    """The crawl's WARC writer hooks: ``on_record`` indexes each response or revisit as it
    is written (the same line :func:`index_lines` would read back from the file, at a tenth
    of the CPU: the file is not read again), ``on_file_done`` writes a file's index when the
    file is complete. A file whose records did not all go through ``on_record`` (a record
    that could not be indexed) is indexed by reading it back: in a background thread for a
    rotated file (the crawl goes on), at once for the last one, after the pending ones (so a
    finished crawl has every index). The lines wait in a :class:`_Spool` (bounded memory).

    Args:
        run_lines: lines held in memory per file before a sorted run goes to disk.
    """

    def __init__(self, run_lines: int = SPOOL_RUN_LINES) -> None:
        self._run_lines = run_lines
        self._threads: list[threading.Thread] = []
        self._lines: dict[str, _Spool] = {}
        self._unindexed: set[str] = set()  # files with a record not noted: read them back

    def on_record(self, warc_path: str, rec: RecordWritten) -> None:
        """Index one record just written (see :class:`skitter.export.warc.RecordWritten`)."""
        if warc_path in self._unindexed:
            return
        try:
            got = _entry_fields(
                rec.record_type,
                None,
                rec.target_uri,
                rec.block,  # (the HTTP head only, when it has a payload digest)
                rec.payload_digest,
                0,
                _timestamp(rec.date),
                rec.offset,
                os.path.basename(warc_path),
            )
        except Exception as exc:  # never fail a crawl over its index: read the file later
            log.debug("CDXJ: %s read back at its end: %s", warc_path, exc)
            self._unindexed.add(warc_path)
            spool = self._lines.pop(warc_path, None)
            if spool is not None:
                spool.close()
            return
        if got is not None:
            spool = self._lines.get(warc_path)
            if spool is None:
                spool = self._lines[warc_path] = _Spool(warc_path, self._run_lines)
            try:
                spool.add(_line(got[0], got[1], rec.length))
            except OSError as exc:  # (no room for the spool) read the file back at its end
                log.debug("CDXJ: %s read back at its end: %s", warc_path, exc)
                self._unindexed.add(warc_path)
                self._lines.pop(warc_path).close()

    def __call__(self, warc_path: str, final: bool) -> None:
        """The ``on_file_done`` hook: write ``warc_path``'s index (see the class)."""
        self._threads = [t for t in self._threads if t.is_alive()]
        spool = self._lines.pop(warc_path, None)
        if warc_path not in self._unindexed:
            try:
                _write_lines(cdxj_path_for(warc_path), spool.sorted_lines() if spool else [])
            except OSError as exc:
                log.warning("CDXJ index of %s not written: %s", warc_path, exc)
            finally:
                if spool is not None:
                    spool.close()
            return
        self._unindexed.discard(warc_path)
        if not final:
            t = threading.Thread(target=index_quietly, args=(warc_path,), name="cdxj")
            t.start()
            self._threads.append(t)
            return
        for t in self._threads:
            t.join()
        self._threads = []
        index_quietly(warc_path)


def index_quietly(warc_path: str) -> None:
    """:func:`write_index` for the crawl's WARC writer (``on_file_done``): a failure is logged
    as a warning, never raised (the index can be made later with ``skitter index``)."""
    try:
        write_index(warc_path)
    except (OSError, ConfigError) as exc:
        log.warning("CDXJ index of %s not written: %s", warc_path, exc)


def index_missing(directory: str, prefix: str) -> list[str]:
    """Index every ``{prefix}-*.warc.gz`` in ``directory`` whose ``.cdxj`` is missing or older
    than the WARC (a crawl killed before it closed the file); call after
    :meth:`skitter.export.warc.WarcWriter.repair` on resume.

    Returns:
        The CDXJ paths written. Failures are logged, not raised.
    """
    pattern = re.compile(rf"^{re.escape(prefix)}-\d{{14}}-\d{{5,}}\.warc\.gz$")
    written = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    for name in names:
        if not pattern.match(name):
            continue
        path = os.path.join(directory, name)
        out = cdxj_path_for(path)
        try:
            if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(path):
                continue
        except OSError:
            continue
        index_quietly(path)
        written.append(out)
    return written
