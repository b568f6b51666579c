"""Kind 1 of issue 10 — Content-Encoding that lies.

End to end through the crawler on a raw-bytes server: a body labelled gzip/deflate/br/zstd
that is not encoded at all is used as it is (noted in ``error_detail``); a stream damaged in
the middle stays ``protocol``; a text body encoded twice but labelled once is decoded twice; a
``.gz`` file served as ``application/gzip`` stays as sent; a 3xx is followed whatever its body.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

from tests.cases._util import run
from tests.integration.rawserver import RawConnection, RawRequest, RawServer, head, response

H = "ce.example.test"


def page(link: str, pad: int = 0) -> bytes:
    filler = "".join(f"<p>line {i} of the page</p>" for i in range(pad))
    return f'<!doctype html><html><body><a href="{link}">x</a>{filler}</body></html>'.encode()


def html_resp(body: bytes, coding: str | None, ctype: str = "text/html") -> bytes:
    hs = [("Content-Type", ctype)]
    if coding:
        hs.append(("Content-Encoding", coding))
    return response(200, hs, body)


async def stalled_redirect(req: RawRequest, conn: RawConnection) -> None:
    """A 302 whose body stops after 10 of 1000 bytes, the connection left open."""
    await conn.write(head(302, [("Location", "/from-redir-3"), ("Content-Length", "1000")]))
    await conn.write(b"<p>moved, ")
    for _ in range(600):  # bounded: until the client gives up on the body
        if conn.peer_closed():
            return
        await conn.sleep(0.05)


async def test_k1_content_encoding_that_lies(raw: RawServer, tmp_path: Path) -> None:
    ok = response(200, [("Content-Type", "text/html")], b"<p>ok</p>")
    damaged = bytearray(gzip.compress(page("/from-mid", pad=400)))
    damaged[len(damaged) // 2 : len(damaged) // 2 + 16] = b"\xff" * 16
    gz_file = gzip.compress(b"a tarball, say " * 100)
    routes = {
        "/plain-gzip": html_resp(page("/from-plain-gzip"), "gzip"),
        "/plain-deflate": html_resp(page("/from-plain-deflate"), "deflate"),
        "/plain-br": html_resp(page("/from-plain-br"), "br"),
        "/plain-zstd": html_resp(page("/from-plain-zstd"), "zstd"),
        "/mid": html_resp(bytes(damaged), "gzip"),
        "/double": html_resp(gzip.compress(gzip.compress(page("/from-double"))), "gzip"),
        "/file.gz": html_resp(gz_file, "gzip", "application/gzip"),
        # a redirect whose body is damaged gzip, and one whose body is cut short
        "/redir-bad-body": response(
            301,
            [("Location", "/from-redir-1"), ("Content-Encoding", "gzip")],
            b"\x1f\x8b\x08\x00" + b"\xff" * 60,
        ),
        "/redir-stall": stalled_redirect,
        "/redir-cut-body": [
            head(302, [("Location", "/from-redir-2"), ("Content-Length", "1000")]),
            b"<p>moved</p>",
        ],
    }
    for path, resp in routes.items():
        raw.route(path, resp, host=H)
    for path in (
        "/from-plain-gzip",
        "/from-plain-deflate",
        "/from-plain-br",
        "/from-plain-zstd",
        "/from-mid",
        "/from-double",
        "/from-redir-1",
        "/from-redir-2",
        "/from-redir-3",
    ):
        raw.route(path, ok, host=H)
    seed = ("<!doctype html>" + "".join(f'<a href="{p}">{p}</a>' for p in routes)).encode()
    raw.route("/", response(200, [("Content-Type", "text/html")], seed), host=H)
    res = await run(raw, tmp_path / "out", [raw.url("/", H)], pol_retries=1)

    for coding in ("gzip", "deflate", "br", "zstd"):
        rec = res.record(raw.url(f"/plain-{coding}", H))
        assert rec["status"] == 200 and rec["error"] is None and rec["attempts"] == 1
        assert rec["error_detail"] == (
            f"Content-Encoding {coding} not applied: the body is not {coding} data; used as sent"
        )
        assert rec["bytes"] == len(page(f"/from-plain-{coding}"))
        assert len(raw.requests(f"/from-plain-{coding}", H)) == 1
    mid = res.record(raw.url("/mid", H))
    assert mid["error"] == "protocol" and mid["status"] is None
    assert mid["error_detail"].startswith("content decoding failed")
    assert not raw.requests("/from-mid", H)
    double = res.record(raw.url("/double", H))
    assert double["status"] == 200 and double["error"] is None
    assert double["sha1"] == hashlib.sha1(page("/from-double")).hexdigest()
    assert len(raw.requests("/from-double", H)) == 1
    gz = res.record(raw.url("/file.gz", H))
    assert gz["status"] == 200 and gz["error"] is None and gz["error_detail"] is None
    assert gz["bytes"] == len(gz_file) and gz["sha1"] == hashlib.sha1(gz_file).hexdigest()
    for n, path in ((1, "/redir-bad-body"), (2, "/redir-cut-body"), (3, "/redir-stall")):
        rec = res.record(raw.url(path, H))
        assert rec["status"] == 200 and rec["error"] is None, rec
        assert rec["final_url"] == raw.url(f"/from-redir-{n}", H)
        assert len(raw.requests(path, H)) == 1
        assert len(raw.requests(f"/from-redir-{n}", H)) == 1
