"""Raw WARC record bytes for the offline tests (so every framing detail is under control)."""

from __future__ import annotations

import base64
import hashlib
import uuid


def sha1_b32(data: bytes) -> str:
    """``sha1:`` + base32, the digest form WARC writers use."""
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def record(
    wtype: str,
    uri: str | None,
    block: bytes,
    *,
    version: str = "WARC/1.1",
    content_type: str | None = None,
    extra: dict[str, str] | None = None,
    date: str = "2024-05-01T12:00:00Z",
    content_length: str | None = None,
) -> bytes:
    """One WARC record (header, block, the two CRLFs)."""
    rid = f"<urn:uuid:{uuid.uuid4()}>"
    lines = [version, f"WARC-Type: {wtype}", f"WARC-Record-ID: {rid}", f"WARC-Date: {date}"]
    if uri is not None:
        lines.append(f"WARC-Target-URI: {uri}")
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    for k, v in (extra or {}).items():
        lines.append(f"{k}: {v}")
    lines.append(f"Content-Length: {content_length or len(block)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + block + b"\r\n\r\n"


def http_response(body: bytes, headers: list[tuple[str, str]], status: str = "200 OK") -> bytes:
    """An HTTP/1.1 response message as recorded: status line, headers, body as given."""
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode() + body


def response(uri: str, body: bytes, headers: list[tuple[str, str]], **kw: object) -> bytes:
    """A ``response`` record with a payload digest of ``body`` as stored."""
    extra = {"WARC-Payload-Digest": sha1_b32(body)}
    extra.update(kw.pop("extra", {}) or {})  # type: ignore[arg-type]
    return record(
        "response",
        uri,
        http_response(body, headers),
        content_type="application/http;msgtype=response",
        extra=extra,
        **kw,  # type: ignore[arg-type]
    )


def chunk(data: bytes, size: int = 16) -> bytes:
    """``data`` in chunked transfer coding (RFC 9112 §7.1)."""
    out = b""
    for i in range(0, len(data), size):
        part = data[i : i + size]
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n\r\n"
