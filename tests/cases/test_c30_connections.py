"""C30 — keep-alive connections the server already closed, 1xx interim responses,
close-delimited bodies.

The raw server answers one request per TCP connection: a second request arriving on a kept-alive
connection is read and the socket closed without a byte (RFC 9112 §9.3.1: the client retries an
idempotent request on a new connection, silently). With ``retries 0`` every page must still be
a good page fetched in one attempt (no retry budget, so no back-off either). Runs under aiohttp's
C and pure-Python parsers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cases._parsers import expect_parser, run_under_pure_python
from tests.cases._util import run
from tests.integration.rawserver import RawConnection, RawRequest, RawServer, response

KA = "ka.example.test"


def html(link: str, pad: int = 0) -> bytes:
    text = f'<!doctype html><html><body><p>{"x" * pad}</p><a href="{link}">next</a></body></html>'
    return text.encode()


class OnePerConnection:
    """Serves each connection's first request; a later one is read and the socket closed."""

    def __init__(self) -> None:
        self.served: set[int] = set()
        self.dropped: list[RawRequest] = []

    def route(self, server: RawServer, path: str, data: list[bytes | float]) -> None:
        async def handler(req: RawRequest, conn: RawConnection) -> None:
            if req.conn in self.served:
                self.dropped.append(req)
                conn.keep_alive = False  # closed without sending a byte
                return
            self.served.add(req.conn)
            for step in data:
                if isinstance(step, bytes):
                    await conn.write(step)
                else:
                    await conn.sleep(step)
            conn.keep_alive = b"Connection: close" not in data[0] and b"HTTP/1.0" not in data[0]

        server.route(path, handler, host=KA, keep_alive=True)


def ka(status: int, body: bytes, extra: list[tuple[str, str]] | None = None) -> bytes:
    hs = [("Content-Type", "text/html"), ("Connection", "keep-alive"), *(extra or [])]
    return response(status, hs, body)


@pytest.mark.slow
async def test_c30_stale_keep_alive_interim_and_close_delimited(
    raw: RawServer, tmp_path: Path
) -> None:
    expect_parser()
    srv = OnePerConnection()
    paths = [f"/ka/{n}" for n in range(1, 6)]
    paths += ["/ka204", "/early", "/two103", "/cont", "/h10", "/close11"]
    seed = "".join(f'<a href="{p}">{p}</a>' for p in paths).encode()
    for n in range(1, 6):
        srv.route(raw, f"/ka/{n}", [ka(200, b"<!doctype html><p>page</p>")])
    srv.route(
        raw,
        "/ka204",
        [b"HTTP/1.1 204 No Content\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"],
    )
    early_hint = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
    srv.route(raw, "/early", [early_hint, 0.05, ka(200, html("/from-early"))])
    srv.route(raw, "/two103", [early_hint + early_hint + ka(200, html("/from-two103"))])
    srv.route(raw, "/cont", [b"HTTP/1.1 100 Continue\r\n\r\n" + ka(200, html("/from-cont"))])
    prefix, suffix = b"<!doctype html><p>", b'</p><a href="/from-h10">next</a>'
    h10_body = prefix + b"y" * (3000 - len(prefix) - len(suffix)) + suffix
    srv.route(raw, "/h10", [b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + h10_body])
    srv.route(
        raw,
        "/close11",
        [
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n"
            + html("/from-close11")
        ],
    )
    for path in (
        "/after204",
        "/from-early",
        "/from-two103",
        "/from-cont",
        "/from-h10",
        "/from-close11",
    ):
        srv.route(raw, path, [ka(200, b"<p>leaf</p>")])
    # a 204 has no body to link from: the seed links /after204, to be fetched after it
    srv.route(raw, "/ka/", [ka(200, seed + b'<a href="/after204">a</a>')])
    out = tmp_path / "out"
    res = await run(raw, out, [raw.url("/ka/", KA)], pol_retries=0, pol_delay_s=0.3)

    expected = [
        "/ka/",
        *paths,
        "/after204",
        "/from-early",
        "/from-two103",
        "/from-cont",
        "/from-h10",
        "/from-close11",
    ]
    for path in expected:
        rec = res.record(raw.url(path, KA))
        status = 204 if path == "/ka204" else 200
        assert (rec["status"], rec["error"], rec["attempts"]) == (status, None, 1), (path, rec)
    assert srv.dropped  # kept-alive connections were reused, and the server dropped them
    h10 = res.record(raw.url("/h10", KA))
    assert h10["bytes"] == 3000
    # each URL was answered once; a request the server dropped was sent again on a new
    # connection, and only after a connection that sent nothing
    for path in expected:
        reqs = raw.requests(path, KA)
        assert 1 <= len(reqs) <= 2, path
        assert len({r.conn for r in reqs}) == len(reqs), path
        if len(reqs) == 2:
            assert reqs[0] in srv.dropped and reqs[1] not in srv.dropped, path

    # WARC: the final 200 with its own headers (nothing inherited from a 103); /h10 whole
    from warcio.archiveiterator import ArchiveIterator

    records = {}
    for w in sorted(out.glob("*.warc.gz")):
        with open(w, "rb") as fh:
            for r in ArchiveIterator(fh):
                if r.rec_type == "response":
                    uri = r.rec_headers.get_header("WARC-Target-URI")
                    records[uri] = (r.http_headers, r.content_stream().read())
    for path in ("/early", "/two103", "/cont"):
        headers, _ = records[raw.url(path, KA)]
        assert headers.get_statuscode() == "200", path
        assert headers.get_header("Link") is None, path
    headers, payload = records[raw.url("/h10", KA)]
    assert headers.protocol == "HTTP/1.0" and headers.get_statuscode() == "200"
    assert payload == h10_body


@pytest.mark.slow
def test_c30_under_the_pure_python_parser() -> None:
    run_under_pure_python(f"{__file__}::test_c30_stale_keep_alive_interim_and_close_delimited")
