"""C08 — ``<base href>``: commented out, late (after 6000 bytes), relative, duplicated.

The document base URL is the href of the first ``<base>`` with an href in tree order,
resolved against the document URL (HTML Standard "frozen base URL"). End to end: the
links.tsv targets and the requests the server sees.
"""

from __future__ import annotations

from pathlib import Path

from tests.cases._util import WWW, page, requested, run
from tests.integration.site import Site, html

PAGE_A = (
    "<!doctype html><html><head>\n"
    '<!-- <base href="http://www.www.example.test/"> -->\n'
    "<!-- " + "filler text " * 500 + " -->\n"
    '<base href="/forum/">\n'
    '<base href="http://ignored.example.test/">\n'
    "</head><body>\n"
    '<a href="index.php/file/9/">file</a>\n'
    '<a href="/abs.html">abs</a>\n'
    '<a href="//cdn.example.test/lib.js">cdn</a>\n'
    '<!-- <a href="/old-section/">old</a> -->\n'
    "</body></html>"
)
PAGE_B = (
    '<html><head><base href="page.html"></head>\n'
    '<body><a href="?p=2">next</a><a href="sub/">sub</a></body></html>'
)


async def test_c08_base_href_end_to_end(site: Site, tmp_path: Path) -> None:
    assert PAGE_A.index('<base href="/forum/') > 6000
    site.route(WWW, "/forum/index.php/msg/7/", html(PAGE_A))
    site.route(WWW, "/dir/page.html", html(PAGE_B))
    site.fallback(WWW, page())
    a = site.url(WWW, "/forum/index.php/msg/7/")
    b = site.url(WWW, "/dir/page.html")
    res = await run(site, tmp_path / "out", [a, b])
    assert [r["target"] for r in res.links if r["source"] == a] == [
        site.url(WWW, "/forum/index.php/file/9/"),
        site.url(WWW, "/abs.html"),
        "http://cdn.example.test/lib.js",
    ]
    assert [r["target"] for r in res.links if r["source"] == b] == [
        site.url(WWW, "/dir/page.html?p=2"),
        site.url(WWW, "/dir/sub/"),
    ]
    assert sorted(requested(site, WWW)) == sorted(
        [
            "/forum/index.php/msg/7/",
            "/dir/page.html",
            "/forum/index.php/file/9/",
            "/abs.html",
            "/dir/page.html?p=2",
            "/dir/sub/",
        ]
    )
    hosts = {h.host for h in site.hits}
    assert hosts == {WWW}
    for r in res.links:
        assert "www.www.example.test" not in r["target"]
        assert "ignored.example.test" not in r["target"]
        assert "/old-section/" not in r["target"]
