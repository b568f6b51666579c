"""Large pages are parsed segment by segment (skitter.html_chunks): same links, bounded memory."""

from __future__ import annotations

import itertools
import tracemalloc

import pytest

from skitter.charset import decode_html
from skitter.html_chunks import (
    SEGMENT_BYTES,
    SEGMENT_MIN_BYTES,
    extract_segments,
    segment_bounds,
    sniff,
)
from skitter.links import _extract_whole, extract
from skitter.models import Link, Page

FILLER = b"<div class=line><span class=kw>fn</span> <span>filler</span> text</div>\n" * 300


def big_page(n_links: int, size: int) -> tuple[bytes, list[Link]]:
    """A page of about ``size`` bytes with ``n_links`` links spread evenly through it, plus
    link-like text inside a long comment, a long script and a template (not links)."""
    per = max(1, size // n_links)
    parts = [b"<!DOCTYPE html><html><head><title>Big  page</title></head><body>"]
    expected: list[Link] = []
    hidden = b"<a href=/no>" + b"x" * 100 + b"</a>"
    for i in range(n_links):
        parts.append(b'<p><a href="/p/%d">link <b>%d</b></a>' % (i, i))
        expected.append(Link(f"http://big.test/p/{i}", f"/p/{i}", "a", f"link {i}", False))
        if i == n_links // 3:  # no-cut regions longer than a segment
            parts.append(b"<!-- " + hidden * (SEGMENT_BYTES // len(hidden) + 10) + b" -->")
            parts.append(b"<script>var s = '" + hidden * (SEGMENT_BYTES // len(hidden)) + b"';")
            parts.append(b"</script><template>" + hidden * 5000 + b"</template>")
        filler = FILLER * (per // len(FILLER)) + FILLER[: per % len(FILLER)]
        parts.append(filler)
    parts.append(b"</body></html>")
    return b"".join(parts), expected


def test_a_30_mb_page_gives_every_link_in_memory_that_follows_the_segment() -> None:
    body, expected = big_page(3000, 30 * 1024 * 1024)
    tracemalloc.start()
    try:
        page = extract(body, "http://big.test/", "text/html")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert page.links == expected
    assert (page.title, page.base_url, page.encoding) == ("Big page", "http://big.test/", "utf-8")
    # selectolax allocates Lexbor's tree through Python's allocator, so tracemalloc sees it:
    # ~28 bytes per byte of markup. Parsed whole, this page would peak past 800 MB; by
    # segments, at one segment's tree (the longest segment here, ~2.7 MB, is mostly a
    # comment and a script: text nodes) plus its text.
    assert peak < 48 * SEGMENT_BYTES


def test_pages_over_256_kib_are_parsed_by_segments_in_a_fraction_of_the_memory() -> None:
    """Regression (issue 16, rust-doc --processes 2): pages up to 1 MiB were parsed whole, a
    tree of up to ~28 MB that the parsing process kept resident afterwards (freed into its
    heap); past 256 KiB they are cut, with the same links."""
    assert SEGMENT_MIN_BYTES == 256 * 1024
    rows = [b'<p><a href="/p/%d">link <b>%d</b></a>%s' % (i, i, FILLER[:2900]) for i in range(300)]
    body = b"<!DOCTYPE html><html><head><title>Big page</title></head><body>"
    body += b"".join(rows) + b"</body></html>"
    expected = [Link(f"http://big.test/p/{i}", f"/p/{i}", "a", f"link {i}", False)
                for i in range(300)]  # fmt: skip
    assert SEGMENT_MIN_BYTES < len(body) < 1024 * 1024
    assert len(list(segment_bounds(body))) >= 3

    def peak(fn: object) -> tuple[Page, int]:
        tracemalloc.start()
        try:
            page = fn()  # type: ignore[operator]
            return page, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    url = "http://big.test/"
    page, by_segments = peak(lambda: extract(body, url, "text/html"))
    whole, at_once = peak(
        lambda: _extract_whole(
            body, url, "text/html", (), bot_token=None, resources=False, ids=False
        )
    )
    assert page == whole and page.links == expected
    assert by_segments * 2 < at_once  # (Lexbor's tree is allocated through Python's allocator)


MIXED = (
    '<html><head><meta charset="windows-1252"><base href="/base/dir/">'
    "<title>Caf\xe9</title></head><body>"
    '<a href="x?q=\xe9" rel=nofollow>one <i>two</i></a>'
    '<area href="/area" alt="Map"><iframe src="frame.html"></iframe>'
    '<img src="i.png" srcset="a.png 1x, b.png 2x" alt="pic" id="img1">'
    '<script src="s.js"></script><script>document.write("<a href=/js>")</script>'
    "<!-- <a href=/comment> --><textarea><a href=/ta></textarea>"
    '<select><option><a href="/in-select">s</a></option></select>'
    '<a name="anchor1" href="../up">up</a><link rel=stylesheet href="c.css">'
    '<div id="d1"><table><tr><td><a href="cell">cell</a></td></tr></table></div>\n'
)


def test_segments_give_what_the_whole_page_gives() -> None:
    tail = '<meta name="robots" content="nofollow"><link rel=canonical href="/canon"></body></html>'
    body = (MIXED * 3700 + tail).encode("cp1252")
    assert len(body) > SEGMENT_MIN_BYTES
    assert len(list(segment_bounds(body))) >= 2
    for options in ({}, {"resources": True, "ids": True}):
        whole = _extract_whole(
            body,
            "http://mixed.test/a/b",
            None,
            ("other: noindex",),
            bot_token=None,
            resources=bool(options),
            ids=bool(options),
        )
        page = extract(body, "http://mixed.test/a/b", None, ("other: noindex",), **options)
        assert page == whole
    assert page.nofollow and all(link.nofollow for link in page.links)
    assert page.encoding == "cp1252"
    assert page.base_url == "http://mixed.test/base/dir/"
    assert page.links[0].url == "http://mixed.test/base/dir/x?q=%E9"


def test_cuts_fall_before_a_tag_and_never_inside_a_comment_or_raw_text() -> None:
    body, _ = big_page(100, 8 * SEGMENT_BYTES)
    bounds = list(segment_bounds(body))
    assert bounds[0][0] == 0 and bounds[-1][1] == len(body)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    for _, end in bounds[:-1]:
        assert body[end : end + 1] == b"<"
        before = body[:end]
        assert before.count(b"<!--") == before.count(b"-->")
        assert before.count(b"<script") == before.count(b"</script")
        assert before.count(b"<template") == before.count(b"</template")


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"<p>caf\xc3\xa9" * 10, None),  # UTF-8
        (b"<p>caf\xe9" * 10, None),  # not UTF-8: the detector, else windows-1252
        (b"<p>caf\xc3\xa9 \xe2\x82", None),  # UTF-8 cut off at the end
        (b"\xef\xbb\xbf<p>x", "text/html; charset=latin1"),  # BOM wins
        (b"\xff\xfe<\x00p\x00", None),  # UTF-16LE BOM
        (b'<meta charset="shift_jis"><p>x', None),
        (b"<p>x", "text/html; charset=koi8-r"),
    ],
)
def test_sniff_picks_the_codec_decode_html_picks(body: bytes, content_type: str | None) -> None:
    assert sniff(body, content_type) == decode_html(body, content_type)[1]


def test_a_utf16_page_is_parsed_whole() -> None:
    html = "<p>" + "<a href=/u>u</a>" * 70_000
    body = b"\xff\xfe" + html.encode("utf-16-le")
    page = extract(body, "http://u.test/", None)
    assert len(page.links) == 70_000 and page.encoding == "utf-16-le"


def test_the_pieces_handed_to_the_parser_follow_the_segment_size() -> None:
    line = b'<a href="#%d" id="%d">%d</a> <span class="kw">fn</span> f()\n'
    comment = b"<!-- " + b"<a href=/no>x</a>" * (SEGMENT_BYTES // 17 + 100) + b" -->"
    rows = [line % (i, i, i) for i in range(60_000)]
    body = b"<html><head><title>t</title></head><body><pre>" + b"".join(rows[:30_000])
    body += comment + b"".join(rows[30_000:]) + b"</pre></body></html>"
    assert len(body) > 8 * SEGMENT_BYTES
    pieces: list[int] = []

    def recording(piece: bytes, *args: object, **kw: object) -> Page:
        pieces.append(len(piece))
        return _extract_whole(piece, *args, **kw)  # type: ignore[arg-type]

    opts = {"bot_token": None, "resources": False, "ids": True}
    page = extract_segments(recording, body, "http://s.test/", None, (), **opts)
    assert page == _extract_whole(body, "http://s.test/", None, (), **opts)  # type: ignore[arg-type]
    assert page is not None and len(page.links) == 60_000 and len(page.ids) == 60_000
    assert sum(pieces) == len(body)  # no <base>: every byte once, nothing else
    longest = max(len(r) for r in rows)
    # every piece is a segment's worth, up to the next tag; the one holding the comment (a
    # no-cut region longer than a segment) is that much longer, not a page's worth
    big = [n for n in pieces if n > SEGMENT_BYTES + longest]
    assert len(big) == 1 and big[0] <= SEGMENT_BYTES + len(comment) + longest
    assert len(pieces) >= len(body) // (SEGMENT_BYTES + len(comment))
    assert all(n >= SEGMENT_BYTES for n in pieces[:-1])
