"""sitemaps: formats, gzip layers, hostile XML, caps, the bounded sitemap graph."""

from __future__ import annotations

import gzip

import pytest

from skitter.sitemaps import (
    SitemapGraph,
    gunzip_layers,
    parse_sitemap,
)

BASE = "http://sm.example.test/sitemap.xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'

URLSET = f"""<?xml version="1.0" encoding="UTF-8"?>
<urlset {NS}>
  <url><loc>http://sm.example.test/p/1</loc><lastmod>2025-10-21</lastmod></url>
  <url><loc> /p/2 </loc></url>
  <url><loc>http://sm.example.test/a?x=1&amp;y=2</loc></url>
  <url><lastmod>2025-01-01</lastmod></url>
  <url><loc>mailto:someone@example.test</loc></url>
</urlset>""".encode()

INDEX = f"""<?xml version="1.0"?>
<sitemapindex {NS}>
  <sitemap><loc>http://sm.example.test/sm-a.xml.gz</loc><lastmod>2025-10-01T10:00:00Z</lastmod></sitemap>
  <sitemap><loc>/nest/1.xml</loc></sitemap>
</sitemapindex>""".encode()

RSS = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
<link>http://sm.example.test/</link>
<item><title>a</title><link>http://sm.example.test/post/1</link>
<pubDate>Tue, 21 Oct 2025 07:28:00 GMT</pubDate></item>
<item><link>http://sm.example.test/post/2</link></item></channel></rss>"""

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
<link href="http://sm.example.test/"/>
<entry><link rel="self" href="http://sm.example.test/self/1"/>
<link href="http://sm.example.test/e/1"/><updated>2025-10-21T07:28:00Z</updated></entry>
<entry><link rel="alternate" type="text/html" href="/e/2"/></entry></feed>"""

BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<urlset><url><loc>http://sm.example.test/&lol4;</loc></url></urlset>"""

XXE = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<urlset><url><loc>http://sm.example.test/&xxe;</loc></url></urlset>"""

XXE_PARAM = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY % ext SYSTEM "http://127.0.0.1:9/evil.dtd"> %ext;]>
<urlset><url><loc>http://sm.example.test/ok</loc></url></urlset>"""


def _urls(body: bytes, **kw: int) -> list[tuple[str, str | None]]:
    return [(e.url, e.lastmod) for e in parse_sitemap(body, BASE, **kw).urls]


@pytest.mark.parametrize(
    ("body", "kind", "expected"),
    [
        (
            URLSET,
            "urlset",
            [
                ("http://sm.example.test/p/1", "2025-10-21"),
                ("http://sm.example.test/p/2", None),
                ("http://sm.example.test/a?x=1&y=2", None),
            ],
        ),
        (
            RSS,
            "feed",
            [
                ("http://sm.example.test/post/1", "Tue, 21 Oct 2025 07:28:00 GMT"),
                ("http://sm.example.test/post/2", None),
            ],
        ),
        (
            ATOM,
            "feed",
            [
                ("http://sm.example.test/e/1", "2025-10-21T07:28:00Z"),
                ("http://sm.example.test/e/2", None),
            ],
        ),
        (
            b"\xef\xbb\xbfhttp://sm.example.test/t/1\r\n\n"
            b"  http://sm.example.test/t/2  \nnot a url\n",
            "text",
            [("http://sm.example.test/t/1", None), ("http://sm.example.test/t/2", None)],
        ),
        (  # a robots.txt read as a sitemap: nothing (C35)
            b"User-agent: *\nDisallow: /private/\nSitemap: http://sm.example.test/robots.txt\n",
            "text",
            [],
        ),
        (b"", "unknown", []),
        (b"<html><body>not a sitemap</body></html>", "unknown", []),
        (b"<urlset><url><loc>http://sm.example.test/x</loc>", "urlset", []),  # cut mid-file
    ],
)
def test_formats(body: bytes, kind: str, expected: list[tuple[str, str | None]]) -> None:
    doc = parse_sitemap(body, BASE)
    assert doc.kind == kind
    assert [(e.url, e.lastmod) for e in doc.urls] == expected
    assert doc.sitemaps == []


def test_index_lists_children_with_lastmod() -> None:
    doc = parse_sitemap(INDEX, BASE)
    assert doc.kind == "index"
    assert doc.urls == []
    assert [(e.url, e.lastmod) for e in doc.sitemaps] == [
        ("http://sm.example.test/sm-a.xml.gz", "2025-10-01T10:00:00Z"),
        ("http://sm.example.test/nest/1.xml", None),
    ]
    assert doc.error is None


def test_xml_error_keeps_entries_before_it() -> None:
    body = URLSET.replace(b"<url><lastmod>", b"<url><<<lastmod>")
    doc = parse_sitemap(body, BASE)
    assert [e.url for e in doc.urls][:2] == [
        "http://sm.example.test/p/1",
        "http://sm.example.test/p/2",
    ]
    assert doc.error is not None and doc.error.startswith("XML error")


@pytest.mark.parametrize("body", [BOMB, XXE, XXE_PARAM])
def test_entities_are_refused(body: bytes) -> None:
    doc = parse_sitemap(body, BASE)
    assert doc.urls == []
    assert doc.error is not None and doc.error.startswith("XML refused")


