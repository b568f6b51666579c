"""Tests for skitter.links: link extraction, base URL, meta refresh, robots, C08/C10/C11."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser, LexborNode

from skitter import html_depth, links
from skitter.links import (
    MAX_ANCHOR_CHARS,
    extract,
    parse_refresh,
    parse_robots_directives,
)
from skitter.models import Link, Page

SITE = "http://www.example.test"
RU = "Привет"


def urls_of(page: Page) -> list[str | None]:
    return [link.url for link in page.links]


def one(page: Page) -> Link:
    assert len(page.links) == 1, page.links
    return page.links[0]


# --------------------------------------------------------------------------------------
# C08: base href
# --------------------------------------------------------------------------------------


def test_c08_page_a_base_after_commented_base_and_filler() -> None:
    filler = "<!-- " + "filler " * 860 + " -->"  # ~6000 bytes
    assert len(filler) >= 6000
    html = f"""<!doctype html><html><head>
<!-- <base href="http://www.www.example.test/"> -->
{filler}
<base href="/forum/">
<base href="http://ignored.example.test/">
</head><body>
<a href="index.php/file/9/">file</a>
<a href="/abs.html">abs</a>
<a href="//cdn.example.test/lib.js">cdn</a>
<!-- <a href="/old-section/">old</a> -->
</body></html>"""
    page = extract(html.encode(), f"{SITE}/forum/index.php/msg/7/")
    assert urls_of(page) == [
        "http://www.example.test/forum/index.php/file/9/",
        "http://www.example.test/abs.html",
        "http://cdn.example.test/lib.js",
    ]
    assert page.base_url == "http://www.example.test/forum/"
    assert [link.raw for link in page.links] == [
        "index.php/file/9/",
        "/abs.html",
        "//cdn.example.test/lib.js",
    ]


def test_c08_page_b_relative_base() -> None:
    html = (
        '<html><head><base href="page.html"></head><body><a href="?p=2">next</a>'
        '<a href="sub/">sub</a></body></html>'
    )
    page = extract(html.encode(), f"{SITE}/dir/page.html")
    assert urls_of(page) == [
        "http://www.example.test/dir/page.html?p=2",
        "http://www.example.test/dir/sub/",
    ]


def test_base_applies_to_links_before_it_and_in_body() -> None:
    html = '<a href="x">x</a><base href="http://other.test/b/"><a href="y">y</a>'
    assert urls_of(extract(html.encode(), f"{SITE}/p")) == [
        "http://other.test/b/x",
        "http://other.test/b/y",
    ]


def test_base_without_href_is_skipped_and_bad_base_falls_back() -> None:
    html = '<base target="_top"><base href="/a/"><a href="x">x</a>'
    assert urls_of(extract(html.encode(), f"{SITE}/p")) == [f"{SITE}/a/x"]
    bad = '<base href="http://[bad"><a href="x">x</a>'
    page = extract(bad.encode(), f"{SITE}/d/p")
    assert page.base_url == f"{SITE}/d/p"
    assert urls_of(page) == [f"{SITE}/d/x"]


def test_base_far_into_the_document_is_honoured() -> None:
    html = "<head>" + "<!-- pad -->" * 1000 + '<base href="/deep/"></head><a href="x">x</a>'
    assert urls_of(extract(html.encode(), f"{SITE}/p")) == [f"{SITE}/deep/x"]


# --------------------------------------------------------------------------------------
# C10: meta refresh, noscript, comments
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "html", "expected"),
    [
        (
            "/m1",
            '<html><head><META HTTP-EQUIV=REFRESH CONTENT="0; URL=/landing/"></head></html>',
            ["http://www.example.test/landing/"],
        ),
        (
            "/m2",
            '<meta http-equiv="refresh" content="0;url=\'https://www.example.test/start\'">',
            ["https://www.example.test/start"],
        ),
        (
            "/m3",
            '<meta http-equiv="refresh" content="0; URL=\n   /next.html">',
            ["http://www.example.test/next.html"],
        ),
        ("/m4", '<meta http-equiv="refresh" content="30">', []),
        (
            "/m5",
            '<head><base href="/sub/"><meta http-equiv="refresh" content="2;URL=target.html">'
            "</head>",
            ["http://www.example.test/sub/target.html"],
        ),
        (
            "/m6",
            '<html><body><noscript><a href="/nojs/list.html">All items</a></noscript>'
            '<!-- <a href="/draft/unpublished.html">draft</a> --></body></html>',
            ["http://www.example.test/nojs/list.html"],
        ),
    ],
)
def test_c10(path: str, html: str, expected: list[str]) -> None:
    page = extract(html.encode(), SITE + path)
    assert urls_of(page) == expected
    if expected and path != "/m6":
        assert page.links[0].kind == "refresh"


def test_c10_m6_link_details() -> None:
    html = (
        '<html><body><noscript><a href="/nojs/list.html">All items</a></noscript>'
        '<!-- <a href="/draft/unpublished.html">draft</a> --></body></html>'
    )
    assert one(extract(html.encode(), f"{SITE}/m6")) == Link(
        "http://www.example.test/nojs/list.html", "/nojs/list.html", "a", "All items", False
    )


def test_noscript_in_head_and_document_order() -> None:
    html = (
        '<html><head><noscript><link rel="canonical" href="/ns-canon"></noscript>'
        '<link rel="canonical" href="/canon"></head><body><a href="/1">1</a>'
        '<noscript><a href="/2">2</a></noscript><a href="/3">3</a></body></html>'
    )
    page = extract(html.encode(), f"{SITE}/p")
    assert [(lk.kind, lk.raw) for lk in page.links] == [
        ("canonical", "/ns-canon"),
        ("canonical", "/canon"),
        ("a", "/1"),
        ("a", "/2"),
        ("a", "/3"),
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0; URL=/landing/", "/landing/"),
        ("0;url='https://x.test/start'", "https://x.test/start"),
        ('0; url="/q" trailing', "/q"),
        ("0; URL=\n   /next.html", "/next.html"),
        ("  5 ;  /plain", "/plain"),
        ("5, /comma", "/comma"),
        ("0 /space", "/space"),
        ("1.5; url=/frac", "/frac"),
        (".5; url=/dot", "/dot"),
        ("0; URL = '/spaced'", "/spaced"),
        ("0; url='/unterminated", "/unterminated"),
        ("0; u/x", "u/x"),  # "u" not followed by "rl=": the whole rest is the URL
        ("0; urlx", "urlx"),
        ("0; url=", ""),
        ("30", None),
        ("0;", None),
        ("0; ", None),
        ("", None),
        ("abc", None),
        ("; url=/x", None),
        ("1x; url=/x", None),
        ("-1; url=/x", None),
    ],
)
def test_parse_refresh(content: str, expected: str | None) -> None:
    assert parse_refresh(content) == expected


def test_refresh_with_empty_url_targets_base() -> None:
    page = extract(b'<meta http-equiv="refresh" content="0; url=">', f"{SITE}/a/b#f")
    assert one(page).url == f"{SITE}/a/b"


def test_meta_without_content_or_other_equiv_ignored() -> None:
    html = (
        '<meta http-equiv="refresh"><meta http-equiv="content-type" content="0; url=/x">'
        '<meta name="refresh" content="0; url=/y">'
    )
    assert extract(html.encode(), f"{SITE}/").links == []


# --------------------------------------------------------------------------------------
# C11: charsets end to end
# --------------------------------------------------------------------------------------


def test_c11_c1_bom_beats_header() -> None:
    body = b"\xef\xbb\xbf" + f"<!doctype html><title>{RU}</title>".encode()
    page = extract(body, f"{SITE}/c1", "text/html; charset=windows-1251")
    assert page.title == RU
    assert page.encoding == "utf-8"


def test_c11_c2_header_beats_meta() -> None:
    body = f'<meta charset="windows-1251"><title>{RU}</title>'.encode()
    page = extract(body, f"{SITE}/c2", "text/html; charset=utf-8")
    assert page.title == RU
    assert page.encoding == "utf-8"


def test_c11_c3_meta_http_equiv_and_query_encoding() -> None:
    body = (
        '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251"><title>'
        + RU
        + '</title><a href="/поиск?q=Привет">s</a>'
    ).encode("cp1251")
    page = extract(body, f"{SITE}/c3", "text/html")
    assert page.title == RU
    assert page.encoding == "cp1251"
    link = one(page)
    assert link.raw == "/поиск?q=Привет"
    assert link.url == (
        "http://www.example.test/%D0%BF%D0%BE%D0%B8%D1%81%D0%BA?q=%CF%F0%E8%E2%E5%F2"
    )


def test_utf8_bytes_parsed_as_given_else_the_decoded_text() -> None:
    body = "<title>Café</title><a href='/é?q=é'>naïve</a>".encode()
    assert links._utf8_source(body, body.decode(), "utf-8") is body
    assert links._utf8_source(b"\xef\xbb\xbfab", "ab", "utf-8") == b"ab"  # BOM left out
    assert links._utf8_source(b"a\xffb", "a\ufffdb", "utf-8") == "a\ufffdb"  # replaced
    assert links._utf8_source(b"caf\xe9", "café", "cp1252") == "café"
    for prefix in (b"", b"\xef\xbb\xbf"):
        page = extract(prefix + body, f"{SITE}/")
        assert (page.title, page.encoding) == ("Café", "utf-8")
        assert [(lk.url, lk.anchor) for lk in page.links] == [(f"{SITE}/%C3%A9?q=%C3%A9", "naïve")]
    # invalid UTF-8 declared as UTF-8: decoded with U+FFFD, as before
    page = extract(
        b"<a href='/x\xff'>caf\xe9 \xef\xbf\xbd</a>", f"{SITE}/", "text/html; charset=utf-8"
    )
    assert [(lk.url, lk.anchor) for lk in page.links] == [
        (f"{SITE}/x%EF%BF%BD", "caf\ufffd \ufffd")
    ]


def test_c11_c4_undeclared_utf8() -> None:
    page = extract(f"<title>{RU}</title>".encode(), f"{SITE}/c4")
    assert page.title == RU
    assert page.encoding == "utf-8"


@pytest.mark.parametrize(
    ("title", "text", "encoding", "codec"),
    [
        (
            "日本語のページ",
            "これは日本語で書かれたテストページです。東京は日本の首都です。"
            "私たちはウェブクローラーを作っています。",
            "shift_jis",
            "cp932",
        ),
        (
            "中文网页",
            "这是一个用中文写的测试页面。北京是中国的首都。我们正在编写一个网络爬虫程序。",
            "gbk",
            "gb18030",
        ),
        (
            "Café crème",
            "Le café est très bon à Paris. Où est la bibliothèque? Ça va très "
            "bien, merci. Les élèves étudient le français à l'école.",
            "latin-1",
            "cp1252",
        ),
    ],
)
def test_c11_undeclared_legacy_pages(title: str, text: str, encoding: str, codec: str) -> None:
    html = f"<html><head><title>{title}</title></head><body><p>{text}</p><a href='/x'>{title}</a>"
    page = extract(html.encode(encoding), f"{SITE}/c5", "text/html")
    assert page.encoding == codec
    assert page.title == title
    assert one(page).anchor == title


def test_shift_jis_query_encoded_in_document_encoding() -> None:
    body = '<meta charset="shift_jis"><a href="/検索?q=日本#日本">s</a>'.encode("cp932")
    link = one(extract(body, f"{SITE}/", "text/html"))
    # path and fragment UTF-8, query Shift_JIS (93 FA 96 7B); "{" is not percent-encoded.
    assert link.url == f"{SITE}/%E6%A4%9C%E7%B4%A2?q=%93%FA%96{{#%E6%97%A5%E6%9C%AC"


def test_utf16_document_uses_utf8_for_queries() -> None:
    body = "\ufeff<a href='/x?q=é'>e</a>".encode("utf-16-le")
    page = extract(body, f"{SITE}/", "text/html")
    assert page.encoding == "utf-16-le"
    assert one(page).url == f"{SITE}/x?q=%C3%A9"


# --------------------------------------------------------------------------------------
# Element kinds, attributes, anchors
# --------------------------------------------------------------------------------------


def test_all_kinds_in_document_order() -> None:
    html = """<html><head>
