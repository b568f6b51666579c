"""Content codings one by one: a bounded-step decompressor per coding, and magic numbers.

Owns what :mod:`skitter.fetch.decode` stacks into a ``Content-Encoding`` decoder: one
:class:`Layer` per coding token (:func:`make_layer`: ``gzip``/``x-gzip`` RFC 1952 with
multi-member streams, ``deflate`` RFC 1950 or raw RFC 1951, ``br`` RFC 7932, ``zstd``
RFC 8878 with the window capped as RFC 9659 §3 allows), each asked for at most a bounded
amount of output per step; and the sniffing of lying labels: which coding a body's first
bytes are in (:func:`sniff_coding`) and whether a coding fails on them
(:func:`fails_at_start`). Inflate uses ISA-L when installed (the zlib API, about twice as
fast), else zlib: the same bytes and errors.
"""

from __future__ import annotations

import zlib
from types import ModuleType
from typing import Any, Protocol, cast

import brotli
from backports import zstd

from skitter.errors import ProtocolError

_inflate: ModuleType = zlib
_INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error,)
try:  # ISA-L's inflate: the zlib API, about twice as fast (measured: 46 vs 101 us a page)
    from isal import isal_zlib

    _inflate = isal_zlib
    _INFLATE_ERRORS = (zlib.error, cast("type[Exception]", isal_zlib.error))
except ImportError:  # pragma: no cover - isal is a dependency; zlib gives the same bytes
    pass

__all__ = [
    "FIRST_BYTES",
    "STEP_BYTES",
    "ZSTD_WINDOW_LOG_MAX",
    "Layer",
    "fails_at_start",
    "make_layer",
    "sniff_coding",
]

#: Output bytes asked of one decompressor per step (bounds transient allocations).
STEP_BYTES = 64 * 1024

#: zstd window limit: 2**23 = 8 MiB (RFC 9659 §3 lets HTTP decoders refuse larger windows).
ZSTD_WINDOW_LOG_MAX = 23

_GZIP_MAGIC = b"\x1f\x8b"


class Layer(Protocol):
    """One decompression stage.

    ``step(data, max_length)`` consumes ``data`` (keeping what it cannot use yet) and returns
    at most about ``max_length`` bytes; ``needs_input`` is False while more output can be had
    by calling ``step(b"", ...)``.
    """

    needs_input: bool

    def step(self, data: bytes, max_length: int) -> bytes: ...

    @property
    def finished(self) -> bool:
        """True once the end of a complete stream was decoded."""
        ...


def _is_zlib_header(head: bytes) -> bool:
    """RFC 1950 header: CM = 8 (deflate), CINFO <= 7, (CMF*256 + FLG) % 31 == 0."""
    cmf, flg = head[0], head[1]
    return (cmf & 0x0F) == 8 and (cmf >> 4) <= 7 and (cmf * 256 + flg) % 31 == 0


class _ZlibLayer:
    """gzip (``wbits=31``), zlib (``15``) or raw deflate (``-15``) via ``decompressobj`` of
    ``isal.isal_zlib`` (ISA-L), else of ``zlib``: the same API and output."""

    def __init__(self, coding: str) -> None:
        self._gzip = coding in ("gzip", "x-gzip")
        self._obj: Any = _inflate.decompressobj(31) if self._gzip else None
        self._head = b""  # deflate: bytes held until the zlib-vs-raw choice can be made
        self._tail = b""  # input the decompressor has not consumed yet (max_length reached)
        self._done = False  # trailing bytes after the last member are ignored
        self._ended = False  # one complete stream (member) decoded
        self.needs_input = True

    @property
    def finished(self) -> bool:
        return self._ended

    def _choose_deflate(self, head: bytes) -> Any:
        return _inflate.decompressobj(15 if _is_zlib_header(head) else -15)

    def step(self, data: bytes, max_length: int) -> bytes:
        if self._done:
            self.needs_input = True
            return b""
        if self._obj is None:
            self._head += data
            if len(self._head) < 2:
                self.needs_input = True
                return b""
            self._obj = self._choose_deflate(self._head)
            data, self._head = self._head, b""
        buf = self._tail + data if self._tail else data
        self._tail = b""
        try:
            out: bytes = self._obj.decompress(buf, max_length)
        except _INFLATE_ERRORS as exc:
            raise ProtocolError(f"content decoding failed: {exc}") from exc
        if self._obj.eof:
            self._ended = True
            rest = self._obj.unused_data
            if not self._gzip:
                self._done = True  # bytes after the end of a deflate stream are ignored
            elif not rest:
                self._obj = _inflate.decompressobj(31)  # another member may follow later
            elif rest[:1] == _GZIP_MAGIC[:1] and rest[1:2] in (b"", _GZIP_MAGIC[1:]):
                # Another gzip member follows (RFC 1952 §2.2): decode it too.
                self._obj = _inflate.decompressobj(31)
                self._tail = rest
            else:
                self._done = True  # trailing garbage after the last member: ignored
        else:
            self._tail = self._obj.unconsumed_tail
        # More output without new input is possible only if the output limit was reached
        # or input is still queued (unconsumed tail, next gzip member).
        self.needs_input = not self._tail and len(out) < max_length
        return out


