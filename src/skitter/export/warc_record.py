"""WARC record building: the stored HTTP messages and each record's gzip member.

Owns what goes *inside* a WARC 1.1 record, independent of files: the request block
(WARC 1.1 §6.5) and response head (§6.3) as stored, ``WARC-Date`` text, the revisit
profiles (§6.7), and the zlib gzip member (RFC 1952, WARC 1.1 Annex A) used for small or
already-compressed records. The rotating file writer is :mod:`skitter.export.warc`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from skitter.models import Response

_isal: Any = None
try:  # ISA-L: the same CRC-32 about 4x faster than zlib's; deflate ~10x faster than level 6
    from isal import isal_zlib
    from isal.isal_zlib import crc32 as _crc32

    _isal = isal_zlib
except ImportError:  # pragma: no cover - isal is a dependency
    from zlib import crc32 as _crc32

#: WARC gzip levels done by ISA-L's deflate (its levels 1-3; the rest by zlib/FastWARC).
#: Measured on 600 rust-doc HTML pages (40 KiB): ISA-L 1-2 ≈ 40 us a page for 14.0% of the
#: size, ISA-L 3 ≈ 90 us for 13.3%, against ≈ 380-460 us for 11.4% at level 6.
ISAL_LEVELS = range(1, 4)

__all__ = [
    "ORIG_TRANSFER_ENCODING",
    "REVISIT_PROFILES",
    "WarcRevisit",
    "build_request_block",
    "build_response_head",
    "warc_date",
]


#: Name a response's ``Transfer-Encoding`` header is stored under (the stored body is de-chunked).
ORIG_TRANSFER_ENCODING = "X-Skitter-Orig-Transfer-Encoding"
_TARGET_SAFE = "!#$%&'()*+,-./:;=?@[]_~"
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: gzip member header (RFC 1952): deflate, no flags, no mtime, OS unknown.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
#: Content-Encoding tokens whose bodies deflate cannot shrink (stored, not deflated).
_COMPRESSED_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "compress"})
#: WARC 1.1 §6.7.2 / §6.7.3 revisit profiles, by short name.
REVISIT_PROFILES = {
    "identical-payload-digest": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
    "server-not-modified": "http://netpreserve.org/warc/1.1/revisit/server-not-modified",
}


@dataclass(frozen=True, slots=True)
class WarcRevisit:
    """What a ``revisit`` record stands for (WARC 1.1 §6.7).

    Attributes:
        profile: "identical-payload-digest" (the payload is byte for byte that of an earlier
            capture: ``WARC-Payload-Digest`` is set to its digest) or "server-not-modified"
            (a 304 answer to a conditional request).
        refers_to_uri: ``WARC-Refers-To-Target-URI``, the earlier capture's target URI.
        refers_to_date: ``WARC-Refers-To-Date``, the earlier capture's ``WARC-Date`` as
            written (W3C ISO 8601, e.g. "2024-05-01T12:00:00.123Z").
        refers_to_id: ``WARC-Refers-To``, the earlier record's ``WARC-Record-ID``, if known.
    """

    profile: str
    refers_to_uri: str
    refers_to_date: str
    refers_to_id: str | None = None


def warc_date(date: datetime) -> str:
    """``date`` (UTC) as FastWARC writes ``WARC-Date``: W3C ISO 8601 with microseconds
    when not zero (``2024-05-01T12:00:00.500000Z``, ``2024-05-01T12:00:00Z``)."""
    frac = f".{date.microsecond:06d}" if date.microsecond else ""
    return date.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


def _clean(text: str) -> str:
    """Header text safe for one header line (CR/LF replaced with a space)."""
    if "\r" in text or "\n" in text:
        return text.replace("\r", " ").replace("\n", " ")
    return text


def _encode_http(text: str) -> bytes:
    """HTTP header text as bytes: latin-1 (round-trips Response headers), else UTF-8."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _host_header(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and port != _DEFAULT_PORTS.get(parts.scheme.lower()):
        host = f"{host}:{port}"
    return host


def build_request_block(
    url: str, headers: Sequence[tuple[str, str]], *, method: str = "GET"
) -> bytes:
    """The HTTP request as stored in a WARC ``request`` record block (WARC 1.1 §6.5).

    Shape: ``{method} {path}[?{query}] HTTP/1.1\\r\\n`` + ``Name: value\\r\\n`` per header
    (``Host`` first; derived from ``url`` if absent, default port omitted) + ``\\r\\n``.
    Non-ASCII characters of the path/query are percent-encoded as UTF-8; CR/LF inside header
    text become spaces; text is encoded latin-1 (UTF-8 if not representable).
    """
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target = f"{target}?{parts.query}"
    target = quote(target, safe=_TARGET_SAFE)
    host = [(k, v) for k, v in headers if k.lower() == "host"]
    rest = [(k, v) for k, v in headers if k.lower() != "host" and k]
    if not host:
        host = [("Host", _host_header(url))]
    lines = [f"{_clean(method)} {target} HTTP/1.1"]
    lines.extend(f"{_clean(k)}: {_clean(v)}" for k, v in (*host, *rest))
    return _encode_http("\r\n".join(lines) + "\r\n\r\n")


