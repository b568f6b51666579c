"""WARC records as :mod:`skitter.export.warc_record` lays them out: byte for byte what FastWARC's
``WarcRecord.write`` writes for the same record (the writer used it before, issue 16), with
digests that check; record ids and digest labels."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import uuid
import zlib
from datetime import datetime
from pathlib import Path

import pytest
from fastwarc.warc import WarcRecord, WarcRecordType

from skitter.export.warc import WarcRevisit, WarcWriter
from skitter.export.warc_record import EMPTY_SHA1, record_id_pair, sha1_label
from skitter.models import Response

REQ = (("Host", "example.test"), ("User-Agent", "Skitter/0.1"), ("Accept", "*/*"))
_TYPES = {
    "warcinfo": WarcRecordType.warcinfo,
    "request": WarcRecordType.request,
    "response": WarcRecordType.response,
    "revisit": WarcRecordType.revisit,
}
_FIRST = ("WARC-Type", "WARC-Date", "WARC-Record-ID", "Content-Length")


def _members(path: str) -> list[bytes]:
    """The uncompressed bytes of each gzip member of ``path``."""
    data = Path(path).read_bytes()
    out = []
    while data:
        d = zlib.decompressobj(wbits=31)
        out.append(d.decompress(data))
        assert d.eof
        data = d.unused_data
    return out


def _fastwarc_bytes(member: bytes) -> bytes:
    """The same record (type, id, date, fields, block) serialised by FastWARC."""
    head, _, rest = member.partition(b"\r\n\r\n")
    fields = [line.split(": ", 1) for line in head.decode().split("\r\n")[1:]]
    named = dict(fields)
    block = rest[: int(named["Content-Length"])]
    rec = WarcRecord()
    rec.init_headers(_TYPES[named["WARC-Type"]], named["WARC-Record-ID"][5:-1].encode())
    rec.record_date = datetime.fromisoformat(named["WARC-Date"])
    digest = None
    for name, value in fields:
        if name in _FIRST or name == "WARC-Block-Digest":
            continue
        if name == "WARC-Payload-Digest" and named["WARC-Type"] != "revisit":
            digest = base64.b32decode(value.removeprefix("sha1:"))
            continue
        rec.headers.append(name, value)
    rec.set_bytes_content(block)
    buf = io.BytesIO()
    rec.write(buf, checksum_data=True, payload_digest=digest)
    return buf.getvalue()


def _resp(
    url: str, body: bytes, raw: bytes, *headers: tuple[str, str], status: int = 200
) -> Response:
    return Response(url, status, "OK", headers, body, raw, request_headers=REQ, peer_ip="192.0.2.9")


@pytest.mark.parametrize("level", [2, 6])
def test_records_are_byte_for_byte_fastwarcs(tmp_path: Path, level: int) -> None:
    """Every record shape (warcinfo, request, stored gzip payload, deflated small and large
    payloads, empty body, truncated, revisits with and without payload, a given request
    block) is the bytes FastWARC writes, and its digests are right."""
    html = b"<p>" + b"some text of the page " * 600 + b"</p>"
    gz = gzip.compress(html)
    w = WarcWriter(tmp_path, compression_level=level, clock=lambda: 1_714_564_800.25)
    w.write_exchange("http://example.test/gz", _resp("x", html, gz, ("Content-Encoding", "gzip")))
    w.write_exchange("http://example.test/big", _resp("x", html, html, ("Content-Type", "t/h")))
    w.write_exchange("http://example.test/small", _resp("x", b"tiny", b"tiny"))
    w.write_exchange("http://example.test/empty", _resp("x", b"", b"", status=301))
    w.write_exchange("http://example.test/cut", _resp("x", b"ab", b"ab"), truncated="length")
    w.write_exchange(
        "http://example.test/raw",
        _resp("x", b"b", b"b"),
        b"GET /raw HTTP/1.1\r\nHost: example.test\r\n",
        fetched_at=1_714_564_801.0,
    )
    revisit = WarcRevisit(
        "identical-payload-digest", "http://example.test/gz", "2024-05-01T12:00:00Z", "<urn:x>"
    )
    w.write_exchange("http://example.test/again", _resp("x", html, gz), revisit=revisit)
    nm = WarcRevisit("server-not-modified", "http://example.test/gz", "2024-05-01T12:00:00Z")
    w.write_exchange("http://example.test/nm", _resp("x", b"", b"", status=304), revisit=nm)
    w.close()
    members = _members(w.files[0])
    assert len(members) == 1 + 2 * 8
    for member in members:
        assert member == _fastwarc_bytes(member)
    # digests as warcio computes them: block = HTTP head + payload, payload = the body as stored
    gz_member = members[2]
    block = gz_member.split(b"\r\n\r\n", 1)[1][:-4]
    assert sha1_label(hashlib.sha1(block).digest()).encode() in gz_member
    assert sha1_label(hashlib.sha1(gz).digest()).encode() in gz_member
    assert f"WARC-Payload-Digest: {EMPTY_SHA1}".encode() in members[1]
    assert b"WARC-Payload-Digest" not in members[-1]  # a 304 without body names no payload
    assert b"WARC-Date: 2024-05-01T12:00:01Z\r\n" in members[11]


def test_sha1_label_is_base32_of_the_digest() -> None:
    for data in (b"", b"a", os.urandom(1000)):
        digest = hashlib.sha1(data).digest()
        assert sha1_label(digest) == "sha1:" + base64.b32encode(digest).decode()
    assert sha1_label(b"\xff" * 20) == "sha1:" + "7" * 32
    with pytest.raises(ValueError):
        sha1_label(b"short")


def test_record_ids_are_distinct_version_4_uuids() -> None:
    seen = set()
    for _ in range(500):
        for rid in record_id_pair():
            assert rid.startswith("<urn:uuid:") and rid.endswith(">")
            u = uuid.UUID(rid[10:-1])
            assert (u.version, u.variant) == (4, uuid.RFC_4122)
            assert rid == f"<urn:uuid:{u}>"
            seen.add(rid)
    assert len(seen) == 1000


def test_request_blocks_of_repeated_headers() -> None:
    """Header lines are reused for the same headers (a crawl's, one set per host): each block
    still has its own request line, Host first, CR/LF cleaned, one text encoding."""
    from skitter.export.warc_record import build_request_block

    headers = (("User-Agent", "UA\r\nX: y"), ("Host", "a.test"), ("Accept", "*/*"))
    for _ in range(2):
        assert build_request_block("http://a.test/p?q=1", headers) == (
            b"GET /p?q=1 HTTP/1.1\r\nHost: a.test\r\nUser-Agent: UA  X: y\r\nAccept: */*\r\n\r\n"
        )
        assert build_request_block("http://a.test/", headers, method="HEAD").startswith(
            b"HEAD / HTTP/1.1\r\nHost: a.test\r\n"
        )
    latin = (("Host", "a.test"), ("X-A", "é"))
    mixed = (("Host", "a.test"), ("X-A", "é"), ("X-B", "€"))
    for _ in range(2):
        assert build_request_block("http://a.test/", latin).endswith(b"X-A: \xe9\r\n\r\n")
        assert build_request_block("http://a.test/", mixed).endswith(
            "X-A: é\r\nX-B: €\r\n\r\n".encode()
        )
    # no Host header: derived from each URL
    assert b"Host: b.test:81\r\n" in build_request_block("http://b.test:81/", [])
    assert b"Host: c.test\r\n" in build_request_block("http://c.test/", [])


def test_warc_date_text() -> None:
    from datetime import UTC

    from skitter.export.warc_record import warc_date

    assert warc_date(datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)) == "2024-05-01T12:00:00Z"
    assert warc_date(datetime(2024, 5, 1, 2, 3, 4, 500, tzinfo=UTC)) == (
        "2024-05-01T02:03:04.000500Z"
    )
    for ts in (0.0, 1_714_564_800.123456, 4_102_444_799.999999):
        d = datetime.fromtimestamp(ts, tz=UTC)
        frac = f".{d.microsecond:06d}" if d.microsecond else ""
        assert warc_date(d) == d.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


def test_header_values_cannot_break_the_header_section(tmp_path: Path) -> None:
    """CR/LF inside a field value (a target URI, a revisit's) become spaces: one line each."""
    w = WarcWriter(tmp_path)
    w.write_exchange("http://a.test/x\r\nWARC-Type: fake", _resp("x", b"b", b"b"))
    w.close()
    members = _members(w.files[0])
    for member in members[1:]:
        head = member.split(b"\r\n\r\n", 1)[0]
        assert len([x for x in head.split(b"\r\n") if x.startswith(b"WARC-Type:")]) == 1
        assert b"WARC-Target-URI: http://a.test/x  WARC-Type: fake\r\n" in head + b"\r\n"