class _BrotliLayer:
    """Brotli via ``brotli.Decompressor.process(..., output_buffer_limit=...)`` (Brotli 1.2)."""

    def __init__(self) -> None:
        self._obj = brotli.Decompressor()
        self._finished = False  # (asking a failed decoder raises: remember it here)
        self.needs_input = True

    @property
    def finished(self) -> bool:
        return self._finished

    def step(self, data: bytes, max_length: int) -> bytes:
        if data and self._finished:
            # Consistent with data after the end marker inside one chunk, which the Brotli
            # decoder itself rejects.
            raise ProtocolError("content decoding failed: brotli: data after end of stream")
        try:
            out: bytes = self._obj.process(data, output_buffer_limit=max_length)
            self._finished = bool(self._obj.is_finished())
        except brotli.error as exc:
            raise ProtocolError(f"content decoding failed: brotli: {exc}") from exc
        # Brotli 1.2.1 may report is_finished()/can_accept_more_data() while output is still
        # pending, so rely on the output size: the buffer stops growing only at the limit.
        self.needs_input = len(out) < max_length
        return out


class _ZstdLayer:
    """Zstandard via ``ZstdDecompressor.decompress(data, max_length)``; multi-frame bodies."""

    def __init__(self) -> None:
        self._obj = self._new()
        self._ended = False
        self.needs_input = True

    @property
    def finished(self) -> bool:
        return self._ended or bool(self._obj.eof)

    @staticmethod
    def _new() -> zstd.ZstdDecompressor:
        return zstd.ZstdDecompressor(
            options={zstd.DecompressionParameter.window_log_max: ZSTD_WINDOW_LOG_MAX}
        )

    def step(self, data: bytes, max_length: int) -> bytes:
        if self._obj.eof:
            rest = self._obj.unused_data + data
            if not rest:
                self.needs_input = True
                return b""
            self._ended = True
            self._obj = self._new()  # another frame follows (RFC 8878 §3)
            data = rest
        try:
            out: bytes = self._obj.decompress(data, max_length)
        except zstd.ZstdError as exc:
            raise ProtocolError(f"content decoding failed: zstd: {exc}") from exc
        if self._obj.eof:
            self.needs_input = not self._obj.unused_data
        else:
            self.needs_input = bool(self._obj.needs_input)
        return out


def make_layer(coding: str) -> Layer:
    """A fresh decompressor for one coding token.

    Args:
        coding: ``gzip``, ``x-gzip``, ``deflate``, ``br`` or ``zstd`` (lower case).

    Returns:
        A :class:`Layer`; it raises :class:`~skitter.errors.ProtocolError` from ``step`` when
        the data is not valid in that coding.

    Raises:
        ValueError: any other token (callers check ``SUPPORTED_CODINGS`` first).
    """
    if coding in ("gzip", "x-gzip", "deflate"):
        return _ZlibLayer(coding)
    if coding == "br":
        return _BrotliLayer()
    if coding == "zstd":
        return _ZstdLayer()
    raise ValueError(f"unsupported coding {coding!r}")  # pragma: no cover


#: A layer that fails within its first this many input bytes (without having decoded a
#: complete stream) is taken as "the body is not in this coding": used as sent.
FIRST_BYTES = 64

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def sniff_coding(head: bytes) -> str | None:
    """The coding whose magic number starts ``head`` (gzip RFC 1952, zstd RFC 8878, the
    usual zlib headers RFC 1950), if any."""
    if head[:3] == b"\x1f\x8b\x08":
        return "gzip"
    if head[:4] == _ZSTD_MAGIC:
        return "zstd"
    if head[:2] in (b"\x78\x01", b"\x78\x9c", b"\x78\xda"):
        return "deflate"  # zlib header (RFC 1950), never the start of text
    return None


def fails_at_start(coding: str, head: bytes) -> bool:
    """True if a fresh ``coding`` decoder, fed ``head`` (the first :data:`FIRST_BYTES` or
    fewer input bytes) one byte at a time, fails before it has decoded a complete stream.

    Codings with a magic number decide on it alone: a body that starts with the gzip
    (RFC 1952) or zstd (RFC 8878, also a skippable frame) magic, or a valid zlib header
    (RFC 1950) for ``deflate``, is in that coding, and a later failure is real damage."""
    if coding in ("gzip", "x-gzip"):
        return not head.startswith(_GZIP_MAGIC[: len(head)]) or not head
    if coding == "zstd":
        skippable = len(head) >= 4 and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18"
        return not (skippable or head.startswith(_ZSTD_MAGIC[: len(head)])) or not head
    if coding == "deflate" and len(head) >= 2 and _is_zlib_header(head):
        return False
    if sniff_coding(head) is not None:
        # another coding's magic number (a gzip body labelled "gzip, br"): brotli has no
        # magic, and some gzip headers (by their mtime bytes) decode as a brotli start
        return True
    layer = make_layer(coding)
    try:
        for i in range(len(head)):
            piece = head[i : i + 1]
            for _ in range(64):  # bounded: one byte of input gives few steps of output
                layer.step(piece, STEP_BYTES)
                piece = b""
                if layer.needs_input:
                    break
    except ProtocolError:
        return not layer.finished
    return False
