"""WarcWriter: files warcio and FastWARC both accept, rotation, crash repair."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastwarc.warc import ArchiveIterator as FastIterator
from fastwarc.warc import WarcRecordType
from warcio.archiveiterator import ArchiveIterator as WarcioIterator

from skitter.export.warc import (
    ORIG_TRANSFER_ENCODING,
    WarcWriter,
    WarcWritten,
    build_request_block,
    build_response_head,
)
from skitter.models import Response

BIN = Path(sys.executable).parent
WARCIO = str(BIN / "warcio")
NAME_RE = re.compile(r"^skitter-\d{14}-\d{5}\.warc\.gz$")
REQ_HEADERS = (
    ("Host", "example.test"),
    ("User-Agent", "Skitter/0.1"),
    ("Accept-Encoding", "gzip, deflate"),
)
T0 = 1_714_564_800.123456


@dataclass(frozen=True)
class Exchange:
    url: str
    response: Response
    method: str = "GET"


def html(i: int, size: int = 3000) -> bytes:
    line = f"<p><a href='/p/{i}'>page {i}</a> some text for page number {i}</p>\n".encode()
    return b"<!doctype html><title>t</title>\n" + line * (size // len(line) + 1)


def make_exchange(i: int) -> Exchange:
    """Five shapes, cycled: gzip body, chunked origin, binary, HEAD, 3xx without body."""
    url = f"http://example.test/p/{i}?q={i}"
    kind = i % 5
    headers: tuple[tuple[str, str], ...]
    if kind == 0:
        raw = gzip.compress(html(i))
        headers = (
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Encoding", "gzip"),
            ("Content-Length", str(len(raw))),
        )
        resp = Response(url, 200, "OK", headers, body=html(i), raw_body=raw)
    elif kind == 1:
        body = html(i)
        headers = (("Content-Type", "text/html"), ("Transfer-Encoding", "chunked"))
        resp = Response(url, 200, "OK", headers, body=body, raw_body=body)
    elif kind == 2:
        body = bytes(range(256)) * 20 + b"\r\n\r\n\x00" + bytes([i % 256])
        headers = (("Content-Type", "image/png"), ("Content-Length", str(len(body))))
        resp = Response(url, 200, "OK", headers, body=body, raw_body=body)
    elif kind == 3:
        headers = (("Content-Type", "text/html"), ("Content-Length", "12345"))
        return Exchange(url, Response(url, 200, "OK", headers), method="HEAD")
    else:
        headers = (("Location", f"http://example.test/p/{i + 1}"), ("Content-Length", "0"))
        resp = Response(url, 301, "" if i % 2 else "Moved Permanently", headers)
    return Exchange(url, resp)


def _with_req(resp: Response) -> Response:
    return Response(
        resp.url,
        resp.status,
        resp.reason,
        resp.headers,
        body=resp.body,
        raw_body=resp.raw_body,
        request_headers=REQ_HEADERS,
        peer_ip="192.0.2.7",
    )


def exchanges(n: int) -> list[Exchange]:
    out = []
    for i in range(n):
        ex = make_exchange(i)
        out.append(Exchange(ex.url, _with_req(ex.response), ex.method))
    return out


def write_all(writer: WarcWriter, exs: list[Exchange]) -> list[WarcWritten]:
    return [
        writer.write_exchange(ex.url, ex.response, method=ex.method, fetched_at=T0 + i)
        for i, ex in enumerate(exs)
    ]


def warcio_check(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([WARCIO, "check", path], capture_output=True, text=True, check=False)


def warcio_records(path: str) -> Iterator[tuple[str, str | None, bytes, object]]:
    """(type, target URI, payload as stored, record) for every record, via warcio."""
    with open(path, "rb") as f:
        for rec in WarcioIterator(f):
            payload = rec.raw_stream.read()
            yield rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI"), payload, rec


@pytest.fixture
def clock() -> list[float]:
    return [T0]


@pytest.fixture
def writer(tmp_path: Path, clock: list[float]) -> Iterator[WarcWriter]:
    w = WarcWriter(tmp_path, clock=lambda: clock[0])
    try:
        yield w
    finally:
        w.close()


# -- blocks -------------------------------------------------------------------------------


def test_request_block_host_first_and_target() -> None:
    block = build_request_block(
        "http://example.test:8080/a%20b/é?x=1&y=ü#frag",
        [("User-Agent", "UA"), ("Host", "example.test:8080"), ("Accept", "*/*")],
    )
    assert block == (
        b"GET /a%20b/%C3%A9?x=1&y=%C3%BC HTTP/1.1\r\n"
        b"Host: example.test:8080\r\nUser-Agent: UA\r\nAccept: */*\r\n\r\n"
    )


def test_request_block_derives_host_and_root_path() -> None:
    assert build_request_block("https://example.test", [], method="HEAD") == (
        b"HEAD / HTTP/1.1\r\nHost: example.test\r\n\r\n"
    )
    assert build_request_block("https://example.test:443/", []).startswith(
        b"GET / HTTP/1.1\r\nHost: example.test\r\n"
    )
    assert b"Host: example.test:8443\r\n" in build_request_block("https://example.test:8443/", [])


def test_response_head_renames_transfer_encoding_and_keeps_the_rest() -> None:
    resp = Response(
        "http://x.test/",
        200,
        "OK",
        (
            ("Content-Encoding", "gzip"),
            ("transfer-encoding", "chunked"),
            ("X-Caf\xe9", "\xe9t\xe9"),
            ("X-Bad", "a\r\nInjected: 1"),
        ),
        http_version="1.0",
    )
    assert build_response_head(resp) == (
        b"HTTP/1.0 200 OK\r\nContent-Encoding: gzip\r\n"
        + ORIG_TRANSFER_ENCODING.encode()
        + b": chunked\r\nX-Caf\xe9: \xe9t\xe9\r\nX-Bad: a  Injected: 1\r\n\r\n"
    )


# -- the 50-exchange file -------------------------------------------------------------------


def test_fifty_exchanges_pass_warcio_check_and_read_back(writer: WarcWriter) -> None:
    exs = exchanges(50)
    written = write_all(writer, exs)
    writer.close()
    assert len(writer.files) == 1
    path = writer.files[0]
    assert NAME_RE.match(os.path.basename(path))
    assert os.path.basename(path) == "skitter-20240501120000-00000.warc.gz"
    assert os.path.getsize(path) == written[-1].offset + written[-1].length

    check = warcio_check(path)
    assert check.returncode == 0, check.stdout + check.stderr

    index = subprocess.run(
        [WARCIO, "index", path], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(index) == 101
    assert [json.loads(line)["offset"] for line in index[1::2]] == [str(w.offset) for w in written]
    assert [json.loads(line)["offset"] for line in index[2::2]] == [
        str(w.response_offset) for w in written
    ]

    # warcio
    recs = list(warcio_records(path))
    assert len(recs) == 101
    assert recs[0][0] == "warcinfo"
    info = recs[0][3]
    assert info.rec_headers.get_header("WARC-Filename") == os.path.basename(path)  # type: ignore[attr-defined]
    assert b"isPartOf: skitter\r\n" in recs[0][2]
    assert b"format: WARC File Format 1.1\r\n" in recs[0][2]
    assert b"software: Skitter/" in recs[0][2]
    for i, ex in enumerate(exs):
        (qtype, qurl, qpayload, qrec), (rtype, rurl, rpayload, rrec) = recs[1 + 2 * i : 3 + 2 * i]
        assert (qtype, rtype) == ("request", "response")
        assert qurl == rurl == ex.url
        assert qpayload == b""
        assert rpayload == ex.response.raw_body
        qh, rh = qrec.rec_headers, rrec.rec_headers  # type: ignore[attr-defined]
        assert qh.get_header("WARC-Concurrent-To") == rh.get_header("WARC-Record-ID")
        assert rh.get_header("WARC-Concurrent-To") == qh.get_header("WARC-Record-ID")
        assert rh.get_header("WARC-Record-ID") == written[i].response_id
        assert rh.get_header("WARC-IP-Address") == "192.0.2.7"
        assert rh.get_header("WARC-Date") == qh.get_header("WARC-Date")
        assert rh.get_header("WARC-Date") == f"2024-05-01T12:00:{i:02d}.123456Z"
        assert rh.get_header("Content-Type") == "application/http;msgtype=response"
        assert qh.get_header("Content-Type") == "application/http;msgtype=request"
        digest = rh.get_header("WARC-Payload-Digest")
        assert digest == "sha1:" + _b32(hashlib.sha1(ex.response.raw_body).digest())
        status_line = rrec.http_headers.statusline  # type: ignore[attr-defined]
        assert status_line.split(" ", 1)[0] == str(ex.response.status)
        req_line = qrec.http_headers.protocol  # type: ignore[attr-defined]
        assert req_line == ex.method
        assert qrec.http_headers.headers[0] == ("Host", "example.test")  # type: ignore[attr-defined]
        if i % 5 == 1:
            assert rrec.http_headers.get_header("Transfer-Encoding") is None  # type: ignore[attr-defined]
            assert rrec.http_headers.get_header(ORIG_TRANSFER_ENCODING) == "chunked"  # type: ignore[attr-defined]
        if i % 5 == 0:
            assert rrec.http_headers.get_header("Content-Encoding") == "gzip"  # type: ignore[attr-defined]

    # FastWARC, digests verified by it as well (records must be read while iterating)
    fast = list(fast_records(path))
    assert len(fast) == 101
    assert fast[0][0] == WarcRecordType.warcinfo
    for i, ex in enumerate(exs):
        q, r = fast[1 + 2 * i], fast[2 + 2 * i]
        assert (q[0], r[0]) == (WarcRecordType.request, WarcRecordType.response)
        assert q[1] == r[1] == ex.url
        assert r[2] == ex.response.status
        assert q[3] and r[3], "block and payload digests verify"
        assert r[4] == ex.response.raw_body


def fast_records(path: str) -> Iterator[tuple[WarcRecordType, str | None, int | None, bool, bytes]]:
    """(type, target URI, HTTP status, digests ok, payload as stored) via FastWARC."""
    with open(path, "rb") as f:
        for rec in FastIterator(f, parse_http=False):
            # FastWARC checks the block digest before and the payload digest after parse_http().
            ok = rec.verify_block_digest()
            status = None
            if rec.is_http:
                rec.parse_http()
                status = rec.http_headers.status_code
                ok = ok and rec.verify_payload_digest()
            yield (
                rec.record_type,
                rec.headers.get("WARC-Target-URI"),
                status,
                ok,
                rec.reader.read(),
            )


def _b32(digest: bytes) -> str:
    import base64

    return base64.b32encode(digest).decode()


def test_each_record_is_its_own_gzip_member(writer: WarcWriter) -> None:
    written = write_all(writer, exchanges(3))
    writer.close()
    data = Path(writer.files[0]).read_bytes()
    expected_starts = sorted(
        {0} | {w.offset for w in written} | {w.response_offset for w in written}
    )
    starts, pos = [], 0
    while pos < len(data):
        d = zlib.decompressobj(wbits=31)
        one = d.decompress(data[pos:])
        assert d.eof
        assert one.startswith(b"WARC/1.1\r\n") and one.endswith(b"\r\n\r\n")
        starts.append(pos)
        pos = len(data) - len(d.unused_data)
    assert starts == expected_starts  # warcinfo + 3 x (request, response), nothing else


def test_one_os_write_per_exchange(
    writer: WarcWriter, count_os_writes: Callable[[], list[int]]
) -> None:
    ex = exchanges(2)
    writer.write_exchange(ex[0].url, ex[0].response)  # creates the file (+ warcinfo write)
    calls = count_os_writes()
    before = writer.offset()
    w = writer.write_exchange(ex[1].url, ex[1].response)
    assert calls == [w.length]
    assert writer.offset() == before + w.length == os.path.getsize(w.path)


def test_request_headers_block_is_stored_verbatim(writer: WarcWriter) -> None:
    block = b"GET /x HTTP/1.1\r\nHost: example.test\r\nX-Exact: yes\r\n\r\n"
    resp = Response("http://example.test/x", 204, "No Content")
    writer.write_exchange("http://example.test/x", resp, block, ip="2001:db8::1")
    writer.close()
    path = writer.files[0]
    assert warcio_check(path).returncode == 0
    with open(path, "rb") as f:
        recs = [
            (r.headers.get("WARC-IP-Address"), r.reader.read())
            for r in FastIterator(f, parse_http=False)
        ]
    assert recs[1] == ("2001:db8::1", block)
    assert recs[0][0] is None


def test_a_given_payload_digest_is_written_as_is(writer: WarcWriter) -> None:
    # the duplicate stage's SHA-1 of the payload is not computed again; it is written
    body = html(1)
    resp = _with_req(Response("http://example.test/p", 200, "OK", body=body, raw_body=body))
    digest = hashlib.sha1(body).digest()
    writer.write_exchange("http://example.test/p", resp, payload_sha1=digest)
    writer.write_exchange("http://example.test/q", resp)  # (computed here)
    writer.close()
    assert warcio_check(writer.files[0]).returncode == 0
    with open(writer.files[0], "rb") as f:
        got = [
            r.headers.get("WARC-Payload-Digest")
            for r in FastIterator(f, parse_http=False)
            if r.record_type == WarcRecordType.response
        ]
    assert got == ["sha1:" + _b32(digest)] * 2


def test_truncated_flag(writer: WarcWriter) -> None:
    resp = Response("http://example.test/big", 200, "OK", (("Content-Length", "999999"),))
    resp = Response(resp.url, 200, "OK", resp.headers, raw_body=b"x" * 100)
    writer.write_exchange(resp.url, resp, truncated="length")
    writer.close()
    assert warcio_check(writer.files[0]).returncode == 0
    with open(writer.files[0], "rb") as f:
        truncated = [r.headers.get("WARC-Truncated") for r in FastIterator(f)]
    assert truncated == [None, None, "length"]


def test_write_after_close_raises(writer: WarcWriter) -> None:
    writer.close()
    writer.close()
    with pytest.raises(ValueError):
        writer.write_exchange("http://x.test/", Response("http://x.test/", 200))


def test_no_file_until_first_write(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path / "warc")
    assert w.files == [] and w.offset() == 0 and w.current_path is None
    w.close()
    assert os.listdir(tmp_path / "warc") == []


# -- rotation -------------------------------------------------------------------------------


def test_rotation_creates_several_valid_files(tmp_path: Path, clock: list[float]) -> None:
    max_bytes = 12_000
    w = WarcWriter(tmp_path, max_bytes=max_bytes, clock=lambda: clock[0])
    exs = exchanges(40)
    written = write_all(w, exs)
    w.close()
    assert len(w.files) > 3
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(p) for p in w.files]
    serials = [int(os.path.basename(p)[-13:-8]) for p in w.files]
    assert serials == list(range(len(w.files)))
    total = 0
    for path in w.files:
        assert warcio_check(path).returncode == 0, path
        size = os.path.getsize(path)
        recs = list(warcio_records(path))
        assert recs[0][0] == "warcinfo"
        n_exchanges = (len(recs) - 1) // 2
        assert n_exchanges >= 1
        if n_exchanges > 1:
            assert size <= max_bytes
        total += n_exchanges
    assert total == len(exs)
    assert [w_.path for w_ in written] == sorted(w_.path for w_ in written)


def test_oversized_exchange_still_written_without_empty_files(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path, max_bytes=100)
    exs = exchanges(3)
    write_all(w, exs)
    w.close()
    assert len(w.files) == 3
    for path in w.files:
        assert warcio_check(path).returncode == 0
        assert len(list(warcio_records(path))) == 3


def test_serial_continues_after_existing_files(tmp_path: Path, clock: list[float]) -> None:
    w1 = WarcWriter(tmp_path, clock=lambda: clock[0])
    write_all(w1, exchanges(1))
    w1.close()
    w2 = WarcWriter(tmp_path, clock=lambda: clock[0])  # same second: name differs by serial
    write_all(w2, exchanges(1))
    w2.close()
    assert [os.path.basename(p)[-13:] for p in w1.files + w2.files] == [
        "00000.warc.gz",
        "00001.warc.gz",
    ]


# -- repair ---------------------------------------------------------------------------------


def _written_then_cut(tmp_path: Path, cut_at: str) -> tuple[WarcWriter, list[Exchange], int]:
    w = WarcWriter(tmp_path)
    exs = exchanges(11)
    written = write_all(w, exs)
    w.close()
    last = written[-1]
    if cut_at == "half":
        keep = last.offset + last.length // 2
    elif cut_at == "lone_request":
        keep = last.response_offset
    else:  # a few bytes into the response member
        keep = last.response_offset + 10
    os.truncate(last.path, keep)
    return w, exs, keep - last.offset


@pytest.mark.parametrize("cut_at", ["half", "lone_request", "response_header"])
def test_repair_cuts_partial_exchange(tmp_path: Path, cut_at: str) -> None:
    w, exs, expect_cut = _written_then_cut(tmp_path, cut_at)
    path = w.files[0]
    if cut_at != "lone_request":  # the file ends inside a gzip member
        with pytest.raises(EOFError):
            gzip.decompress(Path(path).read_bytes())
    assert WarcWriter.repair(tmp_path) == [(path, expect_cut)]
    assert warcio_check(path).returncode == 0
    recs = list(warcio_records(path))
    assert len(recs) == 1 + 2 * 10
    assert [r[2] for r in recs[2::2]] == [ex.response.raw_body for ex in exs[:10]]
    assert WarcWriter.repair(tmp_path) == []  # idempotent


def test_repair_then_resume_writing(tmp_path: Path) -> None:
    _written_then_cut(tmp_path, "half")
    WarcWriter.repair(tmp_path)
    w = WarcWriter(tmp_path)
    write_all(w, exchanges(2))
    w.close()
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 2 and files[1].endswith("-00001.warc.gz")
    for name in files:
        assert warcio_check(str(tmp_path / name)).returncode == 0


def test_repair_only_newest_file_and_missing_dir(tmp_path: Path) -> None:
    assert WarcWriter.repair(tmp_path / "nope") == []
    w = WarcWriter(tmp_path, max_bytes=100)
    write_all(w, exchanges(3))
    w.close()
    newest = w.files[-1]
    with open(newest, "ab") as f:
        f.write(b"\x1f\x8b\x08\x00garbage")
    assert WarcWriter.repair(tmp_path) == [(newest, 11)]
    assert all(warcio_check(p).returncode == 0 for p in w.files)


def test_repair_deletes_file_with_partial_warcinfo(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path)
    write_all(w, exchanges(1))
    w.close()
    path = w.files[0]
    os.truncate(path, 30)
    assert WarcWriter.repair(tmp_path) == [(path, 30)]
    assert not os.path.exists(path)


def test_repair_other_prefix_untouched(tmp_path: Path) -> None:
    w = WarcWriter(tmp_path, prefix="other")
    write_all(w, exchanges(1))
    w.close()
    size = os.path.getsize(w.files[0])
    os.truncate(w.files[0], size - 5)
    assert WarcWriter.repair(tmp_path) == []
    assert WarcWriter.repair(tmp_path, prefix="other") != []


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        WarcWriter(tmp_path, max_bytes=0)
    with pytest.raises(ValueError):
        WarcWriter(tmp_path, prefix="a/b")
    with pytest.raises(ValueError):
        WarcWriter(tmp_path, compression_level=0)


# -- gzip members built here (CPU work, issue 4) ------------------------------------------


@pytest.mark.parametrize("stored", [0, 1, 4, 100, 5000, 5004])
def test_gzip_member_round_trips(stored: int) -> None:
    from skitter.export.warc_record import _gzip_member

    data = b"WARC/1.1\r\n" + b"header: value\r\n" * 50 + os.urandom(4990) + b"\r\n\r\n"
    member = _gzip_member(data, 6, stored)
    d = zlib.decompressobj(wbits=31)
    assert d.decompress(member) == data
    assert d.eof and d.unused_data == b""
    assert gzip.decompress(member) == data


@pytest.mark.parametrize("stored", [65535, 65536, 65539, 131070, 131071, 200004])
def test_gzip_member_stored_tail_of_several_blocks(stored: int) -> None:
    """A stored tail past one stored block's 65,535 bytes (RFC 1951 §3.2.4) is split into
    blocks, the last one final: the member inflates to the same bytes, with nothing after."""
    from skitter.export.warc_record import _gzip_member

    data = b"WARC/1.1\r\n" + b"header: value\r\n" * 50 + os.urandom(200_000) + b"\r\n\r\n"
    member = _gzip_member(data, 6, stored)
    d = zlib.decompressobj(wbits=31)
    assert d.decompress(member) == data
    assert d.eof and d.unused_data == b""
    assert gzip.decompress(member) == data
    # random bytes: stored or deflated, the member is barely larger than the data
    assert len(member) < len(data) + 1000


def _fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools
    import uuid

    from skitter.export import warc

    counter = itertools.count()

    def pair() -> tuple[str, str]:
        return tuple(f"<urn:uuid:{uuid.UUID(int=next(counter))}>" for _ in "ab")  # type: ignore[return-value]

    monkeypatch.setattr(warc, "record_id_pair", pair)


@pytest.mark.parametrize("payload_kb", [3, 200])
def test_stored_payload_records_are_the_same_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload_kb: int
) -> None:
    """A content-encoded body is stored, not deflated again: the uncompressed WARC bytes are
    those FastWARC's own gzip path writes, and the file is no larger."""
    import random

    from skitter.export import warc

    body = random.Random(payload_kb).randbytes(payload_kb * 500).hex().encode()
    # gzip output: incompressible
    raw = gzip.compress(body, mtime=0)
    headers = (("Content-Type", "text/html"), ("Content-Encoding", "gzip"))
    resp = _with_req(Response("http://example.test/", 200, "OK", headers, body, raw))
    plain = _with_req(Response("http://example.test/p", 200, "OK", (), body, body))

    def write(where: Path) -> bytes:
        return _checked_warc(monkeypatch, WarcWriter(where, clock=lambda: T0), [resp, plain] * 3)

    ours = write(tmp_path / "ours")
    monkeypatch.setattr(warc, "_FASTWARC_GZIP_MIN_BYTES", 0)  # every record via FastWARC
    monkeypatch.setattr(warc, "_body_is_compressed", lambda response: False)
    theirs = write(tmp_path / "theirs")
    assert gzip.decompress(ours) == gzip.decompress(theirs)
    assert len(ours) <= len(theirs) * 1.01 + 20 * 13  # (13 members: a few bytes each)
    records = list(warcio_records(str(tmp_path / "ours" / os.listdir(tmp_path / "ours")[0])))
    assert [r[2] for r in records if r[0] == "response"] == [raw, body] * 3


