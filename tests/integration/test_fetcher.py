"""AiohttpFetcher and SkitterResolver against real servers on 127.0.0.1 (no HTTP mocks).

Cases: C13 (decompression bomb), C15 (truncated bodies, split chunk terminator),
C16 (raw bytes in Location), C19 (slow-drip / never-closing servers).
"""

from __future__ import annotations

import asyncio
import gzip
import resource
import shutil
import socket
import ssl
import subprocess
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import brotli
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer
from backports import zstd

from skitter.errors import BodyTooLarge, ConnectError, FetchTimeout, ProtocolError
from skitter.fetch import AiohttpFetcher, Fetcher, SkitterResolver
from skitter.models import Request
from skitter.settings import FetchSettings
from tests.integration.rawserver import RawConnection, RawRequest, RawServer, drip, head, response

MiB = 1024 * 1024
PAGE = b"<html><head><title>t</title></head><body>" + b"<p>hello</p>" * 500 + b"</body></html>"

# ----------------------------------------------------------------------------- fixtures


def _settings(**kw: object) -> FetchSettings:
    base: dict[str, object] = {
        "timeout_s": 5.0,
        "read_timeout_s": 2.0,
        "connect_timeout_s": 2.0,
        "allow_private": True,
        "user_agent": "TestCrawler/1.0 (+https://www.example.test/bot)",
    }
    base.update(kw)
    return FetchSettings(**base)  # type: ignore[arg-type]


@pytest.fixture
async def raw() -> AsyncIterator[RawServer]:
    async with RawServer() as srv:
        yield srv


async def _echo(request: web.Request) -> web.Response:
    lines = [f"{k}: {v}" for k, v in request.headers.items()]
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return web.Response(
        text="\n".join(lines),
        headers={"X-Method": request.method, "X-Peer-Port": str(peer[1] if peer else "")},
    )


async def _set_cookie(request: web.Request) -> web.Response:
    resp = web.Response(text="set")
    resp.set_cookie("session", "abc123", path="/")
    return resp


def _encoded(name: str, data: bytes) -> tuple[str, bytes]:
    if name == "gzip":
        return "gzip", gzip.compress(data, mtime=0)
    if name == "x-gzip":
        return "x-gzip", gzip.compress(data, mtime=0)
    if name == "deflate-zlib":
        return "deflate", zlib.compress(data)
    if name == "deflate-raw":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return "deflate", c.compress(data) + c.flush()
    if name == "br":
        return "br", brotli.compress(data)
    if name == "zstd":
        return "zstd", zstd.compress(data)
    if name == "gzip, br":
        return "gzip, br", brotli.compress(gzip.compress(data, mtime=0))
    if name == "identity":
        return "identity", data
    raise AssertionError(name)


CODINGS = ["gzip", "x-gzip", "deflate-zlib", "deflate-raw", "br", "zstd", "gzip, br", "identity"]


async def _encoded_page(request: web.Request) -> web.Response:
    ce, body = _encoded(request.match_info["name"].replace("+", ", "), PAGE)
    return web.Response(body=body, headers={"Content-Encoding": ce, "Content-Type": "text/html"})


