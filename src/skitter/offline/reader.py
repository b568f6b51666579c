"""A WARC reader that reads past damage: bounded memory, never hangs, says where it skipped.

Reads WARC 1.0 and 1.1 files (ISO 28500; WARC 1.1 §4-§6) stored uncompressed, with one gzip
member per record (WARC 1.1 Annex D.2, "record-at-time compression") or as one gzip stream
for the whole file (as ``gzip file.warc`` makes; refused by some readers). Any mix works:
the decompressed bytes of consecutive members are read as one stream of records.

Damage is reported, never raised, and the reader goes on with the next readable record:

* a WARC header that does not parse (no ``WARC/1.x`` line, a ``Content-Length`` that is not
  a number, a header block over 256 KiB): the rest of its gzip member is skipped, or, in an
  uncompressed stream, everything up to the next line starting ``WARC/1.``;
* corrupt deflate data: the reader looks for the next gzip member header in the file;
* a ``Content-Length`` running past the end of the record's gzip member (or, uncompressed,
  past the end of the file while a later ``WARC/1.`` line follows): reported, and the reader
  goes on with the next member (or that line);
* a file that ends inside a gzip member or inside a record: reported, the file ends there
  (the decompressor is fed the bytes that exist and nothing more, so it cannot wait
  for input that never comes).

Each report is a :class:`Damage` ``(offset, reason)`` with the file offset of the gzip
member (or, uncompressed, of the record) where it was found.

Memory per record: its WARC header and at most ``keep_bytes`` of its block (the rest is
decompressed and dropped, counted in :attr:`Record.dropped`), plus 1 MiB of read buffer.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

__all__ = ["Damage", "Record", "WarcReader"]

_READ_BYTES = 1 << 20
_STEP_BYTES = 1 << 18
_MAX_HEADER_BYTES = 256 * 1024
_GZIP_MAGIC = b"\x1f\x8b\x08"


@dataclass(frozen=True, slots=True)
class Damage:
    """A part of a file that could not be read.

    Attributes:
        offset: file offset (bytes) of the gzip member, or of the record in an uncompressed
            stream, where the damage was found.
        reason: one line saying what is wrong.
    """

    offset: int
    reason: str


@dataclass(slots=True)
class Record:
    """One WARC record.

    Attributes:
        offset: file offset (bytes) of the gzip member holding the record's first byte, or of
            the record itself in an uncompressed stream.
        inner: decompressed bytes from the start of that member to the record (0 for a
            record that starts its member; > 0 inside a whole-file gzip stream).
        version: "WARC/1.0", "WARC/1.1"...
        headers: the WARC named fields, names lower-cased; the first value of a repeated name.
        block: the record's content block, at most ``keep_bytes`` of it.
        content_length: the block's size in bytes as the header says.
        dropped: block bytes read past ``keep_bytes`` and not kept.
        multi: the record shares its gzip member with another record (whole-file gzip).
        header_bytes: bytes of the version line, named fields and the empty line after them.
    """

    offset: int
    inner: int
    version: str
    headers: dict[str, str]
    block: bytes
    content_length: int
    dropped: int = 0
    multi: bool = False
    header_bytes: int = 0

    @property
    def type(self) -> str:
        """``WARC-Type`` lower-cased ("" if absent)."""
        return self.headers.get("warc-type", "").strip().lower()

    @property
    def target_uri(self) -> str:
        """``WARC-Target-URI`` with WARC 1.0's angle brackets (``<http://...>``) removed."""
        uri = self.headers.get("warc-target-uri", "").strip()
        if uri.startswith("<") and uri.endswith(">"):
            uri = uri[1:-1].strip()
        return uri


class _Damaged(Exception):
    def __init__(self, offset: int, reason: str, *, fatal: bool = False) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        self.fatal = fatal


@dataclass(slots=True)
class _Member:
    start_pos: int  # decompressed position where the member's output begins
    offset: int  # file offset of the member
    records: int = 0