def _checked_warc(
    monkeypatch: pytest.MonkeyPatch, w: WarcWriter, exchanges: list[Response]
) -> bytes:
    """The bytes of ``w``'s one WARC file after writing ``exchanges`` with fixed record ids,
    checked by ``warcio check``."""
    _fixed_ids(monkeypatch)
    for resp in exchanges:
        w.write_exchange(resp.url, resp)
    w.close()
    check = warcio_check(w.files[0])
    assert check.returncode == 0, check.stdout + check.stderr
    return Path(w.files[0]).read_bytes()


def test_body_is_compressed() -> None:
    from skitter.export.warc_record import _body_is_compressed

    def resp(*headers: tuple[str, str]) -> Response:
        return Response("http://example.test/", 200, headers=headers)

    assert _body_is_compressed(resp(("Content-Encoding", "gzip")))
    assert _body_is_compressed(resp(("content-encoding", "identity, BR")))
    assert not _body_is_compressed(resp(("Content-Encoding", "identity")))
    assert not _body_is_compressed(resp(("Content-Type", "text/html")))


@pytest.mark.parametrize("level", [1, 2, 3])
def test_isal_levels_write_valid_warcs_of_the_same_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: int
) -> None:
    """--warc-level 1-3 deflate with ISA-L: the same uncompressed records as level 6, one
    gzip member each (warcio reads and checks them)."""
    body = b"<html>" + b"<p>text served uncompressed, deflated in the WARC</p>" * 2000
    gz = gzip.compress(body, mtime=0)
    plain = _with_req(Response("http://example.test/p", 200, "OK", (), body, body))
    enc = _with_req(
        Response("http://example.test/", 200, "OK", (("Content-Encoding", "gzip"),), body, gz)
    )

    def write(where: Path, lvl: int) -> bytes:
        w = WarcWriter(where, clock=lambda: T0, compression_level=lvl)
        return _checked_warc(monkeypatch, w, [plain, enc] * 2)

    fast, usual = write(tmp_path / "fast", level), write(tmp_path / "usual", 6)
    assert gzip.decompress(fast) == gzip.decompress(usual)
    assert fast != usual  # another deflate (sizes: see bench/README.md; not asserted here)
    records = list(warcio_records(str(tmp_path / "fast" / os.listdir(tmp_path / "fast")[0])))
    assert [r[2] for r in records if r[0] == "response"] == [body, gz] * 2
