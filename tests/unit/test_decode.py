"""Streaming Content-Encoding decoding with a decoded-size cap (skitter.fetch.decode)."""

from __future__ import annotations

import gzip
import resource
import zlib
from collections.abc import Callable

import brotli
import pytest
from backports import zstd

from skitter.errors import BodyTooLarge, ProtocolError
from skitter.fetch.decode import (
    ACCEPT_ENCODING,
    SUPPORTED_CODINGS,
    ContentDecoder,
    decode_body,
    parse_content_encoding,
)

DATA = b"<html><body>" + b"hello world, " * 5000 + bytes(range(256)) * 200 + b"</body></html>"
MiB = 1024 * 1024


def _zlib(data: bytes, wbits: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return c.compress(data) + c.flush()


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": lambda d: _zlib(d, 15),  # zlib-wrapped, as RFC 9110 says
    "deflate-raw": lambda d: _zlib(d, -15),  # what many servers actually send
    "br": brotli.compress,
    "zstd": zstd.compress,
}


def _coding(name: str) -> str:
    return "deflate" if name == "deflate-raw" else name


def _feed_all(dec: ContentDecoder, data: bytes, chunk: int) -> bytes:
    for i in range(0, len(data), chunk):
        dec.feed(data[i : i + chunk])
    return dec.finish()


@pytest.mark.parametrize("name", sorted(ENCODERS))
@pytest.mark.parametrize("chunk", [1, 7, 4096, 10**9])
@pytest.mark.parametrize("step_bytes", [1, 997, 64 * 1024])
def test_each_coding_round_trips_in_any_chunking(name: str, chunk: int, step_bytes: int) -> None:
    encoded = ENCODERS[name](DATA)
    if chunk == 1 and step_bytes == 1 and name != "zstd":
        encoded = ENCODERS[name](DATA[:3000])  # keep the byte-by-byte cases quick
        expected = DATA[:3000]
    else:
        expected = DATA
    dec = ContentDecoder([_coding(name)], max_bytes=10 * MiB, step_bytes=step_bytes)
    assert _feed_all(dec, encoded, chunk) == expected
    assert dec.decoded_bytes == len(expected)


@pytest.mark.parametrize(
    ("codings", "encode"),
    [
        (["gzip", "br"], lambda d: brotli.compress(gzip.compress(d))),
        (["br", "gzip"], lambda d: gzip.compress(brotli.compress(d))),
        (["deflate", "zstd", "gzip"], lambda d: gzip.compress(zstd.compress(_zlib(d, 15)))),
        (["identity", "gzip", "identity"], gzip.compress),
    ],
)
def test_stacked_codings_are_undone_in_reverse_order(
    codings: list[str], encode: Callable[[bytes], bytes]
) -> None:
    assert decode_body(codings, encode(DATA), max_bytes=10 * MiB) == DATA


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], []),
        (["gzip"], ["gzip"]),
        (["GZip , BR"], ["gzip", "br"]),
        (["gzip", "br"], ["gzip", "br"]),
        (["identity"], []),
        ([" , identity, zstd,"], ["zstd"]),
    ],
)
def test_parse_content_encoding(values: list[str], expected: list[str]) -> None:
    assert parse_content_encoding(values) == expected


def test_accept_encoding_lists_only_decodable_codings() -> None:
    offered = [c.strip() for c in ACCEPT_ENCODING.split(",")]
    assert offered == ["gzip", "deflate", "br", "zstd"]
    assert set(offered) <= SUPPORTED_CODINGS


def test_unknown_coding_is_passed_through() -> None:
    dec = ContentDecoder(["gzip", "compress"], max_bytes=100)
    assert dec.passthrough
    dec = ContentDecoder(["x-unknown"], max_bytes=100)
    assert dec.passthrough


def test_identity_only_has_no_layers() -> None:
    dec = ContentDecoder(["identity"], max_bytes=100)
    assert not dec.passthrough and dec.codings == ()
    dec.feed(b"abc")
    assert dec.finish() == b"abc"


def test_multi_member_gzip_and_multi_frame_zstd() -> None:
    assert decode_body(["gzip"], gzip.compress(b"ab") + gzip.compress(b"cd"), max_bytes=10) == (
        b"abcd"
    )
    assert decode_body(["zstd"], zstd.compress(b"ab") + zstd.compress(b"cd"), max_bytes=10) == (
        b"abcd"
    )


