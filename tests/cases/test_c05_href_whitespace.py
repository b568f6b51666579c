"""C05 — whitespace, newlines and backslashes inside href (WHATWG URL parser).

End to end: the links.tsv targets of the page are exactly the browser's URLs, and the
requests the server sees never contain encoded whitespace or backslashes.
"""

from __future__ import annotations

from pathlib import Path

from tests.cases._util import WWW, page, requested, run
from tests.integration.site import Site, html


def post_html(port: int) -> str:
    return (
        "<!doctype html><html><body>\n"
        '<a href="\n      /feeds/atom.xml\n    ">Atom</a>\n'
        '<a href="/docs/getting-\nstarted.html">Guide</a>\n'
        '<a href="/files/annual report.pdf">Report</a>\n'
        '<a href="..\\img\\logo.png">Logo</a>\n'
        '<a href="http:\\\\www.example.test\\about">About</a>\n'
        '<a href="\t  https://other.example.test/x  ">Other</a>\n'
        # the same spellings towards the test server's port, so they are fetched too
        f'<a href="http:\\\\www.example.test:{port}\\about">About here</a>\n'
        f'<a href="\r\n\t http:\\\\www.example.test:{port}\\a\tb\\c d\n">Mixed</a>\n'
        "</body></html>"
    )


async def test_c05_href_whitespace_and_backslashes(site: Site, tmp_path: Path) -> None:
    site.route(WWW, "/blog/post.html", html(post_html(site.port)))
    site.fallback(WWW, page())
    src = site.url(WWW, "/blog/post.html")
    res = await run(site, tmp_path / "out", [src])
    targets = [r["target"] for r in res.links if r["source"] == src]
    assert targets == [
        site.url(WWW, "/feeds/atom.xml"),
        site.url(WWW, "/docs/getting-started.html"),
        site.url(WWW, "/files/annual%20report.pdf"),
        site.url(WWW, "/img/logo.png"),
        "http://www.example.test/about",  # port 80: another host key, out of scope
        "https://other.example.test/x",
        site.url(WWW, "/about"),
        site.url(WWW, "/ab/c%20d"),
    ]
    assert sorted(requested(site, WWW)) == sorted(
        [
            "/blog/post.html",
            "/feeds/atom.xml",
            "/docs/getting-started.html",
            "/files/annual%20report.pdf",
            "/img/logo.png",
            "/about",
            "/ab/c%20d",
        ]
    )
    for path in site.paths(WWW):
        for bad in ("%09", "%0A", "%0D", "%5C", "%0a", "%0d", "%5c", "\\"):
            assert bad not in path, path
        assert not path.startswith("/%20"), path
    anchors = {r["anchor"] for r in res.links if r["source"] == src}
    assert {"Atom", "Guide", "Report", "Logo", "About", "Other"} <= anchors
    assert not any(h.host == "other.example.test" for h in site.hits)
