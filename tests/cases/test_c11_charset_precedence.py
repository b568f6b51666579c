"""C11 — charset precedence (BOM > HTTP header > meta > detection) and query encoding.

End to end: the page titles the crawler decoded (``on_page`` hook) and the request line the
server sees for a link with a non-ASCII query in a windows-1251 page: the path is UTF-8,
the query is percent-encoded in the page's encoding (URL Standard).
"""

from __future__ import annotations

from pathlib import Path

from skitter.events import CrawlHooks
from skitter.export.pages import PageRecord
from skitter.models import Page, Response
from tests.cases._util import WWW, page, run
from tests.integration.site import Site, text

CYR = "Привет"
C1 = b"\xef\xbb\xbf" + f"<!doctype html><title>{CYR}</title>".encode()
C2 = f'<meta charset="windows-1251"><title>{CYR}</title>'.encode()
C3 = (
    b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251"><title>'
    + b"\xcf\xf0\xe8\xe2\xe5\xf2"
    + b"</title>"
    + '<a href="/поиск?q=Привет">s</a>'.encode("cp1251")
)
C4 = f"<title>{CYR}</title>".encode()

LINK_PATH = "/%D0%BF%D0%BE%D0%B8%D1%81%D0%BA?q=%CF%F0%E8%E2%E5%F2"


async def test_c11_charset_precedence_and_query_encoding(site: Site, tmp_path: Path) -> None:
    assert C3[: C3.index(b"<title>")].count(b"windows-1251") == 1 and len(C3) < 1024
    site.route(WWW, "/c1", text(C1, content_type="text/html; charset=windows-1251"))
    site.route(WWW, "/c2", text(C2, content_type="text/html; charset=utf-8"))
    site.route(WWW, "/c3", text(C3, content_type="text/html"))
    site.route(WWW, "/c4", text(C4, content_type="text/html"))
    site.fallback(WWW, page())
    pages: dict[str, Page] = {}

    def on_page(record: PageRecord, response: Response, parsed: Page | None) -> None:
        if parsed is not None:
            pages[record.url] = parsed

    res = await run(
        site,
        tmp_path / "out",
        [site.url(WWW, p) for p in ("/c1", "/c2", "/c3", "/c4")],
        hooks=CrawlHooks(on_page=on_page),
    )
    titles = {u.rsplit("/", 1)[1]: p.title for u, p in pages.items() if "/c" in u}
    assert titles == {"c1": CYR, "c2": CYR, "c3": CYR, "c4": CYR}
    assert "\ufeff" not in titles["c1"]
    assert pages[site.url(WWW, "/c1")].encoding == "utf-8"
    assert pages[site.url(WWW, "/c3")].encoding in ("cp1251", "windows-1251")
    # the link of c3: UTF-8 path, windows-1251 query -- in links.tsv and on the wire
    c3_links = [r["target"] for r in res.links if r["source"] == site.url(WWW, "/c3")]
    assert c3_links == [site.url(WWW, LINK_PATH)]
    assert LINK_PATH in site.paths(WWW)
