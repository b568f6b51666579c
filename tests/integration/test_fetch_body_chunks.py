"""A body read in many chunks comes back whole and in order, as ``bytes``, built once
(issue 16 part 4: the fetcher no longer holds a bytearray and its bytes copy)."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from skitter.errors import BodyTooLarge
from skitter.fetch import AiohttpFetcher
from skitter.fetch.body import joined as _joined
from skitter.models import Request
from skitter.settings import FetchSettings

#: 200 distinct 1,000-byte pieces: a wrong order or a lost piece changes the body.
PIECES = [(b"%04d" % i) * 250 for i in range(200)]
BODY = b"".join(PIECES)
LOOPBACK = FetchSettings(allow_private=True)


async def _chunked(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/html"})
    if request.match_info["coding"] == "gzip":
        resp.headers["Content-Encoding"] = "gzip"
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    data = gzip.compress(BODY, mtime=0) if request.match_info["coding"] == "gzip" else BODY
    for i in range(0, len(data), 1000):
        await resp.write(data[i : i + 1000])
    await resp.write_eof()
    return resp


@pytest.fixture
async def server() -> AsyncIterator[TestServer]:
    app = web.Application()
    app.router.add_get("/chunked/{coding}", _chunked)
    srv = TestServer(app, host="127.0.0.1")
    await srv.start_server()
    try:
        yield srv
    finally:
        await srv.close()


async def test_many_chunk_body_is_whole_and_in_order(server: TestServer) -> None:
    async with AiohttpFetcher(LOOPBACK, concurrency=2, host_concurrency=1) as f:
        r = await f.fetch(Request(str(server.make_url("/chunked/identity"))))
        assert type(r.body) is bytes and type(r.raw_body) is bytes
        assert r.body == BODY and r.raw_body == BODY
        assert r.body is r.raw_body  # not content-encoded: one object, no second copy
        g = await f.fetch(Request(str(server.make_url("/chunked/gzip"))))
        assert g.body == BODY
        assert gzip.decompress(g.raw_body) == BODY


async def test_truncated_many_chunk_body_keeps_its_first_bytes(server: TestServer) -> None:
    async with AiohttpFetcher(LOOPBACK, concurrency=2, host_concurrency=1) as f:
        url = str(server.make_url("/chunked/identity"))
        with pytest.raises(BodyTooLarge):
            await f.fetch(Request(url), max_body_bytes=50_000)
        r = await f.fetch(Request(url), max_body_bytes=50_000, truncate=True)
        assert type(r.body) is bytes and r.body == BODY[:50_000]
        assert BODY.startswith(r.raw_body) and len(r.raw_body) > 50_000


def test_joined_uses_a_single_chunk_as_is_and_frees_the_pieces() -> None:
    one = [b"only chunk"]
    only = one[0]
    assert _joined(one) is only and one == []
    many = [b"ab", b"cd", b"e"]
    assert _joined(many) == b"abcde" and many == []