def build_response_head(response: Response) -> bytes:
    """The HTTP status line and headers as stored in a ``response`` record (WARC 1.1 §6.3).

    Shape: ``response.raw_head`` (the bytes as received) when the fetcher kept it, else
    ``HTTP/{version} {status} {reason}\\r\\n`` + ``Name: value\\r\\n`` per header in wire
    order + ``\\r\\n``; the entity body (``raw_body``) follows it in the record block.
    ``Transfer-Encoding`` is renamed :data:`ORIG_TRANSFER_ENCODING` because the stored body is
    not chunked; CR/LF inside header text become spaces.
    """
    if response.raw_head:
        return _raw_head(response.raw_head)
    lines = [f"HTTP/{response.http_version} {response.status} {_clean(response.reason)}"]
    for name, value in response.headers:
        if not name:
            continue
        if name.lower() == "transfer-encoding":
            name = ORIG_TRANSFER_ENCODING
        lines.append(f"{_clean(name)}: {_clean(value)}")
    return _encode_http("\r\n".join(lines) + "\r\n\r\n")


def _raw_head(raw: bytes) -> bytes:
    """The header section as received, byte for byte (a space before a colon, folded
    lines, Latin-1 and control bytes, bare LF line ends), but ``Transfer-Encoding``
    renamed (the stored body is de-chunked)."""
    if b"ransfer-" not in raw.lower():
        return raw
    lines = raw.split(b"\n")
    for i, line in enumerate(lines):
        name, colon, value = line.partition(b":")
        if colon and name.strip(b" \t").lower() == b"transfer-encoding":
            lines[i] = ORIG_TRANSFER_ENCODING.encode() + b":" + value
    return b"\n".join(lines)


def _body_is_compressed(response: Response) -> bool:
    """True if the response's Content-Encoding names a compression (gzip, br, zstd...)."""
    for name, value in response.headers:
        if name.lower() == "content-encoding":
            for token in value.split(","):
                if token.strip().lower() in _COMPRESSED_CODINGS:
                    return True
    return False


def _gzip_member(data: bytes, level: int, stored_tail: int = 0) -> bytes:
    """``data`` as one gzip member (RFC 1952): deflated at ``level`` (by ISA-L for
    :data:`ISAL_LEVELS`, else zlib), except its last
    ``stored_tail`` bytes, which go in stored blocks (one valid deflate stream: the first part
    ends with a sync flush, the second is stored blocks made here, RFC 1951 §3.2.4)."""
    cut = len(data) - stored_tail
    comp: Any
    if level in ISAL_LEVELS and _isal is not None:
        comp = _isal.compressobj(level, _isal.DEFLATED, -15)
    else:
        # A window just larger than the deflated part loses nothing and skips most of zlib's
        # set-up cost (≈ 25-60 µs for the default 32 KiB window and hash table).
        wbits = min(zlib.MAX_WBITS, max(9, cut.bit_length()))
        comp = zlib.compressobj(level, zlib.DEFLATED, -wbits, max(1, min(8, wbits - 7)))
    parts: list[bytes | memoryview]
    if stored_tail <= 0:
        parts = [_GZIP_HEADER, comp.compress(data), comp.flush()]
    else:
        view = memoryview(data)
        parts = [_GZIP_HEADER, comp.compress(view[:cut]), comp.flush(zlib.Z_SYNC_FLUSH)]
        # (Z_SYNC_FLUSH is 2 in zlib and ISA-L alike)
        parts += _stored_blocks(view[cut:])
    parts.append(struct.pack("<II", _crc32(data), len(data) & 0xFFFFFFFF))
    return b"".join(parts)


#: Largest stored deflate block (RFC 1951 §3.2.4: LEN is 16 bits).
_STORED_MAX = 0xFFFF


def _stored_blocks(data: memoryview) -> list[bytes | memoryview]:
    """``data`` (non-empty) as the final stored deflate blocks of a stream that is
    byte-aligned here (after a sync flush): per block a header byte (BFINAL, BTYPE 00),
    LEN and NLEN (little-endian), then the bytes as they are; what zlib's level 0 writes,
    without copying the bytes through a compressor."""
    out: list[bytes | memoryview] = []
    n = len(data)
    for start in range(0, n, _STORED_MAX):
        chunk = data[start : start + _STORED_MAX]
        final = start + _STORED_MAX >= n
        size = len(chunk)
        out.append(struct.pack("<BHH", 1 if final else 0, size, size ^ 0xFFFF))
        out.append(chunk)
    return out
