"""C25 — duplicates under different spellings, without over-merging.

Dedup merges what RFC 3986 normalisation makes equal (dot segments, host case, default
port, fragments, escapes of unreserved characters) and nothing else (path and query case,
query order, trailing slash); the request on the wire keeps the link's query order.

End to end the test server cannot listen on port 80, so the crawl uses its own port in the
two spellings that name a port or a host; the unit check below uses the exact cases.md
spellings (with ``:80``) on ``http://www.example.test/``.
"""

from __future__ import annotations

from pathlib import Path

from skitter.urls import canonicalize, join
from tests.cases._util import WWW, page, requested, run
from tests.integration.site import Site, links_page

HREFS = [
    "/a/c",
    "/a/./c",
    "/a/b/../c",
    "http://WWW.EXAMPLE.TEST:80/a/c",
    "//www.example.test/a/c",
    "/a/c#section-2",
    "/a/%63",
    "/../../a/c",
    "/Product/ABC",
    "/product/abc",
    "/s?b=2&a=1",
    "/s?a=1&b=2",
    "/x",
    "/x/",
]
EXPECTED = ["/a/c", "/Product/ABC", "/product/abc", "/s?b=2&a=1", "/s?a=1&b=2", "/x", "/x/"]


async def test_c25_duplicate_spellings_end_to_end(site: Site, tmp_path: Path) -> None:
    port = site.port
    hrefs = [
        h.replace("WWW.EXAMPLE.TEST:80", f"WWW.EXAMPLE.TEST:{port}").replace(
            "//www.example.test/", f"//www.example.test:{port}/"
        )
        for h in HREFS
    ]
    site.route(WWW, "/", links_page(*hrefs))
    site.fallback(WWW, page())
    res = await run(site, tmp_path / "out", [site.url(WWW, "/")])
    got = requested(site, WWW)
    assert got[0] == "/" and sorted(got[1:]) == sorted(EXPECTED)
    assert len(got) == 1 + 7 and site.paths(WWW).count("/robots.txt") == 1
    # the two /s URLs were requested with their own query order
    assert "/s?b=2&a=1" in got and "/s?a=1&b=2" in got
    rows = [r for r in res.links if r["source"] == site.url(WWW, "/")]
    assert [r["decision"] for r in rows].count("queued") == 7
    assert {r["target"] for r in rows} == {site.url(WWW, p) for p in EXPECTED}


def test_c25_exact_spellings_share_one_key() -> None:
    base = "http://www.example.test/"
    keys = [canonicalize(join(base, h) or "") for h in HREFS]
    assert len(set(keys)) == 7
    assert keys[:8] == ["http://www.example.test/a/c"] * 8
    assert sorted(set(keys)) == sorted(f"http://www.example.test{p}" for p in EXPECTED)  # type: ignore[type-var]
