"""Reading one response body off an aiohttp response: framing facts from the headers, an idle
deadline that also notices a stalled parser, capped decoding as the chunks arrive.

:func:`read_body` is what :class:`~skitter.fetch.aiohttp.AiohttpFetcher` calls once the
headers are in: the raw (content-encoded, de-chunked) body and the decoded one, both capped
(case C13), with :class:`~skitter.fetch.decode.ContentDecoder` fed chunk by chunk. The
response headers are looked at in one pass (:func:`body_headers`).

Idle deadline: a chunk already buffered by aiohttp (or the end of the body) is taken without
arming a timer; otherwise the wait is cut into steps of :data:`_STALL_CHECK_S` seconds, and
between steps the connection's protocol is asked for a parser error aiohttp did not deliver
to the body stream (aiohttp 3.14 leaves the reader waiting when a chunk-size line arriving
after the headers is malformed).
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.client_reqrep import ClientResponse

from skitter.errors import BodyTooLarge, ProtocolError
from skitter.fetch.decode import (
    Chunks,
    ContentDecoder,
    codings_to_undo,
    is_text_type,
    parse_content_encoding,
)
from skitter.fetch.errormap import Progress, short

__all__ = ["REDIRECT_BODY_IDLE_S", "BodyHeaders", "body_headers", "is_redirect", "read_body"]

#: While a body read is idle, how often (s) to look for a parser error aiohttp did not
#: deliver to the body stream (see the module doc).
_STALL_CHECK_S = 0.5
#: Idle-read deadline (s) for the body of a 3xx with a Location (never needed to follow it).
REDIRECT_BODY_IDLE_S = 2.0

_NO_BODY_STATUSES = frozenset({204, 304})


class BodyHeaders(NamedTuple):
    """What the response headers say about the body (from :func:`body_headers`).

    Attributes:
        content_length: the one ``Content-Length`` value in bytes (repeats of the same value
            count once), None when absent, differing or not a number.
        chunked: a ``Transfer-Encoding`` names ``chunked``.
        media_type: the first ``Content-Type``'s media type, lower-cased, no parameters
            (None when absent or empty).
        encodings: the ``Content-Encoding`` values in wire order.
        location: a ``Location`` header is present.
    """

    content_length: int | None
    chunked: bool
    media_type: str | None
    encodings: tuple[str, ...]
    location: bool


def body_headers(headers: tuple[tuple[str, str], ...]) -> BodyHeaders:
    """The :class:`BodyHeaders` of ``headers`` ((name, value) pairs), in one pass."""
    lengths: set[str] = set()
    chunked = False
    media_type: str | None = None
    typed = False
    encodings: list[str] = []
    location = False
    for k, v in headers:
        low = k.lower()
        if low == "content-length":
            lengths.add(v.strip())
        elif low == "transfer-encoding":
            chunked = chunked or "chunked" in v.lower()
        elif low == "content-type":
            if not typed:
                typed = True
                media_type = v.split(";", 1)[0].strip().lower() or None
        elif low == "content-encoding":
            encodings.append(v)
        elif low == "location":
            location = True
    length: int | None = None
    if len(lengths) == 1:
        value = lengths.pop()
        length = int(value) if value.isdigit() else None
    return BodyHeaders(length, chunked, media_type, tuple(encodings), location)


def is_redirect(status: int, headers: tuple[tuple[str, str], ...]) -> bool:
    """A 3xx with a Location: followed without its body."""
    return 300 <= status < 400 and any(k.lower() == "location" for k, _ in headers)


async def read_body(
    resp: ClientResponse,
    protocol: ResponseHandler | None,
    headers: tuple[tuple[str, str], ...],
    method: str,
    cap: int,
    progress: Progress,
    truncate: bool = False,
    notes: list[str] | None = None,
) -> tuple[bytes, bytes, bool]:
    """``(raw body, decoded body, truncated)`` of ``resp`` (``headers``: its headers decoded
    latin-1; ``protocol``: its connection's, for stall checks; ``cap``: bytes, on the raw
    and on the decoded size). Nothing is read for HEAD, 1xx, 204 and 304.

    With ``truncate``, reading stops at the cap and the first ``cap`` decoded bytes are
    returned with truncated True; otherwise going over raises. ``notes`` receives what was
    not as labelled (see :class:`ContentDecoder`). ``progress`` is kept up to date (byte
    counts, Content-Length, chunked) for error details.

    Raises:
        BodyTooLarge: Content-Length, the raw or the decoded size passed ``cap``.
        ProtocolError: bad body framing, content decoding failed.
        aiohttp errors: as ``StreamReader.readany`` (idle read: ``SocketTimeoutError``).
    """
    status = resp.status
    if method == "HEAD" or status in _NO_BODY_STATUSES or 100 <= status < 200:
        return b"", b"", False
    facts = body_headers(headers)
    progress.content_length = facts.content_length
    progress.chunked = facts.chunked
    if progress.content_length is not None and progress.content_length > cap and not truncate:
        raise BodyTooLarge(
            f"body exceeds limit: Content-Length {progress.content_length} > {cap} bytes"
        )
    media_type = facts.media_type
    # a redirect's body is never needed: do not wait long for one that stalls
    idle_s = (
        min(progress.idle_s, REDIRECT_BODY_IDLE_S)
        if 300 <= status < 400 and facts.location and progress.idle_s > 0
        else progress.idle_s
    )
    codings = codings_to_undo(parse_content_encoding(facts.encodings), media_type)
    decoder = ContentDecoder(codings, max_bytes=cap, sniff=is_text_type(media_type))
    decode = bool(decoder.codings) and not decoder.passthrough
    # The chunks are joined once at the end (a one-chunk body is used as read, no copy);
    # past SPILL_BYTES gathered as they come, so that a large body is never held twice.
    chunks = Chunks()
    raw_len = 0
    try:
        while True:
            chunk = await read_chunk(resp, protocol, progress, idle_s)
            if not chunk:
                break
            chunks.add(chunk)
            raw_len += len(chunk)
            progress.raw_bytes = raw_len
            if decode:
                decoder.feed(chunk)
                progress.decoded_bytes = decoder.decoded_bytes
            else:
                progress.decoded_bytes = raw_len
            if raw_len > cap:
                raise BodyTooLarge(
                    f"body exceeds limit of {cap} bytes (raw)",
                    bytes_read=progress.decoded_bytes,
                )
    except BodyTooLarge:
        if not truncate:
            raise
        raw_bytes = chunks.take()
        body = decoder.partial() if decode else raw_bytes
        return raw_bytes, body[:cap], True
    raw_bytes = chunks.take()
    body = decoder.finish() if decode else raw_bytes
    if notes is not None:
        notes.extend(decoder.notes)
    return raw_bytes, body, False


async def read_chunk(
    resp: ClientResponse,
    protocol: ResponseHandler | None,
    progress: Progress,
    idle_s: float,
) -> bytes:
    """Next body chunk (b"" at the end), with an idle deadline of ``idle_s`` seconds (0 =
    none): what ``resp.content.readany()`` gives, without a timer when it is there already.

    Raises:
        aiohttp.SocketTimeoutError: nothing arrived for ``idle_s`` seconds.
        ProtocolError: the parser failed meanwhile (bad body framing).
    """
    content = resp.content
    if idle_s <= 0:  # no idle deadline configured
        return await content.readany()
    # readany() without a wait: what is buffered (all of it, as readany gives), or the end
    chunk = content.read_nowait()
    if chunk or content.is_eof():
        return chunk
    waited = 0.0
    while True:
        step = min(_STALL_CHECK_S, idle_s - waited)
        wait = asyncio.timeout(step)
        try:
            async with wait:
                return await content.readany()
        except TimeoutError:
            if not wait.expired():
                raise  # aiohttp's own sock_read timeout
        waited += step
        failure = protocol.exception() if protocol is not None else None
        if isinstance(failure, TimeoutError):  # aiohttp's sock_read fired meanwhile
            raise aiohttp.SocketTimeoutError("Timeout on reading data from socket")
        if failure is not None:
            raise ProtocolError(
                f"bad body framing: {short(str(failure))} ({progress.raw_bytes} body bytes read)",
                bytes_read=progress.decoded_bytes,
            )
        if waited >= idle_s:
            raise aiohttp.SocketTimeoutError("Timeout on reading data from socket")
