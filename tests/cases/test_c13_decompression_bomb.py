"""C13 — decompression bombs: a ~1 MB body that inflates to 1 GiB, for every coding.

End to end: each bomb fetch is aborted once the *decoded* output passes ``max_body``
(10 MiB), recorded as ``body_too_large`` "decoded body exceeds limit" (never as a 200),
memory stays small, and the next page is crawled normally.
"""

from __future__ import annotations

import functools
import struct
import zlib
from pathlib import Path

import brotli
import pytest
from aiohttp import web
from backports import zstd

from skitter.fetch.decode import SUPPORTED_CODINGS
from tests.cases._util import WWW, page, run
from tests.integration.site import Site

GIB = 1 << 30
MIB = 1 << 20


@functools.cache
def zero_deflate_blocks() -> tuple[bytes, bytes, int, int]:
    """Raw deflate of 1 GiB of zeros, level 9, built from one 1 MiB block.

    After ``Z_FULL_FLUSH`` the compressor starts afresh, so every 1 MiB block of zeros
    compresses to the same bytes: 1024 copies of one block plus the final empty block is
    the raw deflate stream of 1 GiB of zeros (~1 MB, as in cases.md) built in well under
    a second. Returns (block, final, crc32, adler32) of the whole data.
    """
    zeros = bytes(MIB)
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = co.compress(zeros) + co.flush(zlib.Z_FULL_FLUSH)
    final = co.flush(zlib.Z_FINISH)
    crc, adler = 0, 1
    for _ in range(GIB // MIB):
        crc = zlib.crc32(zeros, crc)
        adler = zlib.adler32(zeros, adler)
    return block, final, crc, adler


@functools.cache
def bomb(coding: str) -> bytes:
    """1 GiB of zeros in ``coding`` (gzip and zlib-wrapped deflate ~1 MB, br/zstd smaller)."""
    if coding in ("gzip", "deflate"):
        block, final, crc, adler = zero_deflate_blocks()
        stream = block * (GIB // MIB) + final
        if coding == "gzip":
            head = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
            return head + stream + struct.pack("<II", crc, GIB & 0xFFFFFFFF)
        return b"\x78\xda" + stream + struct.pack(">I", adler)
    chunk = bytes(16 * MIB)
    if coding == "br":
        c = brotli.Compressor(quality=5)
        return b"".join(c.process(chunk) for _ in range(GIB // len(chunk))) + c.finish()
    z = zstd.ZstdCompressor(level=3)
    return b"".join(z.compress(chunk) for _ in range(GIB // len(chunk))) + z.flush()


def _hwm_kib() -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


CODINGS = {"/bomb.html": "gzip", "/bomb-deflate": "deflate", "/bomb-br": "br", "/bomb-zstd": "zstd"}


async def test_c13_decompression_bombs_abort_end_to_end(site: Site, tmp_path: Path) -> None:
    bodies = {path: bomb(coding) for path, coding in CODINGS.items()}
    assert 1_000_000 < len(bodies["/bomb.html"]) < 1_100_000

    def serve(path: str) -> web.StreamResponse:
        async def h(request: web.Request) -> web.StreamResponse:
            return web.Response(
                body=bodies[path],
                headers={"Content-Type": "text/html", "Content-Encoding": CODINGS[path]},
            )

        return h  # type: ignore[return-value]

    for path in CODINGS:
        site.route(WWW, path, serve(path))  # type: ignore[arg-type]
    site.route(WWW, "/after.html", page('<a href="/next.html">next</a>'))
    site.fallback(WWW, page())
    seeds = [site.url(WWW, p) for p in CODINGS] + [site.url(WWW, "/after.html")]
    # warm up (imports, first crawl) so that the peak measured below is the bombs'
    await run(site, tmp_path / "warm", [site.url(WWW, "/warm.html")])
    site.hits.clear()
    measured = _reset_hwm()
    before = _hwm_kib()
    res = await run(site, tmp_path / "out", seeds, fetch_max_body_bytes=10 * MIB)
    after = _hwm_kib()
    for path in CODINGS:
        rec = res.record(site.url(WWW, path))
        assert rec["error"] == "body_too_large", (path, rec)
        assert rec["status"] is None and rec["bytes"] == 0
        assert "decoded body exceeds limit of 10485760 bytes" in rec["error_detail"]
        assert site.paths(WWW).count(path) == 1  # not retried
    assert res.record(site.url(WWW, "/after.html"))["status"] == 200
    assert "/next.html" in site.paths(WWW)  # processed normally: its link was followed
    # each bomb is cut in well under 2 s: the next request starts soon after it
    hits = [h for h in site.hits if h.host == WWW]
    for i, h in enumerate(hits[:-1]):
        if h.path_qs in CODINGS:
            assert hits[i + 1].start - h.start < 20.0, h.path_qs  # a whole 1 GiB: minutes
    if measured and before is not None and after is not None:
        # bounded by the cap, not by the bombs (a whole one decodes to 1 GiB): at most each
        # bomb's 10 MiB decoded body twice (the decoder's output, joined) plus 20 MiB of slack
        # for the heap (the peak grew 40-51 MiB over runs: allocator variance, not a leak)
        bound_kib = len(CODINGS) * 2 * 10 * 1024 + 20 * 1024
        assert after - before < bound_kib, f"peak RSS grew by {(after - before) // 1024} MiB"
    # only decodable codings are offered
    offered = hits[0].headers["Accept-Encoding"]
    tokens = [t.strip() for t in offered.split(",")]
    assert tokens and set(tokens) <= SUPPORTED_CODINGS
    assert {"gzip", "deflate", "br", "zstd"} <= set(tokens)


@pytest.mark.slow
@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_c13_bomb_inputs_are_valid_1_gib_streams(coding: str) -> None:
    """The hand-built streams really are 1 GiB of zeros (checked by a full inflate)."""
    d = zlib.decompressobj(31 if coding == "gzip" else 15)
    buf, n = bomb(coding), 0
    while buf:
        out = d.decompress(buf, 64 * MIB)
        assert out.count(0) == len(out)
        n += len(out)
        buf = d.unconsumed_tail
    assert d.eof and n == GIB
