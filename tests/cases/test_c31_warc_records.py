"""C31 — WARC records as archive tools read them: transfer vs content coding, digests,
target URIs, raw header bytes (WARC 1.1 §5.9, §6.3.2; RFC 3986 target URIs)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import zlib
from pathlib import Path

from fastwarc.warc import ArchiveIterator as FastIterator
from warcio.archiveiterator import ArchiveIterator

from tests.cases._util import run
from tests.integration.rawserver import RawServer, chunked, head, response
from tests.warc_check import warcio_check

WA = "wa.example.test"
HREFS_RAW = ["/w/a|b^c`d{e}", "/w/ün i?q=a|b&r=é z"]


def gzip_page() -> tuple[bytes, bytes]:
    """(HTML, its gzip G): a page linking /from-gzip, G at least 700 bytes."""
    words = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(60)]
    text = " ".join(words)
    page = f'<!doctype html><html><body><a href="/from-gzip">g</a><p>{text}</p></body></html>'
    g = gzip.compress(page.encode(), mtime=0)
    assert len(g) >= 700
    return page.encode(), g


def split(data: bytes, n: int) -> list[bytes]:
    step = -(-len(data) // n)
    parts = [data[i : i + step] for i in range(0, len(data), step)]
    assert len(parts) == n and all(parts)
    return parts


def members(path: Path) -> list[bytes]:
    """The decompressed gzip members of ``path``, one by one."""
    data = path.read_bytes()
    out = []
    while data:
        d = zlib.decompressobj(31)
        out.append(d.decompress(data))
        assert d.eof
        data = d.unused_data
    return out


async def test_c31_warc_records_as_archive_tools_read_them(raw: RawServer, tmp_path: Path) -> None:
    html, g = gzip_page()
    cg = [
        ("Content-Type", "text/html"),
        ("Content-Encoding", "gzip"),
        ("Transfer-Encoding", "chunked"),
    ]
    raw.route("/cg-3", head(200, cg) + chunked(*split(g, 3)), host=WA)
    raw.route("/cg-7", head(200, cg) + chunked(*split(g, 7)), host=WA)
    raw.route(
        "/h10",
        b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<!doctype html><p>old server</p>",
        host=WA,
    )
    raw.route(
        "/latin1",
        response(
            200,
            [
                ("Content-Type", "text/html"),
                ("Content-Disposition", b'inline; filename="caf\xe9.html"'),
            ],
            b"<p>c</p>",
        ),
        host=WA,
    )
    raw.route(
        "/ctl",
        response(
            200, [("Content-Type", "text/html"), ("Set-Cookie", b"a=b\x01c; Path=/")], b"<p>c</p>"
        ),
        host=WA,
    )
    ok = response(200, [("Content-Type", "text/html")], b"<p>ok</p>")
    raw.route("/from-gzip", ok, host=WA)
    raw.route("/w/a%7Cb%5Ec%60d%7Be%7D", ok, host=WA)
    raw.route("/w/%C3%BCn%20i", ok, host=WA)
    links = ["/cg-3", "/cg-7", "/h10", *HREFS_RAW, "/latin1", "/ctl"]
    seed = "<!doctype html><meta charset=utf-8>" + "".join(f'<a href="{h}">x</a>' for h in links)
    raw.route(
        "/", response(200, [("Content-Type", "text/html; charset=utf-8")], seed.encode()), host=WA
    )
    out = tmp_path / "out"
    res = await run(raw, out, [raw.url("/", WA)])
    assert res.record(raw.url("/cg-3", WA))["status"] == 200
    assert len(raw.requests("/from-gzip", WA)) == 1

    warcs = sorted(out.glob("*.warc.gz"))
    assert warcs
    assert "Replacing" not in warcio_check(*warcs)
    records = []
    for w in warcs:
        with open(w, "rb") as fh:
            for r in ArchiveIterator(fh):
                block = r.content_stream().read() if r.rec_type == "response" else b""
                records.append((r.rec_type, r.rec_headers, r.http_headers, block))
        with open(w, "rb") as fh:
            fast = [r.record_type for r in FastIterator(fh, parse_http=True)]
        # every record is its own gzip member, and FastWARC reads them all too
        n = sum(1 for _ in members(w))
        assert len(fast) == n
    responses = {
        h.get_header("WARC-Target-URI"): (h, hh, b) for t, h, hh, b in records if t == "response"
    }
    requests = {h.get_header("WARC-Target-URI"): h for t, h, _, _ in records if t == "request"}

    digest = "sha1:" + base64.b32encode(hashlib.sha1(g).digest()).decode()
    for path in ("/cg-3", "/cg-7"):
        rh, http, payload = responses[raw.url(path, WA)]
        assert rh.get_header("WARC-Payload-Digest") == digest, path
        assert http.get_header("Content-Encoding") == "gzip"
        te = http.get_header("Transfer-Encoding")
        assert te is None or "chunked" not in te.lower()
        assert payload == html, path  # warcio removes the content coding
    rh, http, payload = responses[raw.url("/h10", WA)]
    assert http.protocol == "HTTP/1.0" and http.statusline == "200 OK"
    assert payload == b"<!doctype html><p>old server</p>"

    bad = set(' |^`{}<>"')
    uris = list(responses) + list(requests)
    for uri in uris:
        assert uri.isascii() and not bad & set(uri), uri
    for target in ("/w/a%7Cb%5Ec%60d%7Be%7D", "/w/%C3%BCn%20i?q=a%7Cb&r=%C3%A9%20z"):
        uri = raw.url(target, WA)
        assert uri in responses and uri in requests, uri
        assert requests[uri].get_header("WARC-Concurrent-To") == responses[uri][0].get_header(
            "WARC-Record-ID"
        )

    data = b"".join(gzip.decompress(w.read_bytes()) for w in warcs)
    assert b'filename="caf\xe9.html"' in data and b"Set-Cookie: a=b\x01c; Path=/" in data
