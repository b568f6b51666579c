r"""links.tsv or links.tsv.zst: which file a folder holds, the one reader, the zstd writer.

``--links-compress zstd`` writes ``links.tsv.zst`` instead of ``links.tsv``: the same bytes
(header line first, then the rows, see :mod:`skitter.export.links`) as a sequence of
independent Zstandard frames (RFC 8878 §3.1.1), one per checkpoint:

* a frame is opened by the first page written after a checkpoint; each page's rows are
  compressed and flushed as complete blocks (``ZSTD_e_flush``) and handed to the kernel in one
  ``os.write``, exactly like a plain links.tsv page (see :mod:`skitter.export.base`);
* a checkpoint (:meth:`ZstdLinksWriter.offset`, called just before the frontier commit) ends
  the frame (its last block), so every checkpoint offset is a frame boundary and the merged
  file of ``--processes`` is the shards' frames copied byte for byte; a page whose write
  failed (disk full) is not on disk but was seen by the compressor, so that frame is ended by
  an empty last block instead (streamed frames carry no content checksum for that reason);
* the header line is a frame of its own (always the same bytes), so a merge can skip it;
* after a ``kill -9`` the last frame is torn (no end mark, maybe a partial block):
  :meth:`ZstdLinksWriter.repair` cuts it off and writes its decodable complete lines again as
  one complete frame, so no row of a page whose record was written is lost; the resume then
  cuts the rows of a page without a record (:func:`cut_tail`) as it does for links.tsv. Both
  record the cut and the frame written back in ``links.tsv.zst.tail`` first, so a kill in
  the middle of them is finished by the next repair.

Why not buffer a checkpoint's rows in memory and write one frame: the frontier may commit a
page's ack before the next checkpoint (SQLite batch commits, Redis at once), and its rows
must be in the file by then, as with links.tsv.

:func:`open_links` is the one reader every command uses: a binary (or text) file object over
the decompressed lines of either file; a torn last frame just ends the stream.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

import zstandard

from skitter.export.base import LineJournal, fsync_dir

__all__ = [
    "COMPRESSIONS",
    "LINKS_ZST_FILE",
    "ZstdFramer",
    "ZstdLinksWriter",
    "complete_end",
    "compress_links",
    "cut_tail",
    "frame_ends",
    "header_frame",
    "is_zstd",
    "iter_lines",
    "lines_since",
    "links_file",
    "links_name",
    "links_writer",
    "open_links",
    "repair_links",
]

#: Values of ``--links-compress``.
COMPRESSIONS = ("none", "zstd")
#: The compressed links file of a folder.
LINKS_ZST_FILE = "links.tsv.zst"
_PLAIN = "links.tsv"
_HEADER_BYTES = b"source\ttarget\tfragment\tanchor\tkind\tnofollow\tdecision\n"
_MAGIC = b"\x28\xb5\x2f\xfd"
_LEVEL = 3
_READ_BYTES = 1 << 20
_EMPTY_LAST_BLOCK = b"\x01\x00\x00"


def links_name(compress: str) -> str:
    """The links file name a crawl with ``--links-compress compress`` writes."""
    return LINKS_ZST_FILE if compress == "zstd" else _PLAIN


def links_file(out_dir: str | os.PathLike[str]) -> Path:
    """The links file of a folder: ``links.tsv.zst`` if it exists, else ``links.tsv`` (which
    may not exist: callers report it missing by that name)."""
    zst = Path(out_dir) / LINKS_ZST_FILE
    return zst if zst.exists() else Path(out_dir) / _PLAIN


def is_zstd(path: str | os.PathLike[str]) -> bool:
    """True for a ``.zst`` links file (by name)."""
    return os.fspath(path).endswith(".zst")


class _ZstdRaw(io.RawIOBase):
    """Raw reader of the decompressed bytes of concatenated zstd frames; a torn or damaged
    last frame ends the stream (what it decoded before is returned)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self._dctx = zstandard.ZstdDecompressor()
        self._dobj: Any = None
        self._pending = b""
        self._out = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        while not self._out and not self._done:
            if not self._pending:
                self._pending = self._f.read(_READ_BYTES)
                if not self._pending:
                    self._done = True  # end of file (a torn frame just ends here)
                    return
            if self._dobj is None:
                self._dobj = self._dctx.decompressobj()
            data, self._pending = self._pending, b""
            try:
                self._out = self._dobj.decompress(data)
            except zstandard.ZstdError:
                self._done = True
                return
            if self._dobj.eof:
                self._pending = self._dobj.unused_data
                self._dobj = None

    def readinto(self, buffer: Any) -> int:
        self._fill()
        n = min(len(buffer), len(self._out))
        buffer[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def close(self) -> None:
        self._f.close()
        super().close()


def open_links(path: str | os.PathLike[str], mode: str = "rb") -> IO[Any]:
    """Open a links file for reading: ``links.tsv`` as is, ``links.tsv.zst`` decompressed.

    Args:
        path: a links.tsv or links.tsv.zst file (a folder: its :func:`links_file`).
        mode: ``"rb"`` (bytes; iterate lines) or ``"rt"`` (UTF-8 text, bad bytes replaced).

    Raises:
        OSError: the file cannot be opened (FileNotFoundError when missing).
    """
    p = Path(path)
    if p.is_dir():
        p = links_file(p)
    if not is_zstd(p):
        if mode == "rt":
            return open(p, encoding="utf-8", errors="replace", newline="\n")
        return open(p, "rb")
    raw = _ZstdRaw(open(p, "rb"))  # noqa: SIM115 (closed with the reader returned)
    buffered = io.BufferedReader(raw, buffer_size=_READ_BYTES)
    if mode == "rt":
        return io.TextIOWrapper(buffered, encoding="utf-8", errors="replace", newline="\n")
    return buffered


def _frames(path: str | os.PathLike[str], start: int = 0) -> Iterator[tuple[int, int, bytes]]:
    """``(start, end, content)`` of each complete frame of ``path`` from ``start`` (a frame
    boundary) on, each one decoded and its checksum verified; stops at the first frame that
    is cut short or damaged (a crash mid-write)."""
    dctx = zstandard.ZstdDecompressor()
    with open(path, "rb") as f:
        f.seek(start)
        pos = start  # start of the current frame
        dobj: Any = None
        fed = 0
        out: list[bytes] = []
        while chunk := f.read(_READ_BYTES):
            while chunk:
                if dobj is None:
                    dobj, fed, out = dctx.decompressobj(), 0, []
                try:
                    out.append(dobj.decompress(chunk))
                except zstandard.ZstdError:
                    return
                if not dobj.eof:
                    fed += len(chunk)
                    break
                rest = dobj.unused_data
                end = pos + fed + len(chunk) - len(rest)
                yield pos, end, b"".join(out)
                pos, dobj, chunk = end, None, rest


def frame_ends(path: str | os.PathLike[str], start: int = 0) -> tuple[list[int], int]:
    """The end offset of every complete, valid frame of ``path`` from ``start`` (a frame
    boundary) on, and the file size (a torn last frame is not listed).

    Raises:
        OSError: the file cannot be read.
    """
    size = os.path.getsize(path)
    return [end for _, end, _ in _frames(path, start)], size


def iter_lines(
    path: str | os.PathLike[str], start: int = 0, end: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """The complete lines (ending in ``\n``) of a links file from byte ``start`` on, each
    with the offset of its unit: the line's own offset in links.tsv, the start of its frame in
    links.tsv.zst (``start`` must then be a frame boundary: a checkpoint offset; only
    complete frames are read). With ``end`` (a line end or frame end: :func:`complete_end`),
    nothing past it.

    Raises:
        OSError: the file cannot be read.
    """
    if not is_zstd(path):
        with open(path, "rb") as fh:
            fh.seek(start)
            pos = start
            for line in fh:
                if not line.endswith(b"\n") or (end is not None and pos + len(line) > end):
                    return
                yield pos, line
                pos += len(line)
        return
    for first, stop, text in _frames(path, start):
        if end is not None and stop > end:
            return
        for line in io.BytesIO(text):
            if line.endswith(b"\n"):
                yield first, line


def complete_end(path: str | os.PathLike[str]) -> int:
    """Bytes of a links file a reader may use (0 if missing): up to its last newline
    (links.tsv) or the end of its last complete frame (links.tsv.zst).

    Raises:
        OSError: the file exists but cannot be read.
    """
    if not os.path.exists(path):
        return 0
    if is_zstd(path):
        ends, _ = frame_ends(path)
        return ends[-1] if ends else 0
    end = 0
    for unit, line in iter_lines(path):
        end = unit + len(line)
    return end


def _decode_torn(data: bytes) -> bytes:
    """What a torn frame decodes to: its blocks (RFC 8878 §3.1.1.2) fed one at a time, up to
    the first one that is cut short or does not decode."""
    if len(data) < 6 or data[:4] != _MAGIC:
        return b""
    fhd = data[4]
    single = (fhd >> 5) & 1
    fcs = (fhd >> 6) & 3
    fcs_size = (1 if single else 0) if fcs == 0 else (2, 4, 8)[fcs - 1]
    p = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3] + fcs_size
    dobj = zstandard.ZstdDecompressor().decompressobj()
    out: list[bytes] = []
    last = 0
    while p + 3 <= len(data):
        h = int.from_bytes(data[p : p + 3], "little")
        btype = (h >> 1) & 3
        nxt = p + 3 + (1 if btype == 1 else h >> 3)
        if btype == 3 or nxt > len(data):
            break
        try:
            out.append(dobj.decompress(data[last:nxt]))
        except zstandard.ZstdError:
            break
        last = p = nxt
        if h & 1:
            break
    return b"".join(out)


def _frame(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=_LEVEL, write_checksum=True).compress(data)


def _tail_file(path: str | os.PathLike[str]) -> Path:
    return Path(os.fspath(path) + ".tail")


def _replace_tail(path: str | os.PathLike[str], at: int, data: bytes) -> None:
    """Cut ``path`` at ``at`` and append ``data`` as one frame, crash-safe: the intent
    (``at`` and the frame) is first written to ``PATH.tail`` (fsynced, renamed), so a kill
    in between is finished by the next :func:`_finish_tail`."""
    tail, tmp = _tail_file(path), Path(os.fspath(path) + ".tail.tmp")
    with open(tmp, "wb") as f:
        f.write(at.to_bytes(8, "little") + (_frame(data) if data else b""))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, tail)
    fsync_dir(tail.parent)
    _finish_tail(path)


