"""Streaming Content-Encoding decoding with a decoded-size cap (skitter.fetch.decode)."""

from __future__ import annotations

import gzip
import resource
import zlib
from collections.abc import Callable

import brotli
import pytest
from backports import zstd

import skitter.fetch.codings as codings_mod
from skitter.errors import BodyTooLarge, ProtocolError
from skitter.fetch.decode import (
    ACCEPT_ENCODING,
    SUPPORTED_CODINGS,
    ContentDecoder,
    codings_to_undo,
    decode_body,
    is_text_type,
    parse_content_encoding,
)


@pytest.fixture(autouse=True, params=["isal", "zlib"])
def inflater(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with ISA-L's inflate (the default) and with zlib's (the fallback
    when isal is not installed): both must give the same bytes and the same errors."""
    if request.param == "zlib":
        monkeypatch.setattr(codings_mod, "_inflate", zlib)
        monkeypatch.setattr(codings_mod, "_INFLATE_ERRORS", (zlib.error,))
    else:
        from isal import isal_zlib

        assert codings_mod._inflate is isal_zlib
    return str(request.param)


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


def _corrupt_middle(name: str) -> bytes:
    """DATA encoded in ``name`` with bytes in the middle of the stream overwritten."""
    if name == "zstd":  # with its checksum, so that any damage is found
        opts = {zstd.CompressionParameter.checksum_flag: 1}
        enc = bytearray(
            zstd.ZstdCompressor(options=opts).compress(DATA, zstd.ZstdCompressor.FLUSH_FRAME)
        )
    else:
        enc = bytearray(ENCODERS[name](DATA))
    mid = len(enc) // 2
    enc[mid : mid + 16] = b"\xff" * 16
    return bytes(enc)


@pytest.mark.parametrize("name", sorted(set(ENCODERS) - {"deflate-raw"}))  # no checksum
def test_corrupt_data_in_the_middle_is_a_protocol_error(name: str) -> None:
    with pytest.raises(ProtocolError, match="content decoding failed") as info:
        decode_body([_coding(name)], _corrupt_middle(name), max_bytes=MiB)
    assert info.value.kind == "protocol"
    dec = ContentDecoder([_coding(name)], max_bytes=MiB)
    with pytest.raises(ProtocolError):  # also when fed in small pieces
        _feed_all(dec, _corrupt_middle(name), 100)


PLAIN = [
    b"<!doctype html><html><body><a href='/x'>x</a></body></html>",
    b"hello world, this is plain text",
    b'{"a": [1, 2, 3]}',
    b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
]


@pytest.mark.parametrize("coding", ["gzip", "x-gzip", "deflate", "br", "zstd"])
@pytest.mark.parametrize("body", PLAIN)
@pytest.mark.parametrize("chunk", [3, 10**6])
def test_body_not_encoded_at_all_is_used_as_sent(coding: str, body: bytes, chunk: int) -> None:
    dec = ContentDecoder([coding], max_bytes=MiB)
    assert _feed_all(dec, body, chunk) == body
    assert dec.notes == [
        f"Content-Encoding {coding} not applied: the body is not {coding} data; used as sent"
    ]


@pytest.mark.parametrize(
    ("coding", "garbage"),
    [
        ("gzip", b"\x1f\x8b\x08\x00" + b"\xff" * 40),  # the magic number says gzip
        ("deflate", b"\x78\x9c" + b"\xff" * 40),  # a valid zlib header
        ("zstd", b"\x28\xb5\x2f\xfd" + b"\xff" * 40),
        ("br", brotli.compress(b"ok") + b"junk"),  # a complete stream, then junk
    ],
)
def test_damage_after_a_good_start_is_a_protocol_error(coding: str, garbage: bytes) -> None:
    with pytest.raises(ProtocolError, match="content decoding failed") as info:
        decode_body([coding], garbage, max_bytes=MiB)
    assert info.value.kind == "protocol"


# gzip mtimes whose header bytes a brotli decoder accepts for more than 64 bytes
_BROTLI_LOOKING_MTIMES = [1796162816, 1796162817, 1796162818, 0, 1, 2**31]


@pytest.mark.parametrize("mtime", _BROTLI_LOOKING_MTIMES + list(range(1796162000, 1796163000, 25)))
def test_lying_inner_coding_is_skipped_layer_by_layer(mtime: int) -> None:
    # labelled "gzip, br" (gzip applied first), but only gzip was applied; whatever the
    # gzip header's bytes (they once decided it, by the clock: 1 run in 40 failed)
    dec = ContentDecoder(["gzip", "br"], max_bytes=MiB)
    assert _feed_all(dec, gzip.compress(DATA, mtime=mtime), 999) == DATA
    assert dec.notes == ["Content-Encoding br not applied: the body is not br data; used as sent"]


@pytest.mark.parametrize("extra", [1, 2, 4])
@pytest.mark.parametrize("inner", ["gzip", "zstd", "deflate"])
def test_text_encoded_more_times_than_labelled_is_decoded(extra: int, inner: str) -> None:
    body = DATA
    for _ in range(extra):
        body = ENCODERS[inner](body)
    body = gzip.compress(body)
    dec = ContentDecoder(["gzip"], max_bytes=MiB, sniff=True)
    assert _feed_all(dec, body, 1000) == DATA
    assert len(dec.notes) == extra
    # without sniffing (not a text type) only the labelled layer is undone
    once = ContentDecoder(["gzip"], max_bytes=MiB)
    assert _feed_all(once, body, 1000) == gzip.decompress(body)


def test_extra_layers_stay_within_the_bomb_cap() -> None:
    inner = gzip.compress(bytes(8 * MiB))
    dec = ContentDecoder(["gzip"], max_bytes=MiB, sniff=True)
    with pytest.raises(BodyTooLarge):
        _feed_all(dec, gzip.compress(inner), 64 * 1024)
    assert dec.decoded_bytes <= MiB + 64 * 1024


def test_extra_layers_are_bounded() -> None:
    body = b"x"
    for _ in range(10):
        body = gzip.compress(body)
    dec = ContentDecoder(["gzip"], max_bytes=MiB, sniff=True)
    out = _feed_all(dec, body, 10**6)
    assert out[:3] == b"\x1f\x8b\x08" and len(dec.notes) == 4  # MAX_EXTRA_LAYERS


def test_gzip_file_stays_as_sent() -> None:
    assert codings_to_undo(["gzip"], "application/gzip") == []
    assert codings_to_undo(["gzip"], "application/x-gzip") == []
    assert codings_to_undo(["x-gzip"], "application/x-gzip") == []
    assert codings_to_undo(["zstd"], "application/zstd") == []
    assert codings_to_undo(["gzip"], "text/html") == ["gzip"]
    assert codings_to_undo(["br"], "application/gzip") == ["br"]
    assert codings_to_undo(["gzip", "br"], "application/gzip") == ["gzip", "br"]
    assert codings_to_undo(["br", "gzip"], "application/gzip") == ["br"]
    assert not is_text_type("application/gzip") and is_text_type("text/html")
    assert is_text_type(None) and is_text_type("application/rss+xml")


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