@dataclass(slots=True)
class _Source:
    """The decompressed bytes of a file, with the gzip member each byte came from."""

    f: BinaryIO
    gz: bool
    buf: bytearray = field(default_factory=bytearray)
    pos: int = 0  # decompressed position of buf[0]
    cur: int = 0  # read cursor into buf
    raw: bytes = b""
    raw_off: int = 0  # file offset of raw[0]
    dec: zlib._Decompress | None = None
    members: list[_Member] = field(default_factory=list)
    at_eof: bool = False

    @property
    def here(self) -> int:
        return self.pos + self.cur

    def member_at(self, pos: int) -> _Member:
        for m in reversed(self.members):
            if m.start_pos <= pos:
                return m
        return _Member(pos, pos)

    def _compact(self) -> None:
        if self.cur > _READ_BYTES:
            del self.buf[: self.cur]
            self.pos += self.cur
            self.cur = 0
        if len(self.members) > 64:
            del self.members[:-32]

    def _read_raw(self) -> bool:
        data = self.f.read(_READ_BYTES)
        if not data:
            return False
        self.raw = self.raw + data if self.raw else data
        return True

    def more(self) -> bool:
        """Append decompressed bytes to ``buf``; False at the end of the input.

        Raises:
            _Damaged: corrupt or cut gzip data (the source is resynchronised first).
        """
        self._compact()
        if self.at_eof:
            return False
        if not self.gz:
            data = self.f.read(_READ_BYTES)
            if not data:
                self.at_eof = True
                return False
            self.buf += data
            return True
        while True:
            if self.dec is None:
                if not self.raw and not self._read_raw():
                    self.at_eof = True
                    return False
                while len(self.raw) < 3 and self._read_raw():
                    pass
                if not self.raw.startswith(_GZIP_MAGIC):
                    if self.raw.strip(b"\x00") == b"" and not self._read_raw():
                        self.at_eof = True  # zero padding at the end
                        return False
                    off = self.raw_off
                    self._resync(1)
                    raise _Damaged(off, "bytes that are not a gzip member (skipped)")
                self.dec = zlib.decompressobj(31)
                self.members.append(_Member(self.pos + len(self.buf), self.raw_off))
            if not self.raw and not self._read_raw():
                off = self.members[-1].offset
                self.at_eof = True
                self.dec = None
                raise _Damaged(off, "gzip member cut short: the file ends inside it", fatal=True)
            try:
                out = self.dec.decompress(self.raw, _STEP_BYTES)
            except zlib.error as exc:
                off = self.members[-1].offset
                self.dec = None
                self._resync(1)
                raise _Damaged(
                    off, f"corrupt gzip data ({exc}); skipped to the next member"
                ) from None
            if self.dec.eof:
                rest = self.dec.unused_data
                self.dec = None
            else:
                rest = self.dec.unconsumed_tail
            self.raw_off += len(self.raw) - len(rest)
            self.raw = rest
            if out:
                self.buf += out
                return True

    def _resync(self, skip: int) -> None:
        """Drop ``skip`` raw bytes, then up to the next gzip member header in the file."""
        self.raw = self.raw[skip:]
        self.raw_off += skip
        while True:
            i = self.raw.find(_GZIP_MAGIC)
            if i >= 0:
                self.raw_off += i
                self.raw = self.raw[i:]
                return
            keep = self.raw[-2:]
            self.raw_off += len(self.raw) - len(keep)
            self.raw = keep
            if not self._read_raw():
                self.raw_off += len(self.raw)
                self.raw = b""
                return

    def skip_member(self, m: _Member) -> None:
        """After a bad header in member ``m``: drop the rest of that gzip member when the
        record started it, else (uncompressed stream, whole-file gzip) everything up to the
        next line that starts ``WARC/1.``."""
        if self.gz and m.records == 0:
            nxt = next((x for x in self.members if x.start_pos > m.start_pos), None)
            if nxt is not None and nxt.start_pos <= self.pos + len(self.buf):
                self.cur = max(self.cur, nxt.start_pos - self.pos)
                return
            self.pos += len(self.buf)
            del self.buf[:]
            self.cur = 0
            while self.dec is not None and self.members[-1] is m:
                if not self.more():
                    return
                self.pos += len(self.buf)
                del self.buf[:]
            return
        start = self.cur + 1
        while True:
            i = self.buf.find(b"\nWARC/1.", start)
            if i >= 0:
                self.cur = i + 1
                return
            self.cur = max(self.cur, len(self.buf) - 8)  # lets more() drop what was scanned
            if not self.more():
                self.cur = len(self.buf)
                return
            start = self.cur

    def readline(self, limit: int) -> bytes | None:
        """The next line (with its ``\\n``), at most ``limit`` bytes; None at end of input."""
        while True:
            i = self.buf.find(b"\n", self.cur, self.cur + limit)
            if i >= 0:
                line = bytes(self.buf[self.cur : i + 1])
                self.cur = i + 1
                return line
            if len(self.buf) - self.cur >= limit:
                line = bytes(self.buf[self.cur : self.cur + limit])
                self.cur += limit
                return line
            if not self.more():
                if self.cur < len(self.buf):
                    line = bytes(self.buf[self.cur :])
                    self.cur = len(self.buf)
                    return line
                return None

    def next_member_start(self, m: _Member) -> int | None:
        """The decompressed position where the gzip member after ``m`` begins (None while
        none has begun)."""
        return next((x.start_pos for x in self.members if x.start_pos > m.start_pos), None)

    def restart_at(self, offset: int) -> None:
        """Uncompressed file: read on from file offset ``offset`` (the buffer is dropped)."""
        self.f.seek(offset)
        del self.buf[:]
        self.pos, self.cur, self.at_eof = offset, 0, False

    def read(self, n: int, keep: bool, within: _Member | None = None) -> tuple[bytes, int]:
        """Consume ``n`` bytes: (the bytes if ``keep`` else b"", how many were there);
        with ``within``, never past the end of that gzip member."""
        parts: list[bytes] = []
        got = 0
        while got < n:
            if self.cur >= len(self.buf) and not self.more():
                break
            avail = len(self.buf) - self.cur
            if within is not None and (end := self.next_member_start(within)) is not None:
                avail = min(avail, end - self.here)
                if avail <= 0:
                    break
            take = min(n - got, avail)
            if keep:
                parts.append(bytes(self.buf[self.cur : self.cur + take]))
            self.cur += take
            got += take
            self._compact()
        return b"".join(parts), got


