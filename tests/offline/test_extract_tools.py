"""``skitter extract`` on WARCs written by other tools equals the crawl of the same site.

wget (Debian's, ``--warc-file``) and warcio (whole-file gzip) archive the test site of
:mod:`tests.offline.site`; ``extract`` on each must give the link rows the crawler's own crawl of
that site gives, for every page both have.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from skitter.export.links import read_rows
from skitter.export.pages import read_records
from skitter.offline.extract import ExtractOptions, extract_warcs
from tests.integration.site import crawl
from tests.offline.site import HOST, PAGES, ROOT, build_site

pytestmark = pytest.mark.timeout(90)

Row = tuple[str, str, str, str, str, bool]


def _rows(out: Path) -> set[Row]:
    return {
        (r.source, r.target, r.fragment, r.anchor, r.kind, r.nofollow)
        for r in read_rows(out / "links.tsv")
    }


async def _crawl_site(site: Any, out: Path) -> set[Row]:
    await crawl(site, out, [ROOT], fetch_proxy=f"http://127.0.0.1:{site.port}")
    return _rows(out)


def _same_pages(a: set[Row], b: set[Row]) -> tuple[set[Row], set[Row]]:
    common = {r[0] for r in a} & {r[0] for r in b}
    return {r for r in a if r[0] in common}, {r for r in b if r[0] in common}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wget") is None, reason="wget is installed by .ci/run")
async def test_wget_warc_extract_equals_crawl(tmp_path: Path) -> None:
    site = build_site()
    await site.start()
    try:
        env = {**os.environ, "http_proxy": f"http://127.0.0.1:{site.port}", "no_proxy": ""}
        proc = await asyncio.create_subprocess_exec(
            "wget", "-q", "-r", "-l", "5", "-e", "robots=off", "--tries=1", "--timeout=20",
            "--warc-file=site", "--no-directories", "--delete-after", ROOT,
            cwd=tmp_path, env=env,
        )  # fmt: skip
        assert await asyncio.wait_for(proc.wait(), 60) in (0, 8)  # 8: a 404 was met
        live = await _crawl_site(site, tmp_path / "crawl")
    finally:
        await site.close()
    res = extract_warcs([str(tmp_path / "site.warc.gz")], tmp_path / "x", ExtractOptions())
    assert res.skipped == []
    got = _rows(tmp_path / "x")
    sources = {r[0] for r in got}
    # wget fetched every page of the site (it follows <a href> too), redirect included
    assert {ROOT + p.lstrip("/") for p in PAGES} | {ROOT + "old"} <= sources
    a, b = _same_pages(got, live)
    assert a == b
    assert (ROOT + "old", ROOT + "a", "moved", "", "redirect", False) in got
    pages = {p["url"]: p for p in read_records(tmp_path / "x" / "pages.jsonl")}
    assert pages[ROOT + "gz"]["bytes"] == len(PAGES["/gz"])  # gunzipped as recorded
    assert pages[ROOT + "chunked"]["bytes"] == len(PAGES["/chunked"])  # de-chunked


def _warcio_wholefile(path: Path) -> None:
    """The site's pages as warcio response records, the whole file one gzip stream."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=False)
    for p, body in PAGES.items():
        data = body.encode()
        headers = StatusAndHeaders(
            "200 OK",
            [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(data)))],
            protocol="HTTP/1.1",
        )
        rec = writer.create_warc_record(
            f"http://{HOST}{p}",
            "response",
            payload=io.BytesIO(data),
            length=len(data),
            http_headers=headers,
        )
        writer.write_record(rec)
    path.write_bytes(gzip.compress(buf.getvalue()))


async def test_warcio_wholefile_extract_equals_crawl(tmp_path: Path) -> None:
    site = build_site()
    await site.start()
    try:
        live = await _crawl_site(site, tmp_path / "crawl")
    finally:
        await site.close()
    warc = tmp_path / "site.warc.gz"
    _warcio_wholefile(warc)
    res = extract_warcs([str(warc)], tmp_path / "x", ExtractOptions())
    assert res.skipped == [] and res.pages == len(PAGES)
    got = _rows(tmp_path / "x")
    assert {r[0] for r in got} == {ROOT + p.lstrip("/") for p in PAGES}
    a, b = _same_pages(got, live)
    assert a == b and len(a) > 10


def test_extract_disk_full_names_the_folder_and_leaves_nothing_half_done(tmp_path: Path) -> None:
    """extract whose output cannot be written (injected: RLIMIT_FSIZE, EFBIG at 4 KiB): one
    line naming where, exit 2, no part folder or temporary file left in --out."""
    import resource
    import signal
    import subprocess
    import sys

    from tests.offline.warcs import response

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    links = "".join(f'<a href="/page-{i:04d}-{"x" * 40}">{i}</a>' for i in range(400))
    body = f"<html><body>{links}</body></html>".encode()
    warc = tmp_path / "in.warc"
    warc.write_bytes(response("http://a.example.test/", body, [("Content-Type", "text/html")]))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "skitter", "extract", str(warc), "--out", str(out)],
        capture_output=True, text=True, timeout=60, preexec_fn=small_files,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"skitter: error: File too large: {out}\n"
    assert sorted(p.name for p in out.iterdir()) == []
