"""pages.jsonl read for the end-of-crawl figures (skitter.report.rows): the same rows as
json.loads would give, lines that are not JSON objects skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skitter.report.rows import PageRow, iter_page_rows


def test_rows_as_json_loads_reads_them(tmp_path: Path) -> None:
    rows = [
        {"url": "http://a.test/", "status": 200, "bytes": 12, "depth": 0, "extra": [1, 2]},
        {"url": "http://a.test/x", "status": None, "error": "timeout", "elapsed_s": 30.5},
        {"url": "http://a.test/odd", "status": "n/a", "attempts": 2.0, "content_type": 7},
    ]
    lines = [json.dumps(r) for r in rows]
    # json.loads takes these, msgspec refuses them: read all the same
    lines.insert(1, '{"url": "http://a.test/\\ud800", "status": 404}')  # a lone surrogate
    lines.insert(2, '{"url": "http://a.test/nan", "elapsed_s": NaN}')
    lines += ["[1, 2]", '"text"', "", '{"url": "http://a.test/cut", "sta']  # not objects; cut
    path = tmp_path / "pages.jsonl"
    path.write_text("\n".join(lines))
    got = list(iter_page_rows(path))
    assert [r.url for r in got] == [
        "http://a.test/", "http://a.test/\ud800", "http://a.test/nan", "http://a.test/x",
        "http://a.test/odd",
    ]  # fmt: skip
    assert got[0] == PageRow(url="http://a.test/", status=200, bytes=12, depth=0)
    assert got[1].status == 404 and got[1].error is None
    assert got[2].elapsed_s != got[2].elapsed_s  # NaN, as json.loads reads it
    assert (got[3].status, got[3].error, got[3].elapsed_s) == (None, "timeout", 30.5)
    assert (got[4].status, got[4].attempts, got[4].content_type) == ("n/a", 2.0, 7)


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list(iter_page_rows(tmp_path / "pages.jsonl"))