def _finish_tail(path: str | os.PathLike[str]) -> None:
    """Apply (again) a tail replacement that ``PATH.tail`` records, then remove it."""
    tail = _tail_file(path)
    try:
        intent = tail.read_bytes()
    except FileNotFoundError:
        return
    if len(intent) >= 8:
        os.truncate(path, int.from_bytes(intent[:8], "little"))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, intent[8:])
            os.fsync(fd)
        finally:
            os.close(fd)
    tail.unlink()
    fsync_dir(tail.parent)


def cut_tail(path: str | os.PathLike[str], lines: list[tuple[int, bytes]], cut: int) -> None:
    """Remove ``lines[cut:]`` (from :func:`iter_lines`, up to the end of the file) from the
    links file: links.tsv is truncated at the first removed line; links.tsv.zst at the start
    of its frame, and the kept lines of that frame are written back as one complete frame.

    Raises:
        OSError: the file cannot be truncated or written.
    """
    at = lines[cut][0]
    if not is_zstd(path):
        os.truncate(path, at)
        return
    _replace_tail(path, at, b"".join(line for unit, line in lines[:cut] if unit == at))


class ZstdLinksWriter(LineJournal):
    """Appends links.tsv rows to ``links.tsv.zst``: one frame per checkpoint, one
    ``os.write`` of complete blocks per page (see the module doc).

    Args:
        path: the links.tsv.zst file; created if missing (header frame written), appended to
            otherwise (a torn last frame is repaired first: :meth:`repair`).

    Raises:
        StateError: the existing file does not start with the links.tsv header.
        OSError: the file cannot be opened, read or repaired.

    Not thread-safe; one writer per file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from skitter.errors import StateError

        super().__init__(path)
        # no content checksum: a frame whose compressor state is lost (a failed write) can
        # still be ended by an empty last block (:meth:`_end_frame`)
        self._cctx = zstandard.ZstdCompressor(level=_LEVEL, write_checksum=False)
        self._cobj: Any = None
        self._broken = False
        try:
            if self._file.offset() == 0:
                self._file.write(header_frame())
            else:
                with open_links(self.path) as f:
                    first = f.read(len(_HEADER_BYTES))
                if first != _HEADER_BYTES:
                    raise StateError(
                        f"{self.path}: not a Skitter links.tsv.zst (unexpected header)"
                    )
        except BaseException:
            self._file.close()
            raise

    def write_rows(self, rows: Any) -> int:
        """Append all :class:`~skitter.export.links.LinkRow` rows of one page (one
        ``os.write``); returns the uncompressed bytes (0 for no rows)."""
        from skitter.export.links import format_rows

        return self.write_text(format_rows([row.fields() for row in rows])) if rows else 0

    def write_text(self, text: str) -> int:
        """Append already formatted rows (:func:`~skitter.export.links.format_rows`) of one
        page as complete zstd blocks of the open frame, with a single ``os.write``.

        Returns:
            Uncompressed bytes appended (0 for ""; nothing is written then).

        Raises:
            ValueError: the writer is closed. OSError: the write failed.
        """
        if not text:
            return 0
        data = text.encode("utf-8", "replace")
        if self._broken:
            self._end_frame()
        if self._cobj is None:
            self._cobj = self._cctx.compressobj()
        out = self._cobj.compress(data) + self._cobj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        try:
            self._file.write(out)
        except BaseException:
            # nothing of this page is in the file (AppendFile cuts a partial write) but the
            # compressor saw it: the frame is ended as it stands on disk before the next write
            self._cobj, self._broken = None, True
            raise
        return len(data)

    def _end_frame(self) -> None:
        if self._file.closed:
            return
        if self._broken:  # an empty last raw block (RFC 8878 §3.1.1.2) ends the open frame
            self._file.write(_EMPTY_LAST_BLOCK)
            self._broken = False
        elif self._cobj is not None:
            cobj, self._cobj = self._cobj, None
            try:
                self._file.write(cobj.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
            except BaseException:
                self._broken = True
                raise

    def offset(self) -> int:
        """End the open frame (the checkpoint is a frame boundary), then the file size."""
        self._end_frame()
        return self._file.offset()

    def close(self) -> None:
        """End the open frame, sync and close; idempotent."""
        try:
            self._end_frame()
        finally:
            self._file.close()

    @classmethod
    def repair(cls, path: str | os.PathLike[str]) -> int:
        """Cut a torn last frame (a crash) and write its decodable complete lines back as one
        complete frame; a missing or whole file is left as is.

        Returns:
            Compressed bytes removed, net (0 if the file was whole, empty or missing).

        Raises:
            OSError: the file cannot be read, truncated or written.
        """
        try:
            _finish_tail(path)  # a repair or cut killed half-way
            ends, size = frame_ends(path)
        except FileNotFoundError:
            return 0
        good = ends[-1] if ends else 0
        if good == size:
            return 0
        with open(path, "rb") as f:
            f.seek(good)
            text = _decode_torn(f.read())
        text = text[: text.rfind(b"\n") + 1]
        if good == 0 and not text.startswith(_HEADER_BYTES):
            text = b""  # not even the header frame: the writer starts the file again
        _replace_tail(path, good, text)
        return size - os.path.getsize(path)


def links_writer(out_dir: str | os.PathLike[str], compress: str) -> Any:
    """The links writer of a crawl folder: :class:`~skitter.export.links.LinksWriter` on
    ``links.tsv`` (``compress`` "none") or :class:`ZstdLinksWriter` on ``links.tsv.zst``.

    Raises:
        StateError: the existing file is not a Skitter links file. OSError: see the writers.
    """
    from skitter.export.links import LinksWriter

    cls = ZstdLinksWriter if compress == "zstd" else LinksWriter
    return cls(str(Path(out_dir) / links_name(compress)))


def repair_links(out_dir: str | os.PathLike[str], compress: str) -> int:
    """Repair the links file a crash left (a partial last line, or a torn last frame);
    returns the bytes cut. Raises OSError."""
    from skitter.export.links import LinksWriter

    cls = ZstdLinksWriter if compress == "zstd" else LinksWriter
    return cls.repair(str(Path(out_dir) / links_name(compress)))


def header_frame() -> bytes:
    """The header frame that starts every links.tsv.zst (always the same bytes)."""
    return _frame(_HEADER_BYTES)


def lines_since(path: str | os.PathLike[str], start: int) -> tuple[list[bytes], int]:
    """The lines of the complete frames of a links.tsv.zst from ``start`` (a frame boundary)
    on, and the offset after them (where to start next time): for a follower of a growing
    file. Raises OSError."""
    lines: list[bytes] = []
    end = start
    for _, stop, text in _frames(path, start):
        lines.extend(line for line in io.BytesIO(text) if line.endswith(b"\n"))
        end = stop
    return lines, end


class ZstdFramer:
    """Whole lines in, complete independent zstd frames out: the header frame
    (:func:`header_frame`) first, then frames of about ``frame_bytes`` of lines each (RFC 8878
    §3.1.1, content checksum on), for a links.tsv.zst written in one go (a merge, a
    compression after the crawl); the result reads like a crawl's (:func:`open_links`).

    Args:
        write: called with each frame's bytes, in order (e.g. a file's ``write``).
        frame_bytes: uncompressed bytes of lines per frame (at least one line each).
        first: the first frame's bytes (default the links.tsv header line).

    Errors: whatever ``write`` raises (OSError).
    """

    def __init__(
        self,
        write: Callable[[bytes], Any],
        frame_bytes: int = 4 << 20,
        first: bytes = _HEADER_BYTES,
    ) -> None:
        self._write = write
        self._frame_bytes = frame_bytes
        self._lines: list[bytes] = []
        self._size = 0
        write(header_frame() if first == _HEADER_BYTES else _frame(first))

    def add(self, line: bytes) -> None:
        """Append one whole line (ending in a newline); a frame is written when
        ``frame_bytes`` are buffered."""
        self._lines.append(line)
        self._size += len(line)
        if self._size >= self._frame_bytes:
            self.flush()

    def flush(self) -> None:
        """Write the buffered lines as one frame (nothing if none)."""
        if self._lines:
            data = b"".join(self._lines)
            self._lines, self._size = [], 0
            self._write(_frame(data))


def compress_links(src: str | os.PathLike[str], frame_bytes: int = 4 << 20) -> Path:
    """Replace a finished links.tsv by ``links.tsv.zst`` beside it (frames of whole lines,
    about ``frame_bytes`` of rows each, after the header frame: :class:`ZstdFramer`); written
    to a temporary name, fsynced and renamed before ``src`` is removed. Returns the new path.

    Raises:
        OSError: a file cannot be read or written.
    """
    src = Path(src)
    dst = src.with_name(LINKS_ZST_FILE)
    tmp = dst.with_name(dst.name + ".tmp")
    with open(src, "rb") as f, open(tmp, "wb") as out:
        framer = ZstdFramer(out.write, frame_bytes, first=f.readline())
        while block := f.read(frame_bytes):
            block += f.readline()  # whole lines in each frame
            framer.add(block)
            framer.flush()
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, dst)
    fsync_dir(dst.parent)
    os.unlink(src)
    return dst
