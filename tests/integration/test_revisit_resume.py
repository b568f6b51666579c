"""A page whose body duplicates one captured before a resume is a WARC revisit record pointing
at that capture (WARC-Refers-To-Target-URI / -Date), with one process or two, and when the
CDXJ indexes of the earlier session are missing (a kill before they were written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_cli import arun_cli
from tests.integration.site import Site, html, links_page
from tests.warc_check import warc_records

A = "dup.example.test"
SAME = "<!doctype html><title>same</title><p>one body</p><a href='/copy'>c</a><a href='/copy2'>"
SAME += "d</a>"


@pytest.mark.parametrize(("processes", "drop_cdxj"), [("1", False), ("2", False), ("1", True)])
async def test_duplicate_of_a_page_captured_before_the_resume_is_a_revisit(
    site: Site, tmp_path: Path, processes: str, drop_cdxj: bool
) -> None:
    site.route(A, "/", links_page("/orig"))
    for path in ("/orig", "/copy", "/copy2"):
        site.route(A, path, html(SAME))
    out = tmp_path / "out"
    flags = [
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0",
        "--quiet", "--processes", processes,
    ]  # fmt: skip
    # session 1 stops at 2 pages: / and /orig (the original), /copy and /copy2 queued
    rc, _, err = await arun_cli("crawl", site.url(A, "/"), "--out", str(out), "--max-pages", "2",
                                *flags)  # fmt: skip
    assert rc == 0, err
    assert len((out / "pages.jsonl").read_text().splitlines()) == 2
    if drop_cdxj:  # as if killed before the index was saved: resume indexes the WARC again
        for p in out.glob("*.cdxj"):
            p.unlink()
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages", "0",
                                *flags)  # fmt: skip
    assert rc == 0, err
    recs = {r["url"]: r for r in map(json.loads, (out / "pages.jsonl").read_text().splitlines())}
    orig, copies = site.url(A, "/orig"), [site.url(A, "/copy"), site.url(A, "/copy2")]
    for c in copies:
        assert (recs[c]["duplicate"], recs[c]["duplicate_of"]) == ("exact", orig)
    records = warc_records(out)  # warcio check passes on every file
    (original,) = [h for t, h in records if t == "response" and h["WARC-Target-URI"] == orig]
    revisits = [h for t, h in records if t == "revisit"]
    assert sorted(h["WARC-Target-URI"] for h in revisits) == sorted(copies)
    for h in revisits:
        assert h["WARC-Refers-To-Target-URI"] == orig
        assert h["WARC-Refers-To-Date"] == original["WARC-Date"]
        assert h["WARC-Payload-Digest"] == original["WARC-Payload-Digest"]
        assert h["WARC-Profile"].endswith("/revisit/identical-payload-digest")
    assert not [h for t, h in records if t == "response" and h["WARC-Target-URI"] in copies]
    report = json.loads((out / "report.json").read_text())
    assert report["duplicates"]["revisits"] == 2
