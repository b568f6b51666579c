"""Streaming ``Content-Encoding`` decoding with a cap on the *decoded* size.

A small compressed body can inflate to gigabytes (case C13), so decoding is incremental and
every decompressor is asked for at most a bounded amount of output per step
(``zlib`` ``max_length``/``unconsumed_tail``, Brotli ``output_buffer_limit``, zstd
``max_length``/``needs_input``). Memory stays within roughly ``max_bytes`` plus one step of
output per layer, whatever the compression ratio.

Codings (RFC 9110 §8.4.1, RFC 7932, RFC 9659): ``gzip``/``x-gzip`` (multi-member streams
accepted, trailing non-gzip bytes ignored), ``deflate`` (zlib-wrapped per RFC 9110 *and* the
raw deflate that many servers send), ``br``, ``zstd`` (window capped at 8 MiB as RFC 9659
allows), ``identity``. Stacked codings (``Content-Encoding: gzip, br``) are undone in reverse
order of application. Bytes after the end of a gzip/deflate stream are ignored (servers pad
with zeros); after a Brotli stream they are an error (the Brotli decoder refuses them). A body
whose codings include one we cannot decode is kept as is.

A compressed stream that stops before its end marker (the body framing itself being complete)
is accepted with whatever decoded so far, as browsers do; malformed compressed data raises
:class:`~skitter.errors.ProtocolError`.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Protocol

import brotli
from backports import zstd

from skitter.errors import BodyTooLarge, ProtocolError

__all__ = [
    "ACCEPT_ENCODING",
    "SUPPORTED_CODINGS",
    "ContentDecoder",
    "decode_body",
    "parse_content_encoding",
]

#: Every coding this module can decode (lower-case tokens).
SUPPORTED_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "identity"})

#: The ``Accept-Encoding`` request header value: only codings we can decode.
ACCEPT_ENCODING = "gzip, deflate, br, zstd"

#: Output bytes asked of one decompressor per step (bounds transient allocations).
STEP_BYTES = 64 * 1024

#: zstd window limit: 2**23 = 8 MiB (RFC 9659 §3 lets HTTP decoders refuse larger windows).
ZSTD_WINDOW_LOG_MAX = 23

_GZIP_MAGIC = b"\x1f\x8b"


def parse_content_encoding(values: Iterable[str]) -> list[str]:
    """The codings named by one or more ``Content-Encoding`` header values, in applied order.

    Args:
        values: header values in wire order (a repeated header is the same as a comma list).

    Returns:
        Lower-cased coding tokens, ``identity`` and empty items dropped. E.g.
        ``["gzip, br"]`` -> ``["gzip", "br"]`` (gzip applied first, so decoded last).
    """
    out: list[str] = []
    for value in values:
        for item in value.split(","):
            token = item.strip().lower()
            if token and token != "identity":
                out.append(token)
    return out


class _Layer(Protocol):
    """One decompression stage.

    ``step(data, max_length)`` consumes ``data`` (keeping what it cannot use yet) and returns
    at most about ``max_length`` bytes; ``needs_input`` is False while more output can be had
    by calling ``step(b"", ...)``.
    """

    needs_input: bool

    def step(self, data: bytes, max_length: int) -> bytes: ...


class _ZlibLayer:
    """gzip (``wbits=31``), zlib (``15``) or raw deflate (``-15``) via ``zlib.decompressobj``."""

    def __init__(self, coding: str) -> None:
        self._gzip = coding in ("gzip", "x-gzip")
        self._obj: zlib._Decompress | None = zlib.decompressobj(31) if self._gzip else None
        self._head = b""  # deflate: bytes held until the zlib-vs-raw choice can be made
        self._tail = b""  # input the decompressor has not consumed yet (max_length reached)
        self._done = False  # trailing bytes after the last member are ignored
        self.needs_input = True

    def _choose_deflate(self, head: bytes) -> zlib._Decompress:
        # RFC 1950 header: CM = 8 (deflate), CINFO <= 7, (CMF*256 + FLG) % 31 == 0.
        cmf, flg = head[0], head[1]
        is_zlib = (cmf & 0x0F) == 8 and (cmf >> 4) <= 7 and (cmf * 256 + flg) % 31 == 0
        return zlib.decompressobj(15 if is_zlib else -15)

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
            out = self._obj.decompress(buf, max_length)
        except zlib.error as exc:
            raise ProtocolError(f"content decoding failed: {exc}") from exc
        if self._obj.eof:
            rest = self._obj.unused_data
            if not self._gzip:
                self._done = True  # bytes after the end of a deflate stream are ignored
            elif not rest:
                self._obj = zlib.decompressobj(31)  # another member may follow later
            elif rest[:1] == _GZIP_MAGIC[:1] and rest[1:2] in (b"", _GZIP_MAGIC[1:]):
                # Another gzip member follows (RFC 1952 §2.2): decode it too.
                self._obj = zlib.decompressobj(31)
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
        self.needs_input = True

    def step(self, data: bytes, max_length: int) -> bytes:
        if data and self._obj.is_finished():
            # Consistent with data after the end marker inside one chunk, which the Brotli
            # decoder itself rejects.
            raise ProtocolError("content decoding failed: brotli: data after end of stream")
        try:
            out: bytes = self._obj.process(data, output_buffer_limit=max_length)
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
        self.needs_input = True

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


def _make_layer(coding: str) -> _Layer:
    if coding in ("gzip", "x-gzip", "deflate"):
        return _ZlibLayer(coding)
    if coding == "br":
        return _BrotliLayer()
    if coding == "zstd":
        return _ZstdLayer()
    raise ValueError(f"unsupported coding {coding!r}")  # pragma: no cover


class ContentDecoder:
    """Incremental decoder for one response body, enforcing a decoded-size cap.

    Usage::

        dec = ContentDecoder(["gzip"], max_bytes=10 * 2**20)
        for chunk in chunks:
            dec.feed(chunk)          # may raise BodyTooLarge / ProtocolError
        body = dec.finish()          # decoded bytes (<= max_bytes)

    Args:
        codings: codings in the order they were applied (see :func:`parse_content_encoding`).
            If any is unsupported the body is passed through undecoded (``passthrough`` True).
        max_bytes: cap on the decoded body size in bytes; exceeding it raises
            :class:`~skitter.errors.BodyTooLarge` with ``bytes_read`` = decoded bytes so far
            (at least ``max_bytes + 1``, at most about ``max_bytes`` + 64 KiB).
        step_bytes: output bytes requested from a decompressor per step.

    Raises (from :meth:`feed` / :meth:`finish`):
        BodyTooLarge: decoded output exceeded ``max_bytes``; stop reading and drop the connection.
        ProtocolError: corrupt compressed data ("content decoding failed: ...").
    """

    def __init__(
        self, codings: Iterable[str], *, max_bytes: int, step_bytes: int = STEP_BYTES
    ) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        applied = [c.strip().lower() for c in codings if c.strip().lower() not in ("", "identity")]
        self.codings: tuple[str, ...] = tuple(applied)
        self.passthrough = any(c not in SUPPORTED_CODINGS for c in applied)
        self._layers: list[_Layer] = (
            [] if self.passthrough else [_make_layer(c) for c in reversed(applied)]
        )
        self._max = max_bytes
        self._step = max(1, step_bytes)
        self._out = bytearray()

    @property
    def decoded_bytes(self) -> int:
        """Decoded bytes produced so far."""
        return len(self._out)

    def _emit(self, data: bytes) -> None:
        self._out += data
        if len(self._out) > self._max:
            raise BodyTooLarge(
                f"decoded body exceeds limit of {self._max} bytes",
                bytes_read=len(self._out),
            )

    def _push(self, index: int, data: bytes) -> None:
        if index == len(self._layers):
            if data:
                self._emit(data)
            return
        layer = self._layers[index]
        last = index == len(self._layers) - 1
        idle_steps = 0
        while True:
            limit = self._step
            if last:
                limit = max(1, min(self._step, self._max - len(self._out) + 1))
            out = layer.step(data, limit)
            data = b""
            if out:
                idle_steps = 0
                self._push(index + 1, out)
            else:
                idle_steps += 1
            if layer.needs_input or idle_steps > 8:  # (the bound is defensive only)
                return

    def feed(self, data: bytes) -> None:
        """Decode one chunk of the (content-encoded) body.

        Raises:
            BodyTooLarge: the decoded size passed ``max_bytes``.
            ProtocolError: the compressed data is corrupt.
        """
        if not data:
            return
        self._push(0, data)

    def partial(self) -> bytes:
        """The decoded bytes produced so far (also after :class:`BodyTooLarge`; may then
        hold up to about one step more than ``max_bytes``)."""
        return bytes(self._out)

    def finish(self) -> bytes:
        """Flush the decoders and return the whole decoded body (at most ``max_bytes``).

        Raises:
            BodyTooLarge, ProtocolError: as :meth:`feed`.
        """
        # Every feed() drains each layer until it needs input, so nothing is pending here;
        # a compressed stream cut short of its end marker keeps what decoded (lenient).
        return bytes(self._out)


def decode_body(codings: Iterable[str], body: bytes, *, max_bytes: int) -> bytes:
    """Decode a whole body at once (convenience over :class:`ContentDecoder`).

    Raises:
        BodyTooLarge, ProtocolError: as :meth:`ContentDecoder.feed`.
    """
    dec = ContentDecoder(codings, max_bytes=max_bytes)
    dec.feed(body)
    return dec.finish()
