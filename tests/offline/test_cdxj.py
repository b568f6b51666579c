"""CDXJ indexes: lines equal cdxj-indexer's; written beside the crawl's WARCs on rotation and
close, completed on resume; ``skitter index`` on other WARCs."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cdxj_indexer.main import CDXJIndexer

from skitter.offline.cdxj import cdxj_path_for, index_lines, index_missing
from skitter.offline.reader import Damage
from tests.cases.test_c41_offline_extract import _write_warcs
from tests.integration.site import crawl
from tests.offline.site import ROOT, build_site

pytestmark = pytest.mark.timeout(90)


def _theirs(path: Path) -> list[str]:
    out = io.StringIO()
    CDXJIndexer(output=out, inputs=[str(path)], records="response,revisit,resource").process_all()
    return sorted(line + "\n" for line in out.getvalue().splitlines())


def _mine(path: Path) -> list[str]:
    damage: list[Damage] = []
    lines = index_lines(str(path), damage.append)
    assert damage == []
    return lines


# cdxj-indexer leaves a temporary file unclosed when it computes a missing digest
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_lines_equal_cdxj_indexer_on_other_tools_warcs(tmp_path: Path) -> None:
    warcs = _write_warcs(tmp_path)
    for name in ("wget", "enc"):
        mine = _mine(warcs[name])
        assert mine == _theirs(warcs[name]), name
    enc = _mine(warcs["enc"])
    assert len(enc) == 7
    assert any('"mime": "warc/revisit"' in line for line in enc)
    assert enc == sorted(enc)
    assert all(line.startswith("test,example)/") for line in enc)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_damaged_parts_bound_the_lengths(tmp_path: Path) -> None:
    warcs = _write_warcs(tmp_path)
    starts = json.loads((tmp_path / "damaged.offsets").read_text())
    damage: list[Damage] = []
    lines = index_lines(str(warcs["damaged"]), damage.append)
    assert [d.offset for d in damage] == [starts[3], starts[6]]
    got = {int(json.loads(x.split(" ", 2)[2])["offset"]): x for x in lines}
    assert sorted(got) == [starts[i] for i in (0, 1, 2, 4, 5)]
    for i in (0, 1, 2, 4, 5):  # each record's length ends where the next member starts
        assert json.loads(got[starts[i]].split(" ", 2)[2])["length"] == str(
            starts[i + 1] - starts[i]
        )


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_whole_file_gzip_refused_with_a_message(tmp_path: Path) -> None:
    warcs = _write_warcs(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "skitter", "index", str(warcs["whole"])],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "whole-file gzip" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "skitter", "index", str(warcs["enc"]), str(warcs["wget"])],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "encodings.cdxj").read_text().splitlines(keepends=True) == _theirs(
        warcs["enc"]
    )
    assert (tmp_path / "wget-style.cdxj").exists()


async def test_crawl_writes_cdxj_on_rotation_close_and_resume(tmp_path: Path) -> None:
    site = build_site()
    await site.start()
    out = tmp_path / "crawl"
    proxy = f"http://127.0.0.1:{site.port}"
    try:
        await crawl(site, out, [ROOT], fetch_proxy=proxy, warc_max_bytes=1500)
        warcs = sorted(out.rglob("*.warc.gz"))
        assert len(warcs) >= 3  # rotated
        lines = 0
        for w in warcs:
            cdxj = Path(cdxj_path_for(str(w)))
            assert cdxj.read_text().splitlines(keepends=True) == _theirs(w)
            lines += len(_theirs(w))
        assert lines >= 9  # robots.txt + the site's pages
        # a crawl killed before closing its file leaves it unindexed: resume completes it
        os.remove(cdxj_path_for(str(warcs[-1])))
        await crawl(site, out, [ROOT], fetch_proxy=proxy, warc_max_bytes=1500, resume=True)
    finally:
        await site.close()
    assert Path(cdxj_path_for(str(warcs[-1]))).read_text().splitlines(keepends=True) == _theirs(
        warcs[-1]
    )
    assert index_missing(str(warcs[0].parent), "nothing-here") == []