def test_trailing_garbage_after_stream_is_ignored() -> None:
    assert decode_body(["gzip"], gzip.compress(b"ok") + b"\0\0\0junk", max_bytes=10) == b"ok"
    assert decode_body(["deflate"], _zlib(b"ok", 15) + b"junk", max_bytes=10) == b"ok"
    with pytest.raises(ProtocolError):  # the Brotli decoder refuses data after its end
        decode_body(["br"], brotli.compress(b"ok") + b"junk", max_bytes=10)
    dec = ContentDecoder(["br"], max_bytes=10)
    dec.feed(brotli.compress(b"ok"))
    with pytest.raises(ProtocolError):
        dec.feed(b"junk")


def test_truncated_stream_keeps_what_decoded() -> None:
    # Framing said the body was complete; a cut compressed stream is accepted leniently.
    enc = gzip.compress(DATA)
    out = decode_body(["gzip"], enc[: len(enc) // 2], max_bytes=10 * MiB)
    assert DATA.startswith(out) and 0 < len(out) < len(DATA)
    assert decode_body(["gzip"], b"", max_bytes=10) == b""


@pytest.mark.parametrize(
    ("coding", "garbage"),
    [
        ("gzip", b"\x1f\x8b\x08\x00" + b"\xff" * 40),
        ("gzip", b"this is not gzip at all"),
        ("deflate", b"\x78\x9c" + b"\xff" * 40),
        ("br", b"\xff\xff\xff\xff not brotli"),
        ("zstd", b"\x28\xb5\x2f\xfd" + b"\xff" * 40),
        ("zstd", b"not zstd"),
    ],
)
def test_corrupt_data_is_a_protocol_error(coding: str, garbage: bytes) -> None:
    with pytest.raises(ProtocolError, match="content decoding failed") as info:
        decode_body([coding], garbage, max_bytes=MiB)
    assert info.value.kind == "protocol"


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_cap_on_decoded_size(name: str) -> None:
    encoded = ENCODERS[name](DATA)
    with pytest.raises(BodyTooLarge, match="decoded body exceeds limit") as info:
        decode_body([_coding(name)], encoded, max_bytes=1000)
    assert info.value.kind == "body_too_large"
    assert 1000 < info.value.bytes_read <= 1000 + 64 * 1024
    # exactly at the cap is fine
    assert decode_body([_coding(name)], encoded, max_bytes=len(DATA)) == DATA


def test_identity_cap() -> None:
    with pytest.raises(BodyTooLarge):
        decode_body(["identity"], b"x" * 11, max_bytes=10)
    assert decode_body([], b"x" * 10, max_bytes=10) == b"x" * 10


def test_zstd_window_over_8_mib_is_refused() -> None:
    # RFC 9659 lets HTTP decoders refuse windows above 8 MiB; a 128 MiB window would let a
    # tiny body force a 128 MiB allocation.
    big_window = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: 27}).compress(
        bytes(20 * MiB), zstd.ZstdCompressor.FLUSH_FRAME
    )
    with pytest.raises(ProtocolError, match="content decoding failed"):
        decode_body(["zstd"], big_window, max_bytes=64 * MiB)


def _bomb(coding: str, total: int) -> bytes:
    zeros = bytes(MiB)
    parts: list[bytes] = []
    if coding in ("gzip", "deflate"):
        c = zlib.compressobj(9, zlib.DEFLATED, 31 if coding == "gzip" else 15)
        parts = [c.compress(zeros) for _ in range(total // MiB)] + [c.flush()]
    elif coding == "br":
        b = brotli.Compressor(quality=5)
        parts = [b.process(zeros) for _ in range(total // MiB)] + [b.finish()]
    else:
        z = zstd.ZstdCompressor()
        parts = [z.compress(zeros) for _ in range(total // MiB)] + [z.flush()]
    return b"".join(parts)


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_bomb_is_stopped_at_the_cap_without_inflating(coding: str) -> None:
    bomb = _bomb(coding, 64 * MiB)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    dec = ContentDecoder([coding], max_bytes=4 * MiB)
    with pytest.raises(BodyTooLarge) as info:
        _feed_all(dec, bomb, 64 * 1024)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert 4 * MiB < info.value.bytes_read < 5 * MiB
    assert grown_kib < 40 * 1024
