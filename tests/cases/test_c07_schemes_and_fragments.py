"""C07 — non-HTTP schemes and fragment-only links.

End to end: a scheme makes a URL absolute (never joined to the page's directory); only
the http(s) link is queued; fragment-only and empty hrefs are the page itself and cause
no second request. The link-checker half ("skipped: unsupported scheme" in
``skitter check-links``) belongs to issue 5; here links.tsv records ``scheme``.
"""

from __future__ import annotations

from pathlib import Path

from tests.cases._util import WWW, page, requested, run
from tests.integration.site import Site, html

TEAM_HTML = """<!doctype html><html><body id="top">
<a href="mailto:info@example.test">Mail</a>
<a href="MAILTO:sales@example.test">Sales</a>
<a href="tel:+1-555-0100">Call</a>
<a href="data:text/plain;base64,SGk=">Data</a>
<a href="javascript:void(0)">JS</a>
<a href=" javascript:openWin('/popup.html')">JS2</a>
<a href="#top">Top</a>
<a href="#">Hash</a>
<a href="">Empty</a>
<a href="ftp://files.example.test/pub/">FTP</a>
<a href="/team/contact.html">Contact</a>
</body></html>"""


async def test_c07_schemes_and_fragment_links(site: Site, tmp_path: Path) -> None:
    site.route(WWW, "/team/index.html", html(TEAM_HTML))
    site.fallback(WWW, page())
    src = site.url(WWW, "/team/index.html")
    res = await run(site, tmp_path / "out", [src])
    # only the http link is fetched; the page itself exactly once
    assert requested(site, WWW) == ["/team/index.html", "/team/contact.html"]
    for path in site.paths(WWW):
        for bad in ("mailto:", "tel:", "data:", "javascript:", "popup.html", "ftp:"):
            assert bad not in path.lower(), path
    rows = [(r["target"], r["fragment"], r["decision"]) for r in res.links if r["source"] == src]
    assert rows == [
        ("mailto:info@example.test", "", "scheme"),
        ("mailto:sales@example.test", "", "scheme"),  # WHATWG: scheme lower-cased
        ("tel:+1-555-0100", "", "scheme"),
        ("data:text/plain;base64,SGk=", "", "scheme"),
        ("javascript:void(0)", "", "scheme"),
        ("javascript:openWin('/popup.html')", "", "scheme"),
        (src, "top", "seen"),
        (src, "", "seen"),
        (src, "", "seen"),
        ("ftp://files.example.test/pub/", "", "scheme"),
        (site.url(WWW, "/team/contact.html"), "", "queued"),
    ]
    assert res.report["totals"]["by_decision"] == {"scheme": 7, "seen": 3, "queued": 1}
    assert not any(h.host == "files.example.test" for h in site.hits)
