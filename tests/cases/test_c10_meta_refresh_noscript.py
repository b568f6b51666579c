"""C10 — meta refresh variants, ``<noscript>`` links, links inside comments.

End to end: the refresh targets land in links.tsv (kind ``refresh``) resolved against the
document base URL and are fetched; a bare delay is a reload (no link); ``<noscript>``
links count for a non-JS client, commented-out ones do not.
"""

from __future__ import annotations

from pathlib import Path

from tests.cases._util import WWW, page, requested, run
from tests.integration.site import Site, html

PAGES = {
    "/m1": '<html><head><META HTTP-EQUIV=REFRESH CONTENT="0; URL=/landing/"></head></html>',
    "/m2": '<meta http-equiv="refresh" content="0;url=\'https://www.example.test/start\'">',
    "/m3": '<meta http-equiv="refresh" content="0; URL=\n   /next.html">',
    "/m4": '<meta http-equiv="refresh" content="30">',
    "/m5": '<head><base href="/sub/"><meta http-equiv="refresh" content="2;URL=target.html">'
    "</head>",
    "/m6": (
        "<html><body>\n"
        '<noscript><a href="/nojs/list.html">All items</a></noscript>\n'
        '<!-- <a href="/draft/unpublished.html">draft</a> -->\n'
        "</body></html>"
    ),
}


async def test_c10_meta_refresh_noscript_comments(site: Site, tmp_path: Path) -> None:
    for path, body in PAGES.items():
        site.route(WWW, path, html(body))
    site.fallback(WWW, page())
    seeds = [site.url(WWW, p) for p in PAGES]
    res = await run(site, tmp_path / "out", seeds)

    def rows(path: str) -> list[tuple[str, str, str]]:
        src = site.url(WWW, path)
        return [(r["kind"], r["target"], r["decision"]) for r in res.links if r["source"] == src]

    assert rows("/m1") == [("refresh", site.url(WWW, "/landing/"), "queued")]
    # https on port 443: another origin than the test server, so out of scope here
    assert rows("/m2") == [("refresh", "https://www.example.test/start", "scope")]
    assert rows("/m3") == [("refresh", site.url(WWW, "/next.html"), "queued")]
    assert rows("/m4") == []
    assert rows("/m5") == [("refresh", site.url(WWW, "/sub/target.html"), "queued")]
    assert rows("/m6") == [("a", site.url(WWW, "/nojs/list.html"), "queued")]
    got = requested(site, WWW)
    assert sorted(got) == sorted(
        [*PAGES, "/landing/", "/next.html", "/sub/target.html", "/nojs/list.html"]
    )
    assert got.count("/m4") == 1 and "/30" not in got
    assert "/draft/unpublished.html" not in got