def _parse_headers(lines: list[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    last: str | None = None
    for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line[:1] in (" ", "\t") and last is not None:
            headers[last] += " " + line.strip()
            continue
        name, sep, value = line.partition(":")
        if not sep:
            continue
        last = name.strip().lower()
        if last not in headers:
            headers[last] = value.strip()
        else:
            last = None
    return headers


class WarcReader:
    """Iterates the records of one WARC file, reporting damaged parts to ``on_damage``.

    Args:
        f: the file, opened binary, positioned at its start (or at a record's gzip member).
        on_damage: called with a :class:`Damage` for each part skipped.
        keep_bytes: block bytes kept per record (the rest is read and dropped); a callable
            gets the record's lower-cased headers and returns the number for that record.

    Iterating never raises for bad content (only ``OSError`` from reading the file).
    """

    def __init__(
        self,
        f: BinaryIO,
        on_damage: Callable[[Damage], None],
        *,
        keep_bytes: int | Callable[[dict[str, str]], int] = 64 * 1024 * 1024,
    ) -> None:
        head = f.read(3)
        f.seek(-len(head), 1)
        self._src = _Source(f, head.startswith(_GZIP_MAGIC), raw_off=f.tell())
        if not self._src.gz:
            self._src.pos = f.tell()
        self._on_damage = on_damage
        self._keep = keep_bytes

    def skip(self, n: int) -> None:
        """Drop the next ``n`` decompressed bytes (to reach a record inside a member)."""
        if n > 0:
            try:
                self._src.read(n, False)
            except _Damaged as d:
                self._on_damage(Damage(d.offset, d.reason))

    @property
    def compressed(self) -> bool:
        """True for a gzip-compressed file."""
        return self._src.gz

    def __iter__(self) -> Iterator[Record]:
        while True:
            try:
                rec = self._next()
            except _Damaged as d:
                self._on_damage(Damage(d.offset, d.reason))
                if d.fatal:
                    return
                continue
            if rec is None:
                return
            yield rec

    def _next(self) -> Record | None:
        src = self._src
        while True:
            line = src.readline(_MAX_HEADER_BYTES)
            if line is None:
                return None
            if line.strip(b"\r\n\t "):
                break
        start = src.here - len(line)
        member = src.member_at(start)
        offset = member.offset if src.gz else start
        inner = start - member.start_pos if src.gz else 0
        if not line.startswith(b"WARC/"):
            src.cur -= len(line)
            src.skip_member(member)
            raise _Damaged(offset, f"bad WARC header: no version line (got {line[:20]!r})")
        version = line.decode("ascii", "replace").strip()
        lines: list[bytes] = []
        size = len(line)
        while True:
            hl = src.readline(_MAX_HEADER_BYTES)
            if hl is None:
                raise _Damaged(offset, "record cut short inside its WARC header", fatal=True)
            size += len(hl)
            if size > _MAX_HEADER_BYTES:
                src.skip_member(member)
                raise _Damaged(offset, "bad WARC header: longer than 256 KiB")
            if hl in (b"\r\n", b"\n"):
                break
            lines.append(hl)
        headers = _parse_headers(lines)
        cl_text = headers.get("content-length", "")
        if not cl_text.isdigit():
            src.skip_member(member)
            raise _Damaged(offset, f"bad WARC header: Content-Length {cl_text[:40]!r}")
        length = int(cl_text)
        keep = self._keep(headers) if callable(self._keep) else self._keep
        keep = min(max(keep, 0), length)
        # a record that starts its gzip member ends in it: a Content-Length running past
        # the member is wrong, and the next member is read as the next record
        within = member if src.gz and inner == 0 else None
        body_at = src.here
        block, got = src.read(keep, True, within)
        dropped = 0
        if got == keep and length > keep:
            _, dropped = src.read(length - keep, False, within)
            got += dropped
        if got < length:
            cut = f"record cut short: block has {got} of {length} bytes"
            if within is not None and src.next_member_start(within) == src.here:
                raise _Damaged(offset, f"{cut} (its gzip member ends there)")
            if not src.gz and src.f.seekable():  # read on from the next WARC/1. line
                src.restart_at(body_at)
                src.skip_member(member)
                if src.here < body_at + got:
                    raise _Damaged(offset, f"{cut} (read on from the next record)")
            raise _Damaged(offset, cut, fatal=True)
        member.records += 1
        return Record(
            offset=offset,
            inner=inner,
            version=version,
            headers=headers,
            block=block,
            content_length=length,
            dropped=dropped,
            multi=member.records > 1 or inner > 0,
            header_bytes=size,
        )
