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
is accepted with whatever decoded so far, as browsers do; compressed data that goes bad after
a good start raises :class:`~skitter.errors.ProtocolError`. Labels that lie are tolerated as
browsers do: a body that is not in its labelled coding from its first bytes is used as sent
(with a note), a text body encoded twice but labelled once is decoded twice (sniffing the
gzip/zstd magic number), and a compressed *file* (``application/gzip``) is kept as sent
(:func:`codings_to_undo`). The decompressor of each coding and the magic-number sniffing are
in :mod:`skitter.fetch.codings`; this module stacks them and holds the policy.
"""

from __future__ import annotations

import io
from collections.abc import Iterable

from skitter.errors import BodyTooLarge, ProtocolError
from skitter.fetch.codings import (
    FIRST_BYTES,
    STEP_BYTES,
    fails_at_start,
    make_layer,
    sniff_coding,
)

__all__ = [
    "ACCEPT_ENCODING",
    "MAX_EXTRA_LAYERS",
    "SPILL_BYTES",
    "SUPPORTED_CODINGS",
    "Chunks",
    "ContentDecoder",
    "codings_to_undo",
    "decode_body",
    "is_text_type",
    "parse_content_encoding",
]

#: Every coding this module can decode (lower-case tokens).
SUPPORTED_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "identity"})

#: The ``Accept-Encoding`` request header value: only codings we can decode.
ACCEPT_ENCODING = "gzip, deflate, br, zstd"


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


#: Media types of compressed *files* -> the coding they are: a ``.gz`` served as
#: ``application/gzip`` with ``Content-Encoding: gzip`` is the file itself (browsers save it
#: as sent), not a gzip-encoded transfer of something else.
_FILE_TYPES = {
    "application/gzip": "gzip",
    "application/x-gzip": "gzip",
    "application/x-gunzip": "gzip",
    "application/gzipped": "gzip",
    "application/gzip-compressed": "gzip",
    "application/x-gzip-compressed": "gzip",
    "gzip/document": "gzip",
    "application/zstd": "zstd",
    "application/x-zstd": "zstd",
    "application/x-brotli": "br",
}


def codings_to_undo(codings: Iterable[str], media_type: str | None) -> list[str]:
    """The codings (applied order) to decode for a body of ``media_type``.

    When the media type is a compressed file of the last applied coding
    (``application/gzip`` + ``gzip``, ``application/zstd`` + ``zstd``), that coding is the
    file's own format and is kept: the body stays as sent.

    Args:
        codings: from :func:`parse_content_encoding`.
        media_type: lower-case media type without parameters, or None.
    """
    out = [c.strip().lower() for c in codings]
    own = _FILE_TYPES.get(media_type or "")
    if out and own is not None and out[-1].replace("x-gzip", "gzip") == own:
        out.pop()
    return out


def is_text_type(media_type: str | None) -> bool:
    """True for media types that are text (``text/*``, ``*+xml``, ``*+json``, JSON,
    JavaScript, XML, XHTML) or unknown (None): bodies in which another gzip/zstd layer
    found by its magic number is decoded too."""
    if media_type is None:
        return True
    if media_type.startswith("text/") or media_type.endswith(("+xml", "+json")):
        return True
    return media_type in (
        "application/json",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/xml",
    )


#: Most layers decoded beyond those ``Content-Encoding`` names (a text body encoded twice).
MAX_EXTRA_LAYERS = 4


#: A body buffer (:class:`Chunks`) past this many bytes gathers into one growing buffer.
SPILL_BYTES = 1024 * 1024


class Chunks:
    """The bytes of one body as they arrive, for one ``bytes`` at the end.

    Up to :data:`SPILL_BYTES` they are kept as the pieces they came in, joined once when
    taken (a single piece is returned as it is, no copy). Past it they are copied into one
    :class:`io.BytesIO` as they come and the pieces dropped: a large buffer grows in place
    (glibc enlarges a mapped block with ``mremap``) and ``getvalue()`` hands over that very
    buffer, so a large body is never held twice (its pieces and their joined copy: a 10 MB
    page made a 20 MB peak).
    """

    __slots__ = ("_buf", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self._buf: io.BytesIO | None = None

    def __len__(self) -> int:
        return self.size

    def add(self, data: bytes) -> None:
        """Append ``data``."""
        self.size += len(data)
        buf = self._buf
        if buf is not None:
            buf.write(data)
            return
        self.parts.append(data)
        if self.size > SPILL_BYTES:
            buf = self._buf = io.BytesIO()
            for part in self.parts:
                buf.write(part)
            self.parts = []

    def value(self) -> bytes:
        """All the bytes, as one ``bytes``."""
        if self._buf is not None:
            return self._buf.getvalue()  # its own buffer, not a copy
        parts = self.parts
        if len(parts) == 1:
            return parts[0]
        joined = b"".join(parts)
        if parts:
            self.parts = [joined]
        return joined

    def take(self) -> bytes:
        """All the bytes, emptying this buffer."""
        out = self.value()
        self.parts, self.size, self._buf = [], 0, None
        return out


class _Stage:
    """One layer of the pipeline and what it has done so far.

    While on probation (its first :data:`FIRST_BYTES` input bytes) the stage keeps its
    input and holds back its output, so that it can still turn into a pass-through.
    """

    __slots__ = ("coding", "extra", "held_in", "held_out", "identity", "layer", "probation")

    def __init__(self, coding: str, *, extra: bool = False) -> None:
        self.coding = coding
        self.layer = make_layer(coding)
        self.extra = extra  # found by sniffing, not named by Content-Encoding
        self.identity = False  # found not to be in this coding: bytes pass through
        self.probation = True
        self.held_in = Chunks()
        self.held_out = Chunks()


class ContentDecoder:
    """Incremental decoder for one response body, enforcing a decoded-size cap.

    Usage::

        dec = ContentDecoder(["gzip"], max_bytes=10 * 2**20)
        for chunk in chunks:
            dec.feed(chunk)          # may raise BodyTooLarge / ProtocolError
        body = dec.finish()          # decoded bytes (<= max_bytes)
        dec.notes                    # what was not as labelled, for error_detail

    Bodies whose label lies (what browsers tolerate):

    * a layer whose decoder fails before giving a single byte (the body is not in that
      coding from its first bytes, e.g. plain HTML labelled ``gzip``), or that took bytes
      and gave nothing by the end, is skipped: its input is used as it is, and a note says
      so. A decoder that fails *after* giving output (a stream corrupt in the middle) is a
      :class:`~skitter.errors.ProtocolError`.
    * with ``sniff=True`` (text bodies), decoded output that starts with a gzip or zstd
      magic number is decoded again, up to :data:`MAX_EXTRA_LAYERS` extra layers (a body
      encoded twice but labelled once); the cap applies to the final output.

    Args:
        codings: codings in the order they were applied (see :func:`parse_content_encoding`).
            If any is unsupported the body is passed through undecoded (``passthrough`` True).
        max_bytes: cap on the decoded body size in bytes; exceeding it raises
            :class:`~skitter.errors.BodyTooLarge` with ``bytes_read`` = decoded bytes so far
            (at least ``max_bytes + 1``, at most about ``max_bytes`` + 64 KiB).
        step_bytes: output bytes requested from a decompressor per step.
        sniff: decode extra layers found by their magic number (see above).

    Attributes:
        notes: one line per layer skipped or added, e.g. "Content-Encoding gzip not
            applied: the body is not gzip data (used as sent)".

    Raises (from :meth:`feed` / :meth:`finish`):
        BodyTooLarge: decoded output exceeded ``max_bytes``; stop reading and drop the connection.
        ProtocolError: compressed data corrupt after a good start ("content decoding failed: ...").
    """

    def __init__(
        self,
        codings: Iterable[str],
        *,
        max_bytes: int,
        step_bytes: int = STEP_BYTES,
        sniff: bool = False,
    ) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        applied = [c.strip().lower() for c in codings if c.strip().lower() not in ("", "identity")]
        self.codings: tuple[str, ...] = tuple(applied)
        self.passthrough = any(c not in SUPPORTED_CODINGS for c in applied)
        self._stages: list[_Stage] = (
            [] if self.passthrough else [_Stage(c) for c in reversed(applied)]
        )
        self._max = max_bytes
        self._step = max(1, step_bytes)
        self._out = Chunks()
        self._sniff = sniff and bool(self._stages)
        self._sniff_buf = Chunks()
        self.notes: list[str] = []

    @property
    def decoded_bytes(self) -> int:
        """Decoded bytes produced so far."""
        return len(self._out)

    def _emit(self, data: bytes) -> None:
        self._out.add(data)
        if len(self._out) > self._max:
            raise BodyTooLarge(
                f"decoded body exceeds limit of {self._max} bytes",
                bytes_read=len(self._out),
            )

    def _sink(self, data: bytes, *, final: bool = False) -> None:
        """Output of the last stage: sniffed for another layer while that is undecided."""
        if not self._sniff:
            if data:
                self._emit(data)
            return
        self._sniff_buf.add(data)
        if len(self._sniff_buf) < 4 and not final:
            return
        held = self._sniff_buf.take()
        coding = sniff_coding(held)
        extra = sum(st.extra for st in self._stages)
        if coding is None or extra >= MAX_EXTRA_LAYERS:
            self._sniff = False
            if held:
                self._emit(held)
            return
        self._stages.append(_Stage(coding, extra=True))
        self.notes.append(f"body was {coding}-encoded once more than Content-Encoding says")
        self._push(len(self._stages) - 1, held)

    def _skip(self, index: int) -> None:
        """Make stage ``index`` pass its input through (the body is not in its coding)."""
        stage = self._stages[index]
        stage.identity = True
        held = stage.held_in.take()
        stage.probation = False
        stage.held_out = Chunks()
        if stage.extra:
            self._stages.pop(index)
            self.notes.pop()
            self._sniff = False  # what looked like another layer is not one: stop looking
            self._emit(held)
            return
        self.notes.append(
            f"Content-Encoding {stage.coding} not applied: the body is not {stage.coding} "
            "data; used as sent"
        )
        self._push(index + 1, held)

    def _release(self, index: int) -> None:
        """End stage ``index``'s probation: pass on the output it held back."""
        stage = self._stages[index]
        stage.probation = False
        out = stage.held_out.take()
        stage.held_in = Chunks()
        if out:
            self._push(index + 1, out)

    def _push(self, index: int, data: bytes) -> None:
        if index >= len(self._stages):
            self._sink(data)
            return
        stage = self._stages[index]
        if stage.identity:
            self._push(index + 1, data)
            return
        if stage.probation:
            stage.held_in.add(data)
        layer = stage.layer
        idle_steps = 0
        while True:
            limit = self._step
            if index == len(self._stages) - 1 and not self._sniff:
                limit = max(1, min(self._step, self._max - len(self._out) + 1))
            try:
                out = layer.step(data, limit)
            except ProtocolError:
                if not stage.probation or not fails_at_start(
                    stage.coding, stage.held_in.value()[:FIRST_BYTES]
                ):
                    raise
                self._skip(index)
                return
            data = b""
            if out:
                idle_steps = 0
                if stage.probation:
                    stage.held_out.add(out)
                    if len(stage.held_out) > self._max:
                        raise BodyTooLarge(
                            f"decoded body exceeds limit of {self._max} bytes",
                            bytes_read=len(stage.held_out),
                        )
                else:
                    self._push(index + 1, out)
            else:
                idle_steps += 1
            if layer.needs_input or idle_steps > 8:  # (the bound is defensive only)
                break
        if stage.probation and len(stage.held_in) > FIRST_BYTES:
            self._release(index)

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
        return self._out.value()

    def finish(self) -> bytes:
        """Flush the decoders and return the whole decoded body (at most ``max_bytes``).

        A stage that took bytes and gave none without reaching its end of stream is
        skipped (its input used as sent, with a note).

        Raises:
            BodyTooLarge, ProtocolError: as :meth:`feed`.
        """
        # Every feed() drains each layer until it needs input, so nothing is pending here;
        # a compressed stream cut short of its end marker keeps what decoded (lenient).
        index = 0
        while index < len(self._stages):
            stage = self._stages[index]
            if stage.probation:
                if stage.held_in and not stage.held_out and not stage.layer.finished:
                    self._skip(index)  # took bytes, gave nothing: not in this coding
                    continue  # the stage list may have changed: look at this index again
                self._release(index)
            index += 1
        if self._sniff:
            self._sink(b"", final=True)
        return self._out.value()


def decode_body(codings: Iterable[str], body: bytes, *, max_bytes: int) -> bytes:
    """Decode a whole body at once (convenience over :class:`ContentDecoder`).

    Raises:
        BodyTooLarge, ProtocolError: as :meth:`ContentDecoder.feed`.
    """
    dec = ContentDecoder(codings, max_bytes=max_bytes)
    dec.feed(body)
    return dec.finish()
