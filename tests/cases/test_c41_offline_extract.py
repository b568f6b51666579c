"""C41 — offline link extraction from other people's WARCs (cases.md): wget's angle brackets,
chunked and content-encoded payloads as recorded, whole-file gzip, damaged records."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import brotli
import pytest

from skitter.export.links import read_rows
from skitter.export.pages import read_records
from skitter.offline.extract import ExtractOptions, extract_warcs
from tests.integration.site import Site, html, text
from tests.offline.site import ProxySite
from tests.offline.warcs import chunk, record, response, sha1_b32

pytestmark = pytest.mark.timeout(60)

W = "http://www.example.test"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32

BODIES: dict[str, str] = {
    "/a": '<!doctype html><a href="/b">to b</a> <a href="c#sec">to  c</a>',
    "/b": (
        '<!doctype html><a href="/a">back to a</a><a href="/d?q=1">d query</a>'
        '<a href="http://other.test/">other</a>'
    ),
    "/c": '<!doctype html><title>C</title><a href="/f">f</a>',
    "/d": '<!doctype html><a href="/e">image</a><a rel="nofollow" href="/h">h</a>',
    "/f": '<!doctype html><title>F</title><a href="/a">a from f</a>',
    "/h": (
        '<!doctype html><a href="/a">first half</a>'
        + "<p>filler</p>" * 40
        + '<a href="/b">second half</a>'
    ),
}
HTML = [("Content-Type", "text/html; charset=utf-8")]


def _serve() -> Site:
    s = ProxySite()
    for path, body in BODIES.items():
        s.route("www.example.test", path, html(body))
    s.route("www.example.test", "/g", html(BODIES["/b"]))
    s.route("www.example.test", "/e", text(PNG, content_type="image/png"))
    return s


def _records() -> list[bytes]:
    """The records of encodings.warc.gz, in order (/b ... /h)."""
    b = BODIES["/b"].encode()
    gz_b = gzip.compress(b)
    h = BODIES["/h"].encode()
    return [
        response(
            f"{W}/b",
            chunk(gz_b),
            [*HTML, ("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")],
            extra={"WARC-Payload-Digest": sha1_b32(gz_b)},
        ),
        response(f"{W}/c", BODIES["/c"].encode(), [*HTML, ("Transfer-Encoding", "chunked")]),
        response(
            f"{W}/d", brotli.compress(BODIES["/d"].encode()), [*HTML, ("Content-Encoding", "br")]
        ),
        response(f"{W}/e", PNG, [("Content-Type", "image/png")]),
        record("resource", f"{W}/f", BODIES["/f"].encode(), content_type="text/html"),
        record(
            "revisit",
            f"{W}/g",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n\r\n",
            content_type="application/http;msgtype=response",
            extra={
                "WARC-Profile": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
                "WARC-Refers-To-Target-URI": f"{W}/b",
                "WARC-Payload-Digest": sha1_b32(gz_b),
            },
        ),
        response(
            f"{W}/h",
            h[: len(h) // 2],
            [*HTML, ("Content-Length", str(len(h)))],
            extra={"WARC-Truncated": "length"},
        ),
    ]


def _write_warcs(d: Path) -> dict[str, Path]:
    wget_style = record(
        "request",
        f"<{W}/a>",
        b"GET /a HTTP/1.1\r\nHost: www.example.test\r\n\r\n",
        version="WARC/1.0",
        content_type="application/http;msgtype=request",
    ) + response(f"<{W}/a>", BODIES["/a"].encode(), HTML, version="WARC/1.0")
    recs = _records()
    paths = {
        "wget": d / "wget-style.warc",
        "enc": d / "encodings.warc.gz",
        "whole": d / "wholefile.warc.gz",
        "damaged": d / "damaged.warc.gz",
    }
    paths["wget"].write_bytes(wget_style)
    paths["enc"].write_bytes(b"".join(gzip.compress(r) for r in recs))
    paths["whole"].write_bytes(gzip.compress(b"".join(recs)))
    damaged = list(recs)
    damaged[3] = damaged[3].replace(b"Content-Length: ", b"Content-Length: x4", 1)
    members = [gzip.compress(r) for r in damaged]
    members[-1] = members[-1][: len(members[-1]) // 2]
    paths["damaged"].write_bytes(b"".join(members))
    starts = [0]
    for m in members[:-1]:
        starts.append(starts[-1] + len(m))
    (d / "damaged.offsets").write_text(json.dumps(starts))
    return paths


def _rows(out: Path) -> set[tuple[Any, ...]]:
    return {
        (r.source, r.target, r.fragment, r.anchor, r.kind, r.nofollow)
        for r in read_rows(out / "links.tsv")
    }


async def test_c41_extract_equals_live_crawl(tmp_path: Path) -> None:
    from tests.integration.site import crawl

    warcs = _write_warcs(tmp_path)
    site = _serve()
    await site.start()
    try:
        live = await crawl(
            site,
            tmp_path / "live",
            [f"{W}/{p}" for p in "abcdefg"],
            fetch_proxy=f"http://127.0.0.1:{site.port}",
            scope_max_depth=0,
        )
    finally:
        await site.close()
    assert {r["status"] for r in live.records} == {200}
    live_rows = _rows(tmp_path / "live")
    for name in ("wget", "enc", "whole"):
        out = tmp_path / f"x-{name}"
        res = extract_warcs([str(warcs[name])], out, ExtractOptions())
        assert res.skipped == []
        rows = _rows(out)
        assert all(r[0] and "<" not in r[0] and ">" not in r[0] for r in rows)
        complete = {r for r in rows if r[0] != f"{W}/h"}
        want = {r for r in live_rows if r[0] != f"{W}/h"}
        want = {r for r in want if (r[0] == f"{W}/a") == (name == "wget")}
        assert complete == want, name
    out = tmp_path / "x-enc"
    # /h: only the links of the half that was recorded, and flagged truncated
    assert {r[1] for r in _rows(out) if r[0] == f"{W}/h"} == {f"{W}/a"}
    pages = {p["url"]: p for p in read_records(out / "pages.jsonl")}
    assert pages[f"{W}/h"]["error"] == "truncated"
    assert pages[f"{W}/b"]["bytes"] == len(BODIES["/b"])  # de-chunked and gunzipped
    assert pages[f"{W}/e"]["content_type"] == "image/png"
    assert pages[f"{W}/f"]["status"] is None
    assert pages[f"{W}/g"]["sha1"] == pages[f"{W}/b"]["sha1"]
    assert pages[f"{W}/b"]["fetched_at"] == "2024-05-01T12:00:00.000Z"
    assert {pages[u][k] for u in pages for k in ("depth", "elapsed_s", "attempts")} == {None}
    report = json.loads((out / "report.json").read_text())
    assert report["revisits"] == {"resolved": 1, "unresolved": 0}


def test_c41_damaged_records_reported_and_read_past(tmp_path: Path) -> None:
    warcs = _write_warcs(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "skitter", "extract", str(warcs["damaged"]),
         "--out", str(tmp_path / "out"), "--strict"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    skipped = report["skipped"]
    assert len(skipped) == 2
    assert all(s["file"] == str(warcs["damaged"]) for s in skipped)
    member_offsets = json.loads((tmp_path / "damaged.offsets").read_text())
    bad_header, cut = skipped
    assert bad_header["offset"] == member_offsets[3]
    assert "Content-Length" in bad_header["reason"]
    assert cut["offset"] == member_offsets[6]
    assert "cut short" in cut["reason"]
    assert proc.stderr.count("(skipped)") == 2
    urls = {p["url"] for p in read_records(tmp_path / "out" / "pages.jsonl")}
    assert urls == {f"{W}/{p}" for p in "bcdfg"}
    rows = _rows(tmp_path / "out")
    assert (f"{W}/g", f"{W}/a", "", "back to a", "a", False) in rows
