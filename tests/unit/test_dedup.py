"""dedup: SimHash, the banded near index, the Deduper (tables of cases)."""

from __future__ import annotations

import hashlib
import random

import pytest

from skitter.dedup import (
    Deduper,
    NearIndex,
    hamming,
    simhash,
    simhash_hex,
    visible_text,
)

_SYL = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "da", "fo", "gu", "hi"]
_RNG = random.Random(5)
#: 300 words of varied text (SimHash needs many distinct shingles to be stable)
LOREM = " ".join(_RNG.choice(_SYL) + _RNG.choice(_SYL) + _RNG.choice(_SYL) for _ in range(300))


def _h(s: str) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "big")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("   ...  ", 0),
        ("one", _h("one")),  # fewer words than a shingle: the whole text
        ("One  TWO three", _h("one two three")),  # one shingle, lower-cased, spaces collapsed
    ],
)
def test_simhash_of_one_shingle_is_its_hash(text: str, expected: int) -> None:
    assert simhash(text) == expected


def test_simhash_is_the_bitwise_majority() -> None:
    text = "a b c d e"  # shingles: "a b c", "b c d", "c d e"
    hs = [_h("a b c"), _h("b c d"), _h("c d e")]
    want = sum(1 << i for i in range(64) if sum((h >> i) & 1 for h in hs) >= 2)
    assert simhash(text) == want


@pytest.mark.parametrize(
    ("a", "b", "near"),
    [
        (LOREM, LOREM, True),
        (LOREM, "Updated 2025-10-21 07:28\n" + LOREM, True),  # a date line
        (LOREM, LOREM + " Session id 8f3a2c", True),
        (LOREM, "Completely different words about gardening, tomatoes and the rain " * 10, False),
    ],
)
def test_near_duplicate_distance(a: str, b: str, near: bool) -> None:
    assert (hamming(simhash(a), simhash(b)) <= 3) is near


def test_visible_text_drops_scripts_styles_and_head() -> None:
    html = (
        "<html><head><title>T</title><style>p{}</style></head><body><p>Hello <b>world</b></p>"
        "<script>var x = 1;</script><noscript>nojs</noscript><template>tpl</template></body>"
    )
    assert visible_text(html).split() == ["Hello", "world"]


def test_visible_text_never_raises() -> None:
    assert visible_text("") == ""
    assert visible_text("<p>a</p>" * 3).split() == ["a", "a", "a"]


def test_simhash_hex_is_16_digits() -> None:
    assert simhash_hex(0) == "0" * 16
    assert simhash_hex(0xABC) == "0000000000000abc"
    assert int(simhash_hex(simhash(LOREM)), 16) == simhash(LOREM)


@pytest.mark.parametrize("distance", [0, 1, 3, 5, 7])
def test_near_index_finds_exactly_what_a_scan_finds(distance: int) -> None:
    rng = random.Random(distance)
    base = [rng.getrandbits(64) for _ in range(300)]
    idx = NearIndex(distance)
    for i, fp in enumerate(base):
        idx.add(fp, f"u{i}")
    for _ in range(300):
        src = rng.randrange(len(base))
        q = base[src]
        for bit in rng.sample(range(64), rng.randrange(0, distance + 3)):
            q ^= 1 << bit
        scan = [i for i, fp in enumerate(base) if hamming(fp, q) <= distance]
        got = idx.find(q)
        if not scan:
            assert got is None
        else:
            best = min(scan, key=lambda i: (hamming(base[i], q), i))
            assert got == f"u{best}"


def test_near_index_keeps_the_first_key_of_an_identical_fingerprint() -> None:
    idx = NearIndex(3)
    idx.add(5, "a")
    idx.add(5, "b")
    assert len(idx) == 1
    assert idx.find(5) == "a"
    assert idx.find(5 ^ 0b111) == "a"
    assert idx.find(5 ^ 0b1111) is None


@pytest.mark.parametrize("distance", [-1, 32])
def test_near_index_rejects_bad_distance(distance: int) -> None:
    with pytest.raises(ValueError, match="distance"):
        NearIndex(distance)


@pytest.mark.parametrize(
    ("mode", "pages", "expected"),
    [
        # (url, digest, simhash) in crawl order -> (kind, of) or None per page
        ("off", [("a", "d1", 1), ("b", "d1", 1)], [None, None]),
        ("exact", [("a", "d1", 1), ("b", "d1", 1), ("c", "d2", 1)], [None, ("exact", "a"), None]),
        ("exact", [("a", None, 1), ("b", None, 1)], [None, None]),  # empty bodies
        ("exact", [("a", "d1", None), ("a", "d1", None)], [None, None]),  # same URL again
        (
            "near",
            [("a", "d1", 0b0), ("b", "d2", 0b111), ("c", "d3", 0b1111), ("d", "d1", 0)],
            [None, ("near", "a"), None, ("exact", "a")],
        ),
        ("near", [("a", "d1", None), ("b", "d2", None)], [None, None]),  # not HTML
    ],
)
def test_deduper_table(
    mode: str,
    pages: list[tuple[str, str | None, int | None]],
    expected: list[tuple[str, str] | None],
) -> None:
    d = Deduper(mode)
    got = []
    for url, digest, fp in pages:
        dup = d.check(url, digest, fp)
        got.append(None if dup is None else (dup.kind, dup.of))
    assert got == expected


def test_deduper_a_duplicate_is_never_an_original() -> None:
    d = Deduper("near", 3)
    assert d.check("a", "d1", 0) is None
    assert d.check("b", "d2", 0b111) is not None  # near a, not remembered
    dup = d.check("c", "d3", 0b111111)  # 3 from b, 6 from a: b was never an original
    assert dup is None


def test_deduper_rebuild_matches_the_live_run() -> None:
    rows = [
        ("a", "d1", simhash_hex(0), False),
        ("b", "d1", simhash_hex(0), True),
        ("c", "d2", "zz-not-hex", False),
        ("e", None, None, False),
    ]
    d = Deduper("near")
    assert d.rebuild(rows) == 2
    assert d.check("x", "d1", None) is not None
    dup = d.check("y", "d9", 0b11)
    assert dup is not None and (dup.kind, dup.of) == ("near", "a")
    dup = d.check("z", "d2", None)
    assert dup is not None and dup.of == "c"


def test_deduper_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="dedup mode"):
        Deduper("fuzzy")


def test_words_with_digits_are_left_out_and_shingles_counted_once() -> None:
    a = "Generated 2025-10-21 07:28:00 for session 8f3a2c " + LOREM
    b = "Generated 2026-01-02 23:59:59 for session 77b1e0 " + LOREM
    assert simhash(a) == simhash(b)
    assert simhash("v1 v2 v3 2025") == 0
    assert simhash("x y z 12 x y z") == simhash("x y z x y z") == simhash("x y z x y z x y z")
    # number-heavy pages are not all alike (they were when numbers were one token)
    c = " ".join(f"{w} {i} {i * 7}" for i, w in enumerate(LOREM.split()))
    d = " ".join(f"{i} {w} {i + 3}" for i, w in enumerate(reversed(LOREM.split())))
    assert hamming(simhash(c), simhash(d)) > 10
