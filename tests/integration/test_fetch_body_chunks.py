"""A body read in many chunks comes back whole and in order, as ``bytes``, built once
(issue 16 part 4: the fetcher no longer holds a bytearray and its bytes copy; a body past
SPILL_BYTES is gathered as it comes, never held as its pieces and their joined copy)."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from skitter.errors import BodyTooLarge
from skitter.fetch import AiohttpFetcher
from skitter.fetch.decode import SPILL_BYTES, Chunks
from skitter.models import Request
from skitter.settings import FetchSettings

#: 200 distinct 1,000-byte pieces: a wrong order or a lost piece changes the body.
PIECES = [(b"%04d" % i) * 250 for i in range(200)]
BODY = b"".join(PIECES)
#: past SPILL_BYTES: 3 MiB of distinct 1,000-byte pieces
LARGE = b"".join((b"%06d" % i) * 166 + b"\n\n\n\n" for i in range(3 * 1024 * 1024 // 1000))
LOOPBACK = FetchSettings(allow_private=True)


async def _chunked(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/html"})
    if request.match_info["coding"] == "gzip":
        resp.headers["Content-Encoding"] = "gzip"
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    body = LARGE if request.match_info.get("size") == "large" else BODY
    data = gzip.compress(body, mtime=0) if request.match_info["coding"] == "gzip" else body
    for i in range(0, len(data), 1000):
        await resp.write(data[i : i + 1000])
    await resp.write_eof()
    return resp


@pytest.fixture
async def server() -> AsyncIterator[TestServer]:
    app = web.Application()
    app.router.add_get("/chunked/{coding}", _chunked)
    app.router.add_get("/chunked/{coding}/{size}", _chunked)
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


def test_chunks_use_a_single_piece_as_is_and_gather_a_large_body_as_it_comes() -> None:
    one = Chunks()
    only = b"only chunk"
    one.add(only)
    assert one.take() is only and len(one) == 0
    many = Chunks()
    for piece in (b"ab", b"cd", b"e"):
        many.add(piece)
    assert many.take() == b"abcde" and many.parts == []
    large = Chunks()
    kept = 0
    for i in range(0, len(LARGE), 10_000):
        large.add(LARGE[i : i + 10_000])
        kept = max(kept, sum(map(len, large.parts)))
    # the pieces are dropped as they come past SPILL_BYTES: never the body twice over
    assert kept <= SPILL_BYTES and large.parts == [] and len(large) == len(LARGE)
    value = large.value()
    assert value == LARGE and type(value) is bytes
    assert large.value() is value and large.take() is value  # its buffer, not a copy


async def test_a_body_past_the_spill_size_is_whole_and_in_order(server: TestServer) -> None:
    assert len(LARGE) > 2 * SPILL_BYTES
    async with AiohttpFetcher(LOOPBACK, concurrency=2, host_concurrency=1) as f:
        r = await f.fetch(Request(str(server.make_url("/chunked/identity/large"))))
        assert type(r.body) is bytes and r.body == LARGE and r.body is r.raw_body
        g = await f.fetch(Request(str(server.make_url("/chunked/gzip/large"))))
        assert type(g.body) is bytes and g.body == LARGE
        assert gzip.decompress(g.raw_body) == LARGE
        t = await f.fetch(
            Request(str(server.make_url("/chunked/identity/large"))),
            max_body_bytes=SPILL_BYTES + 5000,
            truncate=True,
        )
        assert t.body == LARGE[: SPILL_BYTES + 5000]