async def _big_chunked(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    for _ in range(20):
        await resp.write(b"x" * 1000)
    await resp.write_eof()
    return resp


async def _status(request: web.Request) -> web.Response:
    return web.Response(status=int(request.match_info["code"]), text="status page")


@pytest.fixture
async def web_server() -> AsyncIterator[TestServer]:
    app = web.Application()
    app.router.add_route("*", "/echo", _echo)
    app.router.add_get("/set-cookie", _set_cookie)
    app.router.add_get("/enc/{name}", _encoded_page)
    app.router.add_get("/big-chunked", _big_chunked)
    app.router.add_get("/status/{code}", _status)
    app.router.add_get("/page", _page)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


async def _page(_request: web.Request) -> web.Response:
    return web.Response(body=PAGE, content_type="text/html")


@pytest.fixture
async def fetcher() -> AsyncIterator[AiohttpFetcher]:
    f = AiohttpFetcher(_settings(), concurrency=16, host_concurrency=4)
    try:
        yield f
    finally:
        await f.aclose()


def _url(server: TestServer, path: str) -> str:
    return str(server.make_url(path))


# ----------------------------------------------------------------------------- basics


async def test_protocol_conformance(fetcher: AiohttpFetcher) -> None:
    assert isinstance(fetcher, Fetcher)


async def test_headers_sent_and_response_fields(web_server: TestServer) -> None:
    settings = _settings(headers=(("X-Custom", "one"), ("Accept-Language", "fr")))
    async with AiohttpFetcher(settings, concurrency=4, host_concurrency=2) as f:
        r = await f.fetch(Request(_url(web_server, "/echo"), referer="http://ref.test/from"))
    got = dict(line.split(": ", 1) for line in r.body.decode().splitlines())
    assert got["User-Agent"] == "TestCrawler/1.0 (+https://www.example.test/bot)"
    assert got["Accept-Encoding"] == "gzip, deflate, br, zstd"
    assert got["X-Custom"] == "one"
    assert got["Accept-Language"] == "fr"
    assert got["Referer"] == "http://ref.test/from"
    assert "text/html" in got["Accept"]
    sent = dict(r.request_headers)
    assert sent["User-Agent"] == got["User-Agent"]
    assert sent["Referer"] == "http://ref.test/from"
    assert sent["X-Custom"] == "one"
    assert r.status == 200 and r.reason == "OK" and r.http_version == "1.1"
    assert r.peer_ip == "127.0.0.1"
    assert r.elapsed_s > 0
    assert r.url == _url(web_server, "/echo")


async def test_settings_headers_override_defaults(web_server: TestServer) -> None:
    settings = _settings(headers=(("Accept", "text/plain"), ("user-agent", "Other/2")))
    async with AiohttpFetcher(settings, concurrency=4, host_concurrency=2) as f:
        r = await f.fetch(Request(_url(web_server, "/echo")))
    got = dict(line.split(": ", 1) for line in r.body.decode().splitlines())
    assert got["Accept"] == "text/plain"
    assert got["User-Agent"] == "Other/2"


async def test_no_referer_for_seeds(fetcher: AiohttpFetcher, web_server: TestServer) -> None:
    r = await fetcher.fetch(Request(_url(web_server, "/echo")))
    assert "Referer" not in r.body.decode()


async def test_head_reads_no_body(fetcher: AiohttpFetcher, web_server: TestServer) -> None:
    r = await fetcher.fetch(Request(_url(web_server, "/echo")), method="HEAD")
    assert r.status == 200
    assert r.header("x-method") == "HEAD"
    assert r.body == b"" and r.raw_body == b""


@pytest.mark.parametrize("code", [404, 410, 500, 503])
async def test_http_errors_are_responses(
    fetcher: AiohttpFetcher, web_server: TestServer, code: int
) -> None:
    r = await fetcher.fetch(Request(_url(web_server, f"/status/{code}")))
    assert r.status == code and r.body == b"status page"


async def test_connections_are_kept_alive(fetcher: AiohttpFetcher, web_server: TestServer) -> None:
    ports = set()
    for _ in range(3):
        r = await fetcher.fetch(Request(_url(web_server, "/echo")))
        ports.add(r.header("x-peer-port"))
    assert len(ports) == 1


async def test_url_is_sent_exactly_as_given(fetcher: AiohttpFetcher, raw: RawServer) -> None:
    target = "/a%2Fb/%7Euser/caf%C3%A9?q=a+b%20c&x=%2F&y=&z"
    raw.route(target, response(200, body=b"ok"))
    r = await fetcher.fetch(Request(raw.url(target)))
    assert r.status == 200
    assert raw.log[-1].target == target


async def test_redirects_are_not_followed(fetcher: AiohttpFetcher, raw: RawServer) -> None:
    raw.route("/r", response(302, [("Location", "/elsewhere")]))
    r = await fetcher.fetch(Request(raw.url("/r")))
    assert r.status == 302 and r.header("location") == "/elsewhere"
    assert [e.target for e in raw.log] == ["/r"]


# ----------------------------------------------------------------------------- decoding


@pytest.mark.parametrize("name", CODINGS)
async def test_content_codings_are_decoded(
    fetcher: AiohttpFetcher, web_server: TestServer, name: str
) -> None:
    r = await fetcher.fetch(Request(_url(web_server, "/enc/" + name.replace(", ", "+"))))
    assert r.status == 200
    assert r.body == PAGE
    assert r.raw_body == _encoded(name, PAGE)[1]
    if name != "identity":
        assert r.raw_body != PAGE


async def test_stacked_codings_in_separate_headers(fetcher: AiohttpFetcher, raw: RawServer) -> None:
    body = zstd.compress(gzip.compress(PAGE))
    raw.route(
        "/two", response(200, [("Content-Encoding", "gzip"), ("Content-Encoding", "zstd")], body)
    )
    r = await fetcher.fetch(Request(raw.url("/two")))
    assert r.body == PAGE and r.raw_body == body


async def test_unknown_coding_passes_raw_body_through(
    fetcher: AiohttpFetcher, raw: RawServer
) -> None:
    raw.route("/lzw", response(200, [("Content-Encoding", "compress")], b"\x1f\x9dLZW?"))
    r = await fetcher.fetch(Request(raw.url("/lzw")))
    assert r.status == 200 and r.body == b"\x1f\x9dLZW?" == r.raw_body


async def test_corrupt_gzip_is_a_protocol_error(fetcher: AiohttpFetcher, raw: RawServer) -> None:
    raw.route(
        "/bad", response(200, [("Content-Encoding", "gzip")], b"\x1f\x8b\x08\x00" + b"\xff" * 64)
    )
    with pytest.raises(ProtocolError, match="content decoding failed") as info:
        await fetcher.fetch(Request(raw.url("/bad")))
    assert info.value.kind == "protocol"


# ----------------------------------------------------------------------------- size caps


async def test_max_body_bytes_per_call(fetcher: AiohttpFetcher, web_server: TestServer) -> None:
    url = _url(web_server, "/page")
    with pytest.raises(BodyTooLarge, match="Content-Length") as info:
        await fetcher.fetch(Request(url), max_body_bytes=100)
    assert info.value.kind == "body_too_large"
    r = await fetcher.fetch(Request(url), max_body_bytes=len(PAGE))
    assert r.body == PAGE
    # without Content-Length (chunked) the cap applies while streaming
    with pytest.raises(BodyTooLarge) as info:
        await fetcher.fetch(Request(_url(web_server, "/big-chunked")), max_body_bytes=5000)
    assert 5000 < info.value.bytes_read < 5000 + 64 * 1024
    r = await fetcher.fetch(Request(_url(web_server, "/big-chunked")))
    assert len(r.body) == 20000


def _gzip_zeros(total: int, wbits: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    zeros = bytes(MiB)
    return b"".join([c.compress(zeros) for _ in range(total // MiB)] + [c.flush()])


def _brotli_zeros(total: int) -> bytes:
    b = brotli.Compressor(quality=5)
    zeros = bytes(MiB)
    return b"".join([b.process(zeros) for _ in range(total // MiB)] + [b.finish()])


def _zstd_zeros(total: int) -> bytes:
    z = zstd.ZstdCompressor()
    zeros = bytes(MiB)
    return b"".join([z.compress(zeros) for _ in range(total // MiB)] + [z.flush()])


BOMB_SIZE = 256 * MiB  # decoded size; 1 GiB behaves the same (the cap is 10 MiB)


@pytest.fixture(scope="module")
def bombs() -> dict[str, tuple[str, bytes]]:
    """C13 payloads: path -> (Content-Encoding, body), built once per module."""
    return {
        "/bomb.html": ("gzip", _gzip_zeros(BOMB_SIZE, 31)),
        "/bomb-deflate": ("deflate", _gzip_zeros(BOMB_SIZE, 15)),
        "/bomb-br": ("br", _brotli_zeros(BOMB_SIZE)),
        "/bomb-zstd": ("zstd", _zstd_zeros(BOMB_SIZE)),
    }


async def test_c13_decompression_bombs_are_aborted(
    raw: RawServer, bombs: dict[str, tuple[str, bytes]]
) -> None:
    for path, (coding, body) in bombs.items():
        raw.route(
            path,
            response(200, [("Content-Type", "text/html"), ("Content-Encoding", coding)], body),
        )
    raw.route("/after.html", response(200, [("Content-Type", "text/html")], PAGE))
    cap = 10 * MiB
    async with AiohttpFetcher(
        _settings(max_body_bytes=cap), concurrency=4, host_concurrency=2
    ) as f:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for path in bombs:
            t0 = time.monotonic()
            with pytest.raises(BodyTooLarge, match="decoded body exceeds limit") as info:
                await f.fetch(Request(raw.url(path)))
            assert info.value.kind == "body_too_large"
            assert cap <= info.value.bytes_read < cap + MiB, path
            assert "HTTP status 200" in info.value.detail
            assert time.monotonic() - t0 < 2.0, path
        grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        assert grown_mib < 100
        after = await f.fetch(Request(raw.url("/after.html")))
        assert after.status == 200 and after.body == PAGE


# ----------------------------------------------------------------------------- C15 framing


async def test_c15_t1_short_content_length(fetcher: AiohttpFetcher, raw: RawServer) -> None:
    prefix = b'<html><a href="/t1-link">x</a>'
    html = prefix + b"." * (1200 - len(prefix))
    assert len(html) == 1200
    raw.route("/t1", [head(200, [("Content-Type", "text/html"), ("Content-Length", "5000")]), html])
    with pytest.raises(ProtocolError) as info:
        await fetcher.fetch(Request(raw.url("/t1")))
    assert info.value.kind == "protocol"
    assert info.value.detail == "incomplete body: 1200 of 5000 bytes"
    assert info.value.bytes_read == 1200


async def test_c15_t2_chunked_without_last_chunk(fetcher: AiohttpFetcher, raw: RawServer) -> None:
    raw.route(
        "/t2",
        [head(200, [("Transfer-Encoding", "chunked")]), b"400\r\n" + b"y" * 1024 + b"\r\n"],
    )
    with pytest.raises(ProtocolError, match="incomplete body") as info:
        await fetcher.fetch(Request(raw.url("/t2")))
    assert info.value.kind == "protocol"
    assert "1024" in info.value.detail


async def test_c15_t3_split_chunk_terminator_is_complete(
    fetcher: AiohttpFetcher, raw: RawServer
) -> None:
    raw.route(
        "/t3",
        [
            head(200, [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]),
            b'19\r\n<html><a href="/ok">k</a>\r\n',
            b"0\r\n",
            0.2,
            b"\r\n",
        ],
    )
    r = await fetcher.fetch(Request(raw.url("/t3")))
    assert r.status == 200
    assert r.body == b'<html><a href="/ok">k</a>'
    assert r.header("transfer-encoding") == "chunked"


async def test_bad_chunk_size_after_headers_is_a_protocol_error(
    fetcher: AiohttpFetcher, raw: RawServer
) -> None:
    # aiohttp leaves the body reader waiting in this case; the fetcher notices the parser error.
    raw.route("/bad", [head(200, [("Transfer-Encoding", "chunked")]), 0.1, b"zz\r\nabc\r\n", 30.0])
    t0 = time.monotonic()
    with pytest.raises(ProtocolError, match="bad body framing"):
        await fetcher.fetch(Request(raw.url("/bad")))
    assert time.monotonic() - t0 < 2.0


async def test_too_long_header_is_a_protocol_error(fetcher: AiohttpFetcher, raw: RawServer) -> None:
    raw.route("/long", response(200, [("X-Long", "a" * 9000)], b"x"))
    with pytest.raises(ProtocolError, match="bad response") as info:
        await fetcher.fetch(Request(raw.url("/long")))
    assert info.value.kind == "protocol"


async def test_garbage_and_empty_replies_are_protocol_errors(
    fetcher: AiohttpFetcher, raw: RawServer
) -> None:
    raw.route("/garbage", b"garbage\r\n\r\n")
    raw.route("/empty", b"")
    with pytest.raises(ProtocolError, match="bad response"):
        await fetcher.fetch(Request(raw.url("/garbage")))
    with pytest.raises(ProtocolError, match="server disconnected"):
        await fetcher.fetch(Request(raw.url("/empty")))


# ----------------------------------------------------------------------------- C16 Location


async def test_c16_raw_location_bytes_round_trip(fetcher: AiohttpFetcher, raw: RawServer) -> None:
    utf8 = b"/news/15/" + "новости".encode()
    raw.route("/news/15/", response(301, [(b"Location", utf8)]))
    raw.route("/l2", response(302, [(b"Location", b"/caf\xe9")]))
    raw.route("/l6", response(302, [("Content-Type", "text/html")], b'<a href="/l6-body">'))
    r1 = await fetcher.fetch(Request(raw.url("/news/15/")))
    loc1 = r1.header("location")
    assert loc1 is not None and loc1.encode("latin-1") == utf8
    r2 = await fetcher.fetch(Request(raw.url("/l2")))
    loc2 = r2.header("location")
    assert loc2 is not None and loc2.encode("latin-1") == b"/caf\xe9"
    r6 = await fetcher.fetch(Request(raw.url("/l6")))
    assert r6.status == 302 and r6.header("location") is None
    assert r6.body == b'<a href="/l6-body">'


async def test_header_order_and_duplicates_are_kept(
    fetcher: AiohttpFetcher, raw: RawServer
) -> None:
    raw.route("/h", response(200, [("B", "1"), ("A", "2"), ("B", "3")], b""))
    r = await fetcher.fetch(Request(raw.url("/h")))
    assert r.headers[:3] == (("B", "1"), ("A", "2"), ("B", "3"))
    assert r.header_all("b") == ["1", "3"]


# ----------------------------------------------------------------------------- C19 deadlines


async def test_c19_slow_and_silent_servers_hit_their_deadlines(raw: RawServer) -> None:
    fast_body = b"<html>fast</html>"
    raw.route(
        "/",
        drip(b"HTTP/1.1 200 OK\r\nX-Pad: ", b"a", interval_s=0.25),
        host="slowhead.example.test",
    )
    raw.route(
        "/",
        drip(head(200, [("Content-Type", "text/html")]), b"a", interval_s=0.25),
        host="slowbody.example.test",
    )
    raw.route(
        "/",
        [head(200, [("Content-Type", "text/html")]), b'<html><a href="/c2">c2</a></html>', 60.0],
        host="noclose.example.test",
    )
    raw.route(
        "/",
        [0.3, response(200, [("Content-Type", "text/html")], fast_body)],
        host="fast.example.test",
    )
    names = ["slowhead", "slowbody", "noclose", "fast"]
    resolve = {(f"{n}.example.test", raw.port): "127.0.0.1" for n in names}
    timeout_s, read_timeout_s = 2.0, 1.0
    settings = _settings(
        timeout_s=timeout_s, read_timeout_s=read_timeout_s, resolve=resolve, allow_private=False
    )
    async with AiohttpFetcher(settings, concurrency=8, host_concurrency=2) as f:

        async def timed(name: str) -> tuple[object, float]:
            t0 = time.monotonic()
            try:
                result: object = await f.fetch(Request(f"http://{name}.example.test:{raw.port}/"))
            except FetchTimeout as exc:
                result = exc
            return result, time.monotonic() - t0

        t_all = time.monotonic()
        results = dict(zip(names, await asyncio.gather(*(timed(n) for n in names)), strict=True))
        assert time.monotonic() - t_all < timeout_s + 2

        for name in ("slowhead", "slowbody"):
            exc, took = results[name]
            assert isinstance(exc, FetchTimeout), name
            assert exc.kind == "timeout"
            assert exc.detail.startswith("timeout (total deadline)"), exc.detail
            assert timeout_s - 0.5 <= took < timeout_s + 2, (name, took)
        assert "during headers" in results["slowhead"][0].detail  # type: ignore[attr-defined]
        assert results["slowbody"][0].bytes_read > 0  # type: ignore[attr-defined]

        exc, took = results["noclose"]
        assert isinstance(exc, FetchTimeout)
        assert exc.detail.startswith("timeout (idle read)"), exc.detail
        assert exc.bytes_read == len(b'<html><a href="/c2">c2</a></html>')
        assert took < timeout_s

        fast, took = results["fast"]
        assert not isinstance(fast, Exception)
        assert fast.body == fast_body  # type: ignore[attr-defined]
        assert took < 1.5

        # the host routing really went by Host header
        assert {e.host for e in raw.log} == {f"{n}.example.test" for n in names}


async def test_idle_read_while_waiting_for_headers(raw: RawServer) -> None:
    raw.route("/silent", [60.0])
    async with AiohttpFetcher(_settings(timeout_s=5, read_timeout_s=0.5)) as f:
        with pytest.raises(FetchTimeout, match=r"^timeout \(idle read\)"):
            await f.fetch(Request(raw.url("/silent")))


# ----------------------------------------------------------------------------- connect errors


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_connection_refused_is_connect(fetcher: AiohttpFetcher) -> None:
    with pytest.raises(ConnectError) as info:
        await fetcher.fetch(Request(f"http://127.0.0.1:{_closed_port()}/"))
    assert info.value.kind == "connect"


async def test_reset_mid_body_is_not_raw(fetcher: AiohttpFetcher, raw: RawServer) -> None:
    async def reset(_req: RawRequest, conn: RawConnection) -> None:
        await conn.write(head(200, [("Content-Length", "100")]) + b"x" * 10)
        await asyncio.sleep(0.05)
        conn.abort()

    raw.route("/reset", reset)
    with pytest.raises(ProtocolError, match="incomplete body: 10 of 100 bytes"):
        await fetcher.fetch(Request(raw.url("/reset")))


async def test_proxy_setting_is_used(raw: RawServer) -> None:
    # The raw server acts as the HTTP proxy: it receives the absolute-form target.
    raw.route("http://upstream.example.test/x", response(200, body=b"via proxy"))
    async with AiohttpFetcher(_settings(proxy=raw.url(""), resolve_only=True)) as f:
        r = await f.fetch(Request("http://upstream.example.test/x"))
    assert r.body == b"via proxy"
    assert raw.log[-1].target == "http://upstream.example.test/x"
    assert raw.log[-1].host == "upstream.example.test"


# ----------------------------------------------------------------------------- resolver


class CountingResolver(AbstractResolver):
    """A fake DNS (no network): answers from a table and counts queries."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.calls.append(host)
        await asyncio.sleep(0.01)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            ResolveResult(
                hostname=host,
                host=self.table[host],
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=0,
            )
        ]

    async def close(self) -> None:
        pass


async def test_resolve_map_routes_a_name_to_loopback(raw: RawServer) -> None:
    raw.route("/", response(200, body=b"docs"), host="docs.python.test")
    delegate = CountingResolver({})
    settings = _settings(resolve={("docs.python.test", raw.port): "127.0.0.1"}, allow_private=False)
    resolver = SkitterResolver(
        resolve=settings.resolve, resolve_only=False, allow_private=False, delegate=delegate
    )
    async with AiohttpFetcher(settings, resolver=resolver) as f:
        r = await f.fetch(Request(f"http://DOCS.python.test:{raw.port}/"))
        assert r.body == b"docs" and r.peer_ip == "127.0.0.1"
        # mapped per port: another port is not mapped -> system DNS (here: the fake)
        with pytest.raises(ConnectError) as info:
            await f.fetch(Request(f"http://docs.python.test:{raw.port + 1}/"))
        assert info.value.kind == "dns"
    assert delegate.calls == ["docs.python.test"]


async def test_resolve_only_fails_unmapped_names_without_a_query() -> None:
    delegate = CountingResolver({"elsewhere.test": "127.0.0.1"})
    resolver = SkitterResolver(resolve_only=True, allow_private=True, delegate=delegate)
    async with AiohttpFetcher(_settings(resolve_only=True), resolver=resolver) as f:
        with pytest.raises(ConnectError) as info:
            await f.fetch(Request("http://elsewhere.test:8080/"))
    assert info.value.kind == "dns"
    assert "resolve_only" in info.value.detail
    assert delegate.calls == [] and resolver.lookups == 0


async def test_dns_failure_is_kind_dns() -> None:
    resolver = SkitterResolver(allow_private=True, delegate=CountingResolver({}))
    async with AiohttpFetcher(_settings(), resolver=resolver) as f:
        with pytest.raises(ConnectError) as info:
            await f.fetch(Request("http://nowhere.test/"))
    assert info.value.kind == "dns"


async def test_private_ip_literal_is_blocked_unless_allowed(raw: RawServer) -> None:
    raw.route("/", response(200, body=b"ok"))
    async with AiohttpFetcher(_settings(allow_private=False)) as f:
        with pytest.raises(ConnectError) as info:
            await f.fetch(Request(raw.url("/")))
        assert info.value.kind == "blocked_address"
        assert raw.log == []  # refused before connecting
        f.resolver.allow_host("127.0.0.1")  # e.g. a seed's own host
        assert (await f.fetch(Request(raw.url("/")))).body == b"ok"


async def test_name_resolving_to_private_address_is_blocked(raw: RawServer) -> None:
    raw.route("/", response(200, body=b"ok"))
    delegate = CountingResolver({"rebind.test": "127.0.0.1", "seed.test": "127.0.0.1"})
    resolver = SkitterResolver(allow_private=False, delegate=delegate)
    async with AiohttpFetcher(_settings(allow_private=False), resolver=resolver) as f:
        with pytest.raises(ConnectError) as info:
            await f.fetch(Request(f"http://rebind.test:{raw.port}/"))
        assert info.value.kind == "blocked_address"
        resolver.allow_host("seed.test")
        r = await f.fetch(Request(f"http://seed.test:{raw.port}/"))
        assert r.body == b"ok"
    assert raw.log and {e.host for e in raw.log} == {"seed.test"}


async def test_one_lookup_per_host_and_lookup_helper(raw: RawServer) -> None:
    raw.route("/", response(200, body=b"ok"))
    delegate = CountingResolver({"a.test": "127.0.0.1"})
    resolver = SkitterResolver(allow_private=True, delegate=delegate, cache_ttl_s=300)
    async with AiohttpFetcher(
        _settings(), resolver=resolver, concurrency=8, host_concurrency=8
    ) as f:
        url = f"http://a.test:{raw.port}/"
        rs = await asyncio.gather(*(f.fetch(Request(url)) for _ in range(6)))
        assert all(r.status == 200 for r in rs)
        await f.fetch(Request(url))
        assert await resolver.lookup("a.test", raw.port) == ["127.0.0.1"]
    assert delegate.calls == ["a.test"]
    assert resolver.lookups == 1


async def test_fetcher_resolver_helpers() -> None:
    delegate = CountingResolver({"a.test": "127.0.0.1"})
    resolver = SkitterResolver(allow_private=False, delegate=delegate)
    async with AiohttpFetcher(_settings(allow_private=False), resolver=resolver) as f:
        with pytest.raises(ConnectError) as info:
            await f.lookup_url("http://a.test/x")
        assert info.value.kind == "blocked_address"
        f.allow_host("a.test")
        assert await f.lookup_url("http://a.test/x") == ["127.0.0.1"]
        assert await f.lookup_url("https://A.test:8443/") == ["127.0.0.1"]
        with pytest.raises(ConnectError, match="blocked"):
            await f.lookup_url("http://[::1]:81/")
        f.allow_host("[::1]")
        assert await f.lookup_url("http://[::1]:81/") == ["::1"]
    assert delegate.calls == ["a.test"]


async def test_dns_cache_expires_after_ttl() -> None:
    now = [0.0]
    delegate = CountingResolver({"a.test": "127.0.0.1"})
    resolver = SkitterResolver(
        allow_private=True, delegate=delegate, cache_ttl_s=10, clock=lambda: now[0]
    )
    assert await resolver.lookup("a.test", 80) == ["127.0.0.1"]
    now[0] = 9.0
    await resolver.lookup("A.TEST", 443)
    assert resolver.lookups == 1
    now[0] = 10.5
    await resolver.lookup("a.test", 80)
    assert resolver.lookups == 2


@pytest.mark.parametrize(
    ("ip", "blocked"),
    [
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("192.168.1.1", True),
        ("169.254.169.254", True),
        ("100.100.100.200", True),
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        ("240.0.0.1", True),
        ("::1", True),
        ("fe80::1", True),
        ("fc00::1", True),
        ("::ffff:127.0.0.1", True),
        ("::", True),
        ("8.8.8.8", False),
        ("93.184.216.34", False),
        ("2606:4700::1111", False),
        ("not-an-ip", True),
    ],
)
def test_is_blocked(ip: str, blocked: bool) -> None:
    assert SkitterResolver().is_blocked(ip) is blocked
    assert SkitterResolver(allow_private=True).is_blocked(ip) is False


# ----------------------------------------------------------------------------- cookies


async def test_cookies_are_kept_saved_and_loaded(web_server: TestServer, tmp_path: Path) -> None:
    path = tmp_path / "cookies.json"
    async with AiohttpFetcher(_settings()) as f1:
        await f1.fetch(Request(_url(web_server, "/set-cookie")))
        r = await f1.fetch(Request(_url(web_server, "/echo")))
        assert "Cookie: session=abc123" in r.body.decode()
        f1.save_cookies(path)
    assert path.exists() and not list(tmp_path.glob(".*.tmp"))
    async with AiohttpFetcher(_settings()) as f2:
        f2.load_cookies(path)
        r = await f2.fetch(Request(_url(web_server, "/echo")))
        assert "Cookie: session=abc123" in r.body.decode()
        assert ("Cookie", "session=abc123") in r.request_headers
    async with AiohttpFetcher(_settings()) as f3:
        f3.load_cookies(tmp_path / "missing.json")  # no file: nothing loaded, no error
        r = await f3.fetch(Request(_url(web_server, "/echo")))
        assert "Cookie" not in r.body.decode()


# ----------------------------------------------------------------------------- lifecycle


async def test_fetch_after_close_raises(web_server: TestServer) -> None:
    f = AiohttpFetcher(_settings())
    await f.fetch(Request(_url(web_server, "/page")))
    await f.aclose()
    await f.aclose()  # idempotent
    with pytest.raises(RuntimeError):
        await f.fetch(Request(_url(web_server, "/page")))


# ----------------------------------------------------------------------------- TLS


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
async def test_untrusted_certificate_is_kind_tls(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)

    async def on_client(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        async with AiohttpFetcher(_settings()) as f:
            with pytest.raises(ConnectError) as info:
                await f.fetch(Request(f"https://127.0.0.1:{port}/"))
        assert info.value.kind == "tls"
        assert "certificate" in info.value.detail.lower()
    finally:
        server.close()
        await server.wait_closed()