<link rel="stylesheet" href="/s.css"><link rel="Canonical" href="/canonical">
<meta http-equiv="refresh" content="10; url=/refreshed">
<title>  Kinds\n of   links </title></head><body>
<a href="/a">A <b>bold</b>
  text</a>
<map><area href="/area" alt="  Area   alt "><area alt="no href"></map>
<iframe src="/if.html"></iframe><iframe src=""></iframe><iframe></iframe>
<img src="/img.png"><script src="/s.js"></script>
</body></html>"""
    page = extract(html.encode(), f"{SITE}/k")
    assert [(lk.kind, lk.url, lk.anchor) for lk in page.links] == [
        ("canonical", f"{SITE}/canonical", ""),
        ("refresh", f"{SITE}/refreshed", ""),
        ("a", f"{SITE}/a", "A bold text"),
        ("area", f"{SITE}/area", "Area alt"),
        ("iframe", f"{SITE}/if.html", ""),
    ]
    assert page.title == "Kinds of links"
    assert page.links[1].raw == "/refreshed"


# The fast path (links._candidates): head elements + every <a>, when no <area>/<frame>/
# <iframe> exists and <link>/<meta>/<base>/<title> are all in <head>; else the selector list.


def test_fast_path_head_then_body_links_in_order() -> None:
    html = (
        '<html><head><base target="_top"><base href="/b/"><title>T</title>'
        '<meta http-equiv="refresh" content="5; url=r"><link rel="canonical" href="c">'
        '<noscript><link rel="canonical" href="c2"></noscript></head><body>'
        '<a href="x">X <b>bold</b></a><svg><a xlink:href="s">svg</a></svg><a>none</a>'
        '<a href="y" rel="nofollow">Y</a></body></html>'
    )
    page = extract(html.encode(), f"{SITE}/d/p")
    assert page.base_url == f"{SITE}/b/"
    assert page.title == "T"
    assert [(lk.kind, lk.url, lk.anchor, lk.nofollow) for lk in page.links] == [
        ("refresh", f"{SITE}/b/r", "", False),
        ("canonical", f"{SITE}/b/c", "", False),
        ("canonical", f"{SITE}/b/c2", "", False),
        ("a", f"{SITE}/b/x", "X bold", False),
        ("a", f"{SITE}/b/s", "svg", False),
        ("a", f"{SITE}/b/y", "Y", True),
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # a <link> in the body comes after the links before it
        ('<a href="/1">1</a><link rel="canonical" href="/c"><a href="/2">2</a>',
         [("a", "/1"), ("canonical", "/c"), ("a", "/2")]),
        ('<a href="/1">1</a><meta http-equiv="refresh" content="0;url=/r"><a href="/2">2</a>',
         [("a", "/1"), ("refresh", "/r"), ("a", "/2")]),
        ('<a href="/1">1</a><map><area href="/m"></map><a href="/2">2</a>',
         [("a", "/1"), ("area", "/m"), ("a", "/2")]),
        ('<a href="/1">1</a><iframe src="/i"></iframe><a href="/2">2</a>',
         [("a", "/1"), ("iframe", "/i"), ("a", "/2")]),
        # a <base> in the body (the head has none) still counts, for links before it too
        ('<a href="1">1</a><base href="/b/"><a href="2">2</a>', [("a", "/b/1"), ("a", "/b/2")]),
    ],
)  # fmt: skip
def test_elements_outside_head_keep_document_order(
    body: str, expected: list[tuple[str, str]]
) -> None:
    html = f"<html><head><title>T</title></head><body>{body}</body></html>"
    page = extract(html.encode(), f"{SITE}/d/p")
    assert [(lk.kind, lk.url) for lk in page.links] == [(k, SITE + u) for k, u in expected]


def test_title_from_svg_only_when_head_has_none() -> None:
    svg = '<body><svg><title>Icon</title></svg><a href="/x">x</a></body>'
    assert extract(f"<head></head>{svg}".encode(), f"{SITE}/").title == "Icon"
    assert extract(f"<head><title>Page</title></head>{svg}".encode(), f"{SITE}/").title == "Page"


def test_valueless_base_href_means_document_url() -> None:
    page = extract(b'<head><base href><base href="/b/"></head><a href="x">x</a>', f"{SITE}/d/p")
    assert page.base_url == f"{SITE}/d/p"
    assert urls_of(page) == [f"{SITE}/d/x"]


def test_frameset() -> None:
    html = (
        "<html><head><title>F</title></head><frameset cols='50%,50%'>"
        '<frame src="left.html"><frame src="/right.html"><frame></frameset></html>'
    )
    page = extract(html.encode(), f"{SITE}/f/index.html")
    assert [(lk.kind, lk.url) for lk in page.links] == [
        ("frame", f"{SITE}/f/left.html"),
        ("frame", f"{SITE}/right.html"),
    ]


def test_href_without_value_skipped_empty_href_is_page() -> None:
    html = '<a href>valueless</a><a>none</a><a href="">empty</a><area href><area href="">'
    page = extract(html.encode(), f"{SITE}/page?x=1#frag")
    assert [(lk.kind, lk.url, lk.raw, lk.anchor) for lk in page.links] == [
        ("a", f"{SITE}/page?x=1", "", "empty"),
        ("area", f"{SITE}/page?x=1", "", ""),
    ]


def test_raw_kept_url_resolved_with_whitespace_stripped() -> None:
    page = extract(b'<a href="  /x y\n\tz ">t</a>', f"{SITE}/")
    link = one(page)
    assert link.raw == "  /x y\n\tz "
    assert link.url == f"{SITE}/x%20yz"


def test_unparseable_href_gives_none_url() -> None:
    page = extract(b'<a href="http://[::1">bad</a><a href="/ok">ok</a>', f"{SITE}/")
    assert urls_of(page) == [None, f"{SITE}/ok"]


def test_character_references_decoded() -> None:
    page = extract(b'<a href="/a?x=1&amp;y=2&lt">t &amp; u</a>', f"{SITE}/")
    link = one(page)
    assert link.raw == "/a?x=1&y=2<"
    assert link.anchor == "t & u"


def test_anchor_whitespace_collapse_and_cap() -> None:
    words = " \n\t ".join(["word"] * 200)
    page = extract(f'<a href="/x">  {words}  </a>'.encode(), f"{SITE}/")
    anchor = one(page).anchor
    assert len(anchor) <= MAX_ANCHOR_CHARS
    assert anchor == " ".join(["word"] * 200)[:MAX_ANCHOR_CHARS].rstrip()
    assert "  " not in anchor and not anchor.endswith(" ")
    long = "x" * 1000
    assert one(extract(f'<a href="/x">{long}</a>'.encode(), f"{SITE}/")).anchor == "x" * 256


def test_anchor_non_ascii_whitespace() -> None:
    page = extract("<a href='/x'>\n  Grüße\u00a0 aus \t München  </a>".encode(), f"{SITE}/")
    # ASCII whitespace collapses; NBSP is text (as in document.title).
    assert one(page).anchor == "Grüße\u00a0 aus München"


def test_svg_links() -> None:
    html = (
        '<svg><a href="/svg2"><text>two</text></a><a xlink:href="/svg1">one</a>'
        "<title>svg title</title></svg><title>real</title>"
    )
    page = extract(html.encode(), f"{SITE}/")
    assert [(lk.kind, lk.url, lk.anchor) for lk in page.links] == [
        ("a", f"{SITE}/svg2", "two"),
        ("a", f"{SITE}/svg1", "one"),
    ]


def test_links_inside_template_script_comment_textarea_ignored() -> None:
    html = (
        '<template><a href="/tpl">t</a></template>'
        '<script>document.write("<a href=\\"/js\\">js</a>")</script>'
        '<textarea><a href="/ta">ta</a></textarea>'
        '<!-- <a href="/c">c</a> --><a href="/real">real</a>'
    )
    assert urls_of(extract(html.encode(), f"{SITE}/")) == [f"{SITE}/real"]


def test_title_first_only_and_missing() -> None:
    page = extract(b"<title>One</title><title>Two</title>", f"{SITE}/")
    assert page.title == "One"
    assert extract(b"<p>no title</p>", f"{SITE}/").title == ""


# --------------------------------------------------------------------------------------
# nofollow / noindex
# --------------------------------------------------------------------------------------


def test_rel_nofollow_on_one_link() -> None:
    html = (
        '<a href="/1">1</a><a href="/2" rel="NoFollow">2</a><a href="/3" rel="ugc nofollow">3'
        '</a><a href="/4" rel="nofollower">4</a><link rel="canonical nofollow" href="/c">'
    )
    page = extract(html.encode(), f"{SITE}/")
    assert [(lk.raw, lk.nofollow) for lk in page.links] == [
        ("/1", False),
        ("/2", True),
        ("/3", True),
        ("/4", False),
        ("/c", True),
    ]
    assert not page.nofollow and not page.noindex


@pytest.mark.parametrize(
    ("meta", "noindex", "nofollow"),
    [
        ('<meta name="robots" content="noindex, nofollow">', True, True),
        ('<meta name="ROBOTS" content="NOFOLLOW">', False, True),
        ('<meta name="robots" content="noindex">', True, False),
        ('<meta name="robots" content="none">', True, True),
        ('<meta name="robots" content="index,follow">', False, False),
        ('<meta name="googlebot" content="noindex,nofollow">', False, False),
        ('<meta name="description" content="noindex nofollow">', False, False),
    ],
)
def test_meta_robots(meta: str, noindex: bool, nofollow: bool) -> None:
    page = extract(f'<head>{meta}</head><a href="/x">x</a>'.encode(), f"{SITE}/")
    assert (page.noindex, page.nofollow) == (noindex, nofollow)
    assert one(page).nofollow == nofollow


def test_meta_robots_for_own_bot_token() -> None:
    html = b'<meta name="skitter" content="nofollow"><a href="/x">x</a>'
    assert not extract(html, f"{SITE}/").nofollow
    page = extract(html, f"{SITE}/", bot_token="Skitter")
    assert page.nofollow and one(page).nofollow


def test_page_nofollow_applies_to_every_kind() -> None:
    html = (
        '<meta name="robots" content="nofollow"><link rel="canonical" href="/c">'
        '<meta http-equiv="refresh" content="0;url=/r"><iframe src="/i"></iframe>'
        '<a href="/a">a</a><area href="/ar">'
    )
    page = extract(html.encode(), f"{SITE}/")
    assert len(page.links) == 5
    assert all(lk.nofollow for lk in page.links)


@pytest.mark.parametrize(
    ("headers", "noindex", "nofollow"),
    [
        (["noindex"], True, False),
        (["nofollow"], False, True),
        (["none"], True, True),
        (["NoIndex, NoFollow"], True, True),
        (["noindex", "nofollow"], True, True),
        (["otherbot: noindex"], False, False),
        (["otherbot: noindex, nofollow"], False, False),
        (["otherbot: noindex", "nofollow"], False, True),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST"], False, False),
        (["max-snippet: 20, noindex"], True, False),
        (["all"], False, False),
        ([], False, False),
    ],
)
def test_x_robots_tag(headers: list[str], noindex: bool, nofollow: bool) -> None:
    assert parse_robots_directives(headers) == (noindex, nofollow)
    page = extract(b'<a href="/x">x</a>', f"{SITE}/", "text/html", headers)
    assert (page.noindex, page.nofollow) == (noindex, nofollow)
    assert one(page).nofollow == nofollow


def test_x_robots_tag_scoped_to_own_bot() -> None:
    assert parse_robots_directives(["skitter: none"], ["skitter"]) == (True, True)
    assert parse_robots_directives(["SKITTER: noindex"], ["skitter"]) == (True, False)
    page = extract(b"<p>x</p>", f"{SITE}/", None, ["skitter: noindex"], bot_token="skitter")
    assert page.noindex


# --------------------------------------------------------------------------------------
# Robustness
# --------------------------------------------------------------------------------------


def test_deeply_nested_divs_still_yield_links() -> None:
    html = "<div>" * 10_000 + '<a href="/deep">deep</a>' + "</div>" * 10_000
    html += '<a href="/after">after</a>'
    page = extract(html.encode(), f"{SITE}/")
    assert urls_of(page) == [f"{SITE}/deep", f"{SITE}/after"]


@pytest.mark.parametrize(
    "html",
    [
        "<div>" * 60_000 + '<a href="/x">x</a>',
        "<x>" * 30_000 + '<a href="/x">x</a>' + "</y>" * 30_000,
        "<ul><li>" * 30_000 + '<a href="/x">x</a>',
        "<table><tr><td>" * 20_000 + '<a href="/x">x</a>',
        "<div>" * 30_000 + '<a href="/x">x</a>' + "</div>" * 30_000,
    ],
    ids=["divs", "unknown-unmatched", "lists", "tables", "balanced-divs"],
)
def test_pathological_nesting_is_not_quadratic(html: str) -> None:
    # Unbounded, the tree builder needs ~10+ s for these; the depth guard keeps them fast.
    start = time.perf_counter()
    page = extract(html.encode(), f"{SITE}/")
    assert time.perf_counter() - start < 5.0
    assert urls_of(page) == [f"{SITE}/x"]


def test_depth_guard_leaves_big_shallow_pages_alone() -> None:
    row = (
        '<tr><td><a href="/r">row</a> <img src="i.png"><br><input name=q></td>'
        '<td><svg><path d="M0"/><path d="M1"/></svg></td></tr>'
    )
    html = "<table>" + row * 2_000 + "</table>"
    assert html.count("<") >= html_depth._DEEP_CHECK_MIN_TAGS
    assert not html_depth._may_be_deep(html)
    assert links._flatten_deep(html) is html
    assert len(extract(html.encode(), f"{SITE}/").links) == 2_000


def _may_be_deep_in_one_pass(text: str) -> bool:
    """The depth estimate as first written: all six counts on every window."""
    depth = 0
    for i in range(0, len(text), html_depth._DEEP_WINDOW_CHARS):
        w = text[i : i + html_depth._DEEP_WINDOW_CHARS]
        depth += (
            w.count("<") - 2 * w.count("</") - w.count("<!") - w.count("/>")
            - w.count("<br") - w.count("<img")
        )  # fmt: skip
        if depth > html_depth._DEEP_SUSPECT:
            return True
    return False


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["<div>", "<div>", "</div>", "<br>", "<img src=x>", "<!-- c -->", "<p/>", "a"]
        ),
        min_size=0,
        max_size=12,
    ),
    st.integers(min_value=1, max_value=3_000),
)
def test_depth_estimate_equals_the_six_count_estimate(parts: list[str], times: int) -> None:
    # the two-count first pass only bounds the estimate: the verdict is the same (the
    # strings reach all three cases: bound under the limit, over it but not deep, deep)
    html = "".join(parts) * times
    assert html_depth._may_be_deep(html) == _may_be_deep_in_one_pass(html)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(["<div>", "</div>", "<br>", "<i>", "<!-- c -->", "a", "<", "</"]),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=60),
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=1, max_value=50),
)
def test_is_deep_is_the_tag_count_and_the_estimate(
    parts: list[str], times: int, min_tags: int, window: int
) -> None:
    # one pass for the "<" of each window (kept for the bound), counts in place: the same
    # verdict as the whole-text count followed by the sliced windows' estimate. Small
    # thresholds and windows (a "</" across a window's edge counts in neither) reach every
    # case: too few tags, enough but shallow, a bound over the limit, deep.
    html = "".join(parts) * times
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(html_depth, "_DEEP_CHECK_MIN_TAGS", min_tags)
        mp.setattr(html_depth, "_DEEP_SUSPECT", 8)
        mp.setattr(html_depth, "_DEEP_WINDOW_CHARS", window)
        expected = len(html) >= 3 * min_tags and html.count("<") >= min_tags and any(
            sum(
                _six_counts(html[j : j + window])
                for j in range(0, i + window, window)
            ) > 8
            for i in range(0, len(html), window)
        )  # fmt: skip
        assert html_depth.is_deep(html) == expected


def _six_counts(w: str) -> int:
    return (
        w.count("<") - 2 * w.count("</") - w.count("<!") - w.count("/>")
        - w.count("<br") - w.count("<img")
    )  # fmt: skip


def test_depth_guard_checks_the_shortest_text_that_can_hold_enough_tags() -> None:
    # "<i>" is the shortest tag: 3 characters each. A page of exactly that many is still
    # checked (and flattened: the <i>s nest), one character less cannot hold enough tags.
    n = html_depth._DEEP_CHECK_MIN_TAGS
    called: list[int] = []
    real = links._flatten_deep

    def spy(text: str) -> str:
        called.append(len(text))
        return real(text)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(links, "_flatten_deep", spy)
        page = extract(("<i>" * n).encode(), f"{SITE}/")
        assert called == [3 * n] and page.links == []
        extract(("<i>" * (n - 1) + "<i").encode(), f"{SITE}/")
        assert called == [3 * n]


def test_depth_guard_false_alarm_changes_nothing() -> None:
    # Thousands of unclosed <p>/<li> trip the cheap estimate; the tokenizer model knows
    # they close each other and leaves the text alone.
    html = "<ul>" + "<li><p>item <a href='/i'>i</a>" * 6_000 + "</ul>"
    assert html_depth._may_be_deep(html)
    assert links._flatten_deep(html) is html
    assert len(extract(html.encode(), f"{SITE}/").links) == 6_000


def test_depth_guard_keeps_comments_and_raw_text() -> None:
    html = (
        "<div>" * 30_000
        + '<!-- <a href="/c">c</a> --><script>"<a href=/s>"</script>'
        + '<title>T</title><a href="/x">x <b>y</b></a>'
        + "</div>" * 30_000
    )
    page = extract(html.encode(), f"{SITE}/")
    assert [(lk.url, lk.anchor) for lk in page.links] == [(f"{SITE}/x", "x y")]
    assert page.title == "T"


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x00",
        b"\xff\xfe",
        b"\xfe\xff\x00",
        b"\xef\xbb\xbf",
        b"<a href='\x00'>\x00</a>",
        b"<a href='\xff\xfe'>x</a>",
        b"<base href='javascript:alert(1)'><a href=y>y</a>",
        b"<base href='data:,x'><a href=y>y</a>",
        b"<meta http-equiv=refresh content='0;url=http://[::1'>",
        b"<" * 10_000,
        b"<!--" * 5_000,
        b"<a href=" + b"x" * 100_000 + b">",
    ],
)
def test_never_raises_on_odd_input(body: bytes) -> None:
    page = extract(body, f"{SITE}/")
    assert isinstance(page, Page)


def test_invalid_document_url() -> None:
    # urls.join gives None whenever the base is not a valid URL; nothing raises.
    page = extract(b'<a href="/x">x</a><a href="http://ok.test/">ok</a>', "not a url")
    assert [lk.raw for lk in page.links] == ["/x", "http://ok.test/"]
    assert urls_of(page) == [None, None]


_HTML_PIECES = st.sampled_from(
    [
        "<a href='/x'>",
        "</a>",
        "<a href>",
        "<base href='/b/'>",
        "<!--",
        "-->",
        "<noscript>",
        "</noscript>",
        "<meta http-equiv=refresh content='0;url=/r'>",
        "<svg>",
        "</svg>",
        "<math>",
        "<table>",
        "<template>",
        "<script>",
        "</script>",
        "<area href=a alt=b>",
        "<iframe src=/i>",
        "</iframe>",
        "<frameset><frame src=f>",
        "<title>",
        "</title>",
        "<meta charset=cp1251>",
        "<meta name=robots content=none>",
        "<link rel=canonical href=c>",
        "\x00",
        "&amp;",
        "&#0;",
        "&#xD800;",
        "é",
        "\ufeff",
        "<p>",
        "<div>",
        "</div>",
        '"',
        "'",
        "<a href='?q=Привет'>",
        "<plaintext>",
        "<select>",
        "<option>",
        "<textarea>",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(max_size=2000),
    ct=st.sampled_from([None, "text/html", "text/html; charset=shift_jis"]),
)
def test_fuzz_bytes_never_raise(body: bytes, ct: str | None) -> None:
    page = extract(body, f"{SITE}/dir/page.html", ct)
    for link in page.links:
        assert link.kind in {"a", "area", "frame", "iframe", "canonical", "refresh"}
        assert len(link.anchor) <= MAX_ANCHOR_CHARS


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.one_of(_HTML_PIECES, st.text(max_size=20)), max_size=60),
    encoding=st.sampled_from(["utf-8", "utf-16-le", "cp1251"]),
)
def test_fuzz_markup_never_raises(pieces: list[str], encoding: str) -> None:
    body = "".join(pieces).encode(encoding, "replace")
    page = extract(body, f"{SITE}/dir/page.html")
    assert page.encoding
    for link in page.links:
        assert (
            link.url is None or "://" in link.url or link.url.startswith(("data:", "javascript:"))
        )


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.one_of(_HTML_PIECES, st.text(max_size=10)), max_size=80))
def test_fuzz_depth_guard_forced_on(pieces: list[str]) -> None:
    html = "".join(pieces) + '<a href="/last">last</a>'
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(html_depth, "_DEEP_CHECK_MIN_TAGS", 0)
        mp.setattr(html_depth, "_DEEP_SUSPECT", -1)
        mp.setattr(html_depth, "_MAX_DEPTH", 3)
        page = extract(html.encode(), f"{SITE}/")
    assert isinstance(page, Page)
    if all(p in ("<div>", "</div>", "<p>", "<table>", "é", "&amp;") for p in pieces):
        assert urls_of(page)[-1] == f"{SITE}/last"


def _selector_matches(node: LexborNode) -> bool:
    """Whether ``node`` (a candidate) has what links._SELECTOR asks of its tag."""
    attrs = node.attributes
    needs = {"a": ("href", "xlink:href"), "area": ("href",), "frame": ("src",),
             "iframe": ("src",), "link": ("href",), "meta": ("content",), "base": ("href",),
             "title": ()}[node.tag]  # fmt: skip
    return not needs or any(name in attrs for name in needs)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.one_of(_HTML_PIECES, st.text(max_size=10)), max_size=60))
def test_candidates_are_the_selectors_elements(pieces: list[str]) -> None:
    html = "".join(pieces)
    tree = LexborHTMLParser(html)
    expected = [n.mem_id for n in tree.css(links._SELECTOR)]
    got = [n for n in links._candidates(tree) if _selector_matches(n)]
    assert [n.mem_id for n in got] == expected

