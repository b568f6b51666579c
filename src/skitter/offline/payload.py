"""The page inside a WARC record: HTTP envelope, transfer and content codings, as recorded.

Tools record HTTP differently (case C41): wget and warcio keep the bytes as they came on the
wire (chunked framing, ``Content-Encoding: gzip``/``br``), others store a de-chunked body but
leave ``Transfer-Encoding: chunked`` in the headers, Skitter stores it de-chunked and renames
the header. So the framing is decoded only when the bytes *are* chunked
(RFC 9112 §7.1: a hex chunk size line first), and the content coding is undone with
:class:`skitter.fetch.decode.ContentDecoder` (RFC 9110 §8.4), falling back to the stored bytes
when they are not in the coding the header names (a body stored already decoded).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from skitter.errors import BodyTooLarge, ProtocolError
from skitter.fetch.decode import ContentDecoder, parse_content_encoding
from skitter.offline.reader import Record

__all__ = ["HttpPayload", "dechunk", "looks_chunked", "payload_of"]

_CHUNK_LINE_RE = re.compile(rb"\A[0-9A-Fa-f]{1,16}[ \t]*(?:;[^\r\n]*)?\r?\n")
_STATUS_RE = re.compile(rb"\AHTTP/\d(?:\.\d)?[ \t]+(\d{3})")


@dataclass(slots=True)
class HttpPayload:
    """What a response, revisit or resource record says about its page.

    Attributes:
        status: HTTP status (None for a ``resource`` record or a non-HTTP block).
        headers: response headers, lower-cased names, every value kept in order.
        body: the entity body with transfer and content codings undone (b"" if none).
        stored: the payload bytes as stored (after the HTTP header block), for digests.
        content_type: raw ``Content-Type`` value (the WARC header's for ``resource``).
        truncated: why the body is incomplete ("length" etc. from ``WARC-Truncated``, or
            "reader" when the reader kept only part of the block), else None.
        note: what decoding could not do (one line), else None.
    """

    status: int | None
    headers: dict[str, list[str]] = field(default_factory=dict)
    body: bytes = b""
    stored: bytes = b""
    content_type: str | None = None
    truncated: str | None = None
    note: str | None = None

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower-case), or None."""
        values = self.headers.get(name)
        return values[0] if values else None


def looks_chunked(body: bytes) -> bool:
    """True when ``body`` starts like chunked framing (a hex size line, RFC 9112 §7.1)."""
    return _CHUNK_LINE_RE.match(body) is not None


def dechunk(body: bytes) -> tuple[bytes, bool]:
    """Undo chunked transfer coding (RFC 9112 §7.1), tolerantly.

    Returns:
        (the data, complete): ``complete`` is False when the framing broke off or was bad;
        the data of the chunks read until then is returned.
    """
    out: list[bytes] = []
    pos = 0
    n = len(body)
    while pos < n:
        eol = body.find(b"\n", pos)
        if eol < 0:
            return b"".join(out), False
        size_text = body[pos:eol].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return b"".join(out), False
        pos = eol + 1
        if size == 0:
            return b"".join(out), True
        out.append(body[pos : pos + size])
        if pos + size > n:
            return b"".join(out), False
        pos += size
        if body.startswith(b"\r\n", pos):
            pos += 2
        elif body.startswith(b"\n", pos):
            pos += 1
    return b"".join(out), False


def _split_http(block: bytes) -> tuple[int | None, dict[str, list[str]], bytes] | None:
    m = _STATUS_RE.match(block)
    if m is None:
        return None
    end = block.find(b"\r\n\r\n")
    sep = 4
    alt = block.find(b"\n\n")
    if end < 0 or (0 <= alt < end):
        end, sep = alt, 2
    if end < 0:
        head, body = block, b""
    else:
        head, body = block[:end], block[end + sep :]
    headers: dict[str, list[str]] = {}
    for raw in head.split(b"\n")[1:]:
        line = raw.decode("latin-1").rstrip("\r")
        name, colon, value = line.partition(":")
        if colon:
            headers.setdefault(name.strip().lower(), []).append(value.strip())
    return int(m.group(1)), headers, body


def _decode(codings: list[str], body: bytes, max_bytes: int) -> tuple[bytes, str | None]:
    if not codings or not body:
        return body, None
    if codings[-1] in ("gzip", "x-gzip") and not body.startswith(b"\x1f\x8b"):
        return body, f"Content-Encoding {','.join(codings)} but the body is not gzip: kept as is"
    dec = ContentDecoder(codings, max_bytes=max_bytes)
    if dec.passthrough:
        return body, f"Content-Encoding {','.join(codings)} not supported: kept as is"
    try:
        dec.feed(body)
        return dec.finish(), None
    except BodyTooLarge:
        return dec.partial(), f"decoded body over {max_bytes} bytes: cut there"
    except ProtocolError as exc:
        return body, f"{exc}: kept as stored"


def payload_of(rec: Record, *, max_body_bytes: int) -> HttpPayload | None:
    """Decode the page of a ``response``, ``revisit`` or ``resource`` record.

    Args:
        rec: the record (its ``block`` may be partial, see :attr:`Record.dropped`).
        max_body_bytes: cap on the decoded body (bytes); a longer body is cut there.

    Returns:
        The payload, or None for a response/revisit whose block is not an HTTP response
        (``dns:`` records, FTP...).
    """
    rtype = rec.type
    truncated = rec.headers.get("warc-truncated") or ("reader" if rec.dropped else None)
    if rtype == "resource":
        return HttpPayload(
            status=None,
            body=rec.block,
            stored=rec.block,
            content_type=rec.headers.get("content-type"),
            truncated=truncated,
        )
    parsed = _split_http(rec.block)
    if parsed is None:
        return None
    status, headers, stored = parsed
    body = stored
    notes: list[str] = []
    te = ",".join(headers.get("transfer-encoding", [])).lower()
    if "chunked" in te and looks_chunked(body):
        body, complete = dechunk(body)
        if not complete and truncated is None:
            notes.append("chunked framing broke off")
    codings = parse_content_encoding(headers.get("content-encoding", []))
    body, note = _decode([c.lower() for c in codings], body, max_body_bytes)
    if note:
        notes.append(note)
    if len(body) > max_body_bytes:
        body = body[:max_body_bytes]
        notes.append(f"body over {max_body_bytes} bytes: cut there")
    ct = headers.get("content-type")
    return HttpPayload(
        status=status,
        headers=headers,
        body=body,
        stored=stored,
        content_type=ct[0] if ct else None,
        truncated=truncated,
        note="; ".join(notes) or None,
    )
