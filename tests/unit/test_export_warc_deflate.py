"""How WARC records are deflated (issue 16): large compressible records whole, by libdeflate
(:func:`skitter.export.warc_record.gzip_whole`); records over
:data:`~skitter.export.warc_record.WHOLE_DEFLATE_MAX_BYTES` as a stream (FastWARC); the
same uncompressed records either way, each its own gzip member, warcio-valid."""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest

import skitter.export.warc as warc_mod
from skitter.export.warc import WarcWriter
from skitter.export.warc_record import WHOLE_DEFLATE_MAX_BYTES, gzip_whole, sha1_label
from skitter.models import Response
from tests.warc_check import warcio_check

REQ = (("Host", "example.test"), ("User-Agent", "Skitter/0.1"))
HTML = b"".join(
    b"<tr><td><a href='/doc/%d.html'>item %d</a></td><td>text of row %d</td></tr>\n" % (i, i, i)
    for i in range(400)
)


def _members(path: str) -> list[tuple[bytes, int]]:
    """(uncompressed bytes, compressed length) of each gzip member of ``path``."""
    data = Path(path).read_bytes()
    out = []
    while data:
        d = zlib.decompressobj(wbits=31)
        member = d.decompress(data)
        assert d.eof
        out.append((member, len(data) - len(d.unused_data)))
        data = d.unused_data
    return out


def _plain(url: str, body: bytes) -> Response:
    return Response(
        url, 200, "OK", (("Content-Type", "text/html"),), body, body, request_headers=REQ
    )


def test_gzip_whole_is_one_member_of_the_pieces_at_zlib_sizes() -> None:
    pieces = (b"WARC/1.1\r\n", memoryview(b"HTTP/1.1 200 OK\r\n\r\n"), HTML, b"\r\n\r\n")
    whole = b"".join(pieces)
    for level in (4, 6, 9):
        out = gzip_whole(pieces, level)
        assert out is not None
        d = zlib.decompressobj(wbits=31)
        assert d.decompress(bytes(out)) == whole
        assert d.eof and d.unused_data == b""
        # libdeflate's level n is about as small as zlib's (on rust-doc pages: smaller)
        assert len(out) <= len(gzip.compress(whole, level, mtime=0)) * 1.02
    assert gzip.decompress(bytes(gzip_whole([HTML], 6) or b"")) == HTML  # one piece: no join


def test_large_records_deflated_whole_and_larger_ones_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At level 6 a 30 kB page goes to gzip_whole in one call, a page over the cap is
    streamed (FastWARC's GzipWriter, made only then); the file holds the same records either
    way, each its own member, with the right digests (warcio check)."""
    calls: list[int] = []

    def spy(pieces: Sequence[bytes | memoryview], level: int) -> bytes | bytearray | None:
        calls.append(sum(map(len, pieces)))
        return gzip_whole(pieces, level)

    monkeypatch.setattr(warc_mod, "gzip_whole", spy)
    big = HTML * (WHOLE_DEFLATE_MAX_BYTES // len(HTML) + 2)
    page = HTML[:30_000]
    w = WarcWriter(tmp_path, clock=lambda: 1_714_564_800.0)
    w.write_exchange("http://example.test/page", _plain("x", page))
    assert w._gz is None  # no streaming compressor (≈ 0.5 MB of state) until needed
    w.write_exchange("http://example.test/big", _plain("x", big))
    assert w._gz is not None
    w.write_exchange("http://example.test/page2", _plain("x", page))
    w.close()
    # the warcinfo and requests are small (gzip_member); two page responses went whole
    assert len(calls) == 2 and all(30_000 < n < 31_000 for n in calls)
    warcio_check(w.files[0])
    members = _members(w.files[0])
    assert len(members) == 1 + 2 * 3
    for i, body in ((2, page), (4, big), (6, page)):
        record, _ = members[i]
        assert record.endswith(body + b"\r\n\r\n")
        digest = sha1_label(hashlib.sha1(body).digest()).encode()
        assert b"WARC-Payload-Digest: " + digest + b"\r\n" in record
    # deflated, not stored: HTML shrinks at least fivefold either way
    assert members[2][1] * 5 < len(members[2][0]) and members[4][1] * 5 < len(members[4][0])


def test_without_libdeflate_records_are_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gzip_whole gives None (libdeflate missing): the record is streamed instead."""
    monkeypatch.setattr(warc_mod, "gzip_whole", lambda pieces, level: None)
    w = WarcWriter(tmp_path)
    w.write_exchange("http://example.test/page", _plain("x", HTML))
    w.close()
    warcio_check(w.files[0])
    assert _members(w.files[0])[2][0].endswith(HTML + b"\r\n\r\n")


def test_small_parts_at_levels_4_to_9_are_isal_level_2() -> None:
    """Under 4 KiB to deflate (a record's WARC and HTTP headers) ISA-L's level 2 at every
    level 4-9: the member's deflate data is exactly ISA-L's."""
    from isal import isal_zlib

    from skitter.export.warc_record import SMALL_DEFLATE_LEVEL, gzip_member

    head = b"WARC/1.1\r\nWARC-Type: request\r\n" + b"X-Field: some value here\r\n" * 40
    comp = isal_zlib.compressobj(SMALL_DEFLATE_LEVEL, isal_zlib.DEFLATED, -15, 1)
    expected = comp.compress(head) + comp.flush()
    assert SMALL_DEFLATE_LEVEL == 2
    for level in (4, 6, 9):
        member = b"".join(gzip_member([head], level))
        assert member[10:-8] == expected
        assert gzip.decompress(member) == head
