"""A large page crawled end to end: parsed in bounded segments (skitter.html_chunks) with the
links of a whole-page parse, and indexed (CDXJ) as reading its WARC record back would."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urldefrag

from skitter.export.warc import RECORD_WRITTEN_PAYLOAD_BYTES
from skitter.html_chunks import SEGMENT_BYTES, SEGMENT_MIN_BYTES
from skitter.links import _extract_whole
from skitter.offline.cdxj import index_lines
from tests.integration.site import Site, crawl, html

H = "big.test"


def source_page(lines: int) -> str:
    """A rustdoc-like source page: a line-number link per line, code spans, a long comment
    and a long script holding link-like text (not links), a link out every 50 lines."""
    parts = ["<!DOCTYPE html><html><head><title>src/big.rs</title></head><body><pre>"]
    hidden = "<a href=/not-a-link>" + "x" * 60 + "</a>"
    for i in range(lines):
        parts.append(f'<a href="#{i}" id="{i}">{i}</a> <span class="kw">fn</span> f{i}()\n')
        if i % 50 == 0:
            parts.append(f'<a href="/p/{i}" title="page {i}">see <b>page</b> {i}</a>\n')
        if i == lines // 2:
            parts.append("<!-- " + hidden * (SEGMENT_BYTES // len(hidden) + 5) + " -->")
            parts.append("<script>var s = '" + hidden * 2000 + "';</script>")
    parts.append("</pre></body></html>")
    return "".join(parts)


async def test_a_large_page_gives_the_whole_page_links_and_its_index(
    site: Site, tmp_path: Path
) -> None:
    body = source_page(40_000)
    raw = body.encode()
    assert len(raw) > 2 * SEGMENT_MIN_BYTES
    site.route(H, "/big.html", html(body))
    url = site.url(H, "/big.html")
    res = await crawl(site, tmp_path / "out", [url], scope_max_depth=0)
    assert res.record(url)["bytes"] == len(raw)

    whole = _extract_whole(
        raw, url, "text/html; charset=utf-8", (), bot_token=None, resources=False, ids=False
    )
    assert len(whole.links) == 40_000 + 800
    expected = []
    for link in whole.links:
        assert link.url is not None
        target, fragment = urldefrag(link.url)
        expected.append((target, fragment, link.anchor, link.kind))
    rows = [(r["target"], r["fragment"], r["anchor"], r["kind"]) for r in res.links]
    assert all(r["source"] == url for r in res.links)
    assert rows == expected  # same links, same order, same anchor texts

    # the crawl's CDXJ lines (made from the record as written, with only the first
    # RECORD_WRITTEN_PAYLOAD_BYTES of its payload) are those read back from the WARC file
    assert len(raw) > RECORD_WRITTEN_PAYLOAD_BYTES
    warcs = sorted((tmp_path / "out").glob("*.warc.gz"))
    assert len(warcs) == 1
    damages: list[object] = []
    read_back = index_lines(str(warcs[0]), damages.append)
    written = warcs[0].with_name(warcs[0].name.removesuffix(".warc.gz") + ".cdxj").read_text()
    assert not damages
    assert written.splitlines(keepends=True) == read_back
    assert any('"status": "200"' in line and "big.html" in line for line in read_back)
