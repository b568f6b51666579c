"""C29 — response headers browsers accept: whitespace before the colon, duplicate identical
Content-Length, folding, bare LF, control and Latin-1 bytes; differing lengths still refused.

aiohttp's C and pure-Python parsers differ here (the C one refuses paths 1-3, the Python one
takes differing lengths, one silently winning); Skitter rewrites header sections before
either sees them (:mod:`skitter.fetch.lenient`), and this test runs under both.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from tests.cases._parsers import expect_parser, run_under_pure_python
from tests.cases._util import run
from tests.integration.rawserver import RawServer, response
from tests.warc_check import warcio_check

HX = "hx.example.test"


def body(n: int) -> bytes:
    return f'<!doctype html><a href="/ok-{n}">n</a>'.encode()


def heads() -> dict[str, bytes]:
    """Path -> the whole response, raw (cases.md C29 inputs 1-10)."""

    def std(
        n: int,
        extra: list[bytes],
        status: bytes = b"HTTP/1.1 200 OK",
        sep: bytes = b"\r\n",
        cl: bool = True,
    ) -> bytes:
        b = body(n)
        lines = [status, b"Content-Type: text/html", *extra]
        if cl:
            lines.append(b"Content-Length: %d" % len(b))
        return sep.join(lines) + sep + sep + b

    length = len(body(1))  # every B has the same length
    b10 = body(10)
    return {
        "/sp-colon": std(1, [b"X-Cache-Status : HIT"]),
        "/dup-cl": std(2, [b"Content-Length: %d" % length]),
        "/list-cl": std(3, [b"Content-Length: %d, %d" % (length, length)], cl=False),
        "/obs-fold": std(4, [b"X-Long: part one\r\n  part two"]),
        "/bare-lf": std(5, [], sep=b"\n"),
        "/ctl-cookie": std(6, [b"Set-Cookie: sid=ab\x01cd; Path=/"]),
        "/latin1": std(7, [b'Content-Disposition: attachment; filename="r\xe9sum\xe9.html"']),
        "/no-reason": std(8, [], status=b"HTTP/1.1 200"),
        "/diff-cl": std(9, [b"Content-Length: 12"]),
        "/cl-te": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 10\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(b10), b10),
    }


async def test_c29_lenient_header_sections(raw: RawServer, tmp_path: Path) -> None:
    expect_parser()
    paths = heads()
    for path, data in paths.items():
        raw.route(path, data, host=HX, keep_alive=True)
    ok = response(200, [("Content-Type", "text/html")], b"<p>ok</p>")
    for n in range(1, 11):
        raw.route(f"/ok-{n}", ok, host=HX, keep_alive=True)
    raw.route("/tail", ok, host=HX, keep_alive=True)
    links = "".join(f'<a href="{p}">{p}</a>' for p in [*paths, "/tail"])
    seed = response(200, [("Content-Type", "text/html")], links.encode())
    raw.route("/", seed, host=HX, keep_alive=True)
    out = tmp_path / "out"
    res = await run(raw, out, [raw.url("/", HX)], pol_retries=1)

    for n, path in enumerate(list(paths)[:8], start=1):
        rec = res.record(raw.url(path, HX))
        assert (rec["status"], rec["error"], rec["attempts"]) == (200, None, 1), (path, rec)
        assert len(raw.requests(f"/ok-{n}", HX)) == 1, path
    diff = res.record(raw.url("/diff-cl", HX))
    assert diff["error"] == "protocol" and diff["status"] is None
    assert "differing Content-Length" in diff["error_detail"]
    assert not raw.requests("/ok-9", HX)
    clte = res.record(raw.url("/cl-te", HX))
    assert (clte["status"], clte["error"]) in ((200, None), (None, "protocol"))
    assert len(raw.requests("/tail", HX)) == 1
    # the request after a refused framing never shares its connection
    for path in ("/diff-cl", "/cl-te"):
        bad = raw.requests(path, HX)
        assert bad
        for req in bad:
            later = [r for r in raw.log if r.time > req.time]
            assert all(r.conn != req.conn for r in later), path

    # WARC: the header bytes as received, and warcio reads and checks every record
    warcs = sorted(out.glob("*.warc.gz"))
    assert warcs
    data = b"".join(gzip.decompress(w.read_bytes()) for w in warcs)
    for raw_bytes in (
        b"X-Cache-Status : HIT\r\n",
        b"X-Long: part one\r\n  part two\r\n",
        b"Set-Cookie: sid=ab\x01cd; Path=/\r\n",
        b'filename="r\xe9sum\xe9.html"',
        b"HTTP/1.1 200\r\n",
        b"HTTP/1.1 200 OK\nContent-Type: text/html\nContent-Length: 36\n\n",
    ):
        assert raw_bytes in data, raw_bytes
    warcio_check(*warcs)
    # both archive readers read every record, HTTP headers included
    from fastwarc.warc import ArchiveIterator as FastIterator
    from warcio.archiveiterator import ArchiveIterator

    for w in warcs:
        with open(w, "rb") as fh:
            slow = [
                (r.rec_headers.get_header("WARC-Target-URI"), r.http_headers.get_statuscode())
                for r in ArchiveIterator(fh)
                if r.rec_type == "response"
            ]
        with open(w, "rb") as fh:
            fast = [
                (r.headers.get("WARC-Target-URI"), str(r.http_headers.status_code))
                for r in FastIterator(fh, parse_http=True)
                if r.headers.get("WARC-Type") == "response"
            ]
        assert slow == fast and len(slow) >= 10


def test_c29_under_the_pure_python_parser() -> None:
    run_under_pure_python(f"{__file__}::test_c29_lenient_header_sections")
