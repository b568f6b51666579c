"""A crawl's CDXJ indexes open in pywb's index reader (no live collection): every page the
crawl recorded is found by an exact-URL query, and the offset and length pywb reads lead to
that URL's response record in the WARC."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pywb.warcserver.index.indexsource import FileIndexSource
from pywb.warcserver.index.query import CDXQuery
from warcio.archiveiterator import ArchiveIterator

from skitter.offline.cdxj import cdxj_path_for
from tests.integration.site import crawl
from tests.offline.site import ROOT, build_site

pytestmark = pytest.mark.timeout(90)


def _lookup(cdxj: Path, url: str) -> list[dict[str, str]]:
    query = CDXQuery({"url": url})
    found = FileIndexSource(str(cdxj)).load_index(query.params)
    return [{str(k): str(v) for k, v in obj.items()} for obj in found]


async def test_pywb_index_reader_finds_every_recorded_page(tmp_path: Path) -> None:
    site = build_site()
    await site.start()
    out = tmp_path / "crawl"
    try:
        result = await crawl(site, out, [ROOT], fetch_proxy=f"http://127.0.0.1:{site.port}")
    finally:
        await site.close()
    warcs = sorted(out.rglob("*.warc.gz"))
    assert warcs
    responses = {r["url"] for r in result.records if r["status"] is not None}
    assert len(responses) >= 5
    found = 0
    for url in sorted(responses):
        hits = [
            (warc, hit)
            for warc in warcs
            for hit in _lookup(Path(cdxj_path_for(str(warc))), url)
            if hit.get("mime") != "warc/revisit"
        ]
        assert hits, url
        warc, hit = hits[0]
        assert hit["filename"] == warc.name
        start, length = int(hit["offset"]), int(hit["length"])
        with warc.open("rb") as f:
            f.seek(start)
            member = f.read(length)
        records = list(ArchiveIterator(io.BytesIO(member)))
        assert [r.rec_type for r in records] == ["response"]
        assert records[0].rec_headers.get_header("WARC-Target-URI") == url
        assert hit["status"] == str(records[0].http_headers.get_statuscode())
        found += 1
    assert found == len(responses)