def test_bomb_does_not_expand_even_gzipped() -> None:
    doc = parse_sitemap(gzip.compress(gzip.compress(BOMB)), BASE)
    assert doc.urls == [] and doc.error is not None


@pytest.mark.parametrize("layers", [0, 1, 2, 3])
def test_gzip_layers_undone_whatever_the_count(layers: int) -> None:
    body = URLSET
    for _ in range(layers):
        body = gzip.compress(body)
    data, cut, error = gunzip_layers(body)
    assert (data, cut, error) == (URLSET, False, None)
    assert len(_urls(body)) == 3


def test_gzip_truncated_and_corrupt() -> None:
    gz = gzip.compress(URLSET * 20)
    data, cut, error = gunzip_layers(gz[: len(gz) // 2])
    assert error == "truncated gzip data" and not cut and URLSET.startswith(data[:100])
    data, cut, error = gunzip_layers(b"\x1f\x8b" + b"\x00" * 30)
    assert error is not None and error.startswith("bad gzip data")


def test_size_cap_applies_to_decoded_bytes() -> None:
    urls = "".join(f"<url><loc>http://sm.example.test/p/{i}</loc></url>" for i in range(10_000))
    body = f"<urlset {NS}>{urls}</urlset>".encode()
    gz = gzip.compress(body)
    assert len(gz) < 100_000 < len(body)
    doc = parse_sitemap(gz, BASE, max_bytes=100_000)
    assert doc.cut and doc.error is None and doc.decoded_bytes == 100_000
    assert 0 < len(doc.urls) < 10_000
    assert doc.urls[-1].url == f"http://sm.example.test/p/{len(doc.urls) - 1}"


def test_entry_cap() -> None:
    text = "".join(f"http://sm.example.test/{i}\n" for i in range(20)).encode()
    doc = parse_sitemap(text, BASE, max_entries=5)
    assert doc.cut and [e.url for e in doc.urls] == [
        f"http://sm.example.test/{i}" for i in range(5)
    ]


def test_graph_reads_each_sitemap_once_and_bounds_nesting() -> None:
    g = SitemapGraph(max_depth=2, max_files=100)
    root = g.admit("http://sm.example.test/sitemap_index.xml")
    assert root == "http://sm.example.test/sitemap_index.xml"
    assert g.admit("http://SM.example.test:80/sitemap_index.xml") is None  # other spelling
    assert g.admit("http://sm.example.test/sitemap_index.xml", 1) is None  # self-listing
    assert g.admit("http://sm.example.test/nest/1.xml", 1) == "http://sm.example.test/nest/1.xml"
    assert g.admit("http://sm.example.test/nest/2.xml", 2) is not None
    assert g.admit("http://sm.example.test/nest/3.xml", 3) is None  # too deep
    assert g.admit("notaurl") is None
    s = g.stats
    assert (s.loops, s.cut, s.errors) == (2, 1, 1)
    assert g.level("http://sm.example.test/nest/2.xml") == 2


def test_graph_redirect_back_to_a_read_sitemap_is_dropped() -> None:
    g = SitemapGraph()
    index = g.admit("http://sm.example.test/sitemap_index.xml")
    moved = g.admit("http://sm.example.test/sm-moved.xml", 1)
    assert index and moved
    assert g.arrived(moved, "http://sm.example.test/sitemap_index.xml") is False
    assert g.arrived(moved, moved) is True
    assert g.arrived(moved, "http://sm.example.test/new-home.xml") is True
    assert g.admit("http://sm.example.test/new-home.xml", 1) is None  # known now
    assert g.stats.loops == 2


def test_graph_file_count_bound() -> None:
    g = SitemapGraph(max_depth=5, max_files=3)
    got = [g.admit(f"http://sm.example.test/{i}.xml", 1) for i in range(5)]
    assert [x is not None for x in got] == [True, True, True, False, False]
    assert g.stats.cut == 2


@pytest.mark.parametrize(("depth", "files"), [(-1, 1), (0, 0)])
def test_graph_rejects_bad_bounds(depth: int, files: int) -> None:
    with pytest.raises(ValueError, match="sitemap"):
        SitemapGraph(depth, files)


def test_sitemap_urls_are_roots_whatever_the_mode() -> None:
    # --sitemaps off turns off robots.txt discovery, not the --sitemap URLs given
    from skitter.settings import QualitySettings
    from skitter.sitemap_reader import sitemap_roots

    given = ("http://a.test/given.xml",)
    robots = {"http://a.test": [("/from-robots.xml", "http://a.test/robots.txt")]}
    for mode, expected in (
        ("off", ["http://a.test/given.xml"]),
        ("robots", ["http://a.test/from-robots.xml", "http://a.test/given.xml"]),
        (
            "also",
            [
                "http://a.test/from-robots.xml",
                "http://a.test/sitemap.xml",
                "http://a.test/given.xml",
            ],
        ),
    ):
        q = QualitySettings(sitemaps=mode, sitemap_urls=given)
        assert sitemap_roots(q, ["http://a.test"], lambda o: robots[o]) == expected, mode
