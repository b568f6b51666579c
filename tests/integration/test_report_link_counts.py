"""report.html's link figures (decision counts, trap rows) after a real crawl: taken from the
checkpoint's counters plus the rows past its offset, they equal a line-by-line count of
links.tsv -- after a finished crawl, a resumed one, and with rows a ``kill -9`` left past the
last checkpoint; the whole-file scan (no usable checkpoint) gives the same figures."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web

from skitter.crawler import Crawler
from skitter.report import TABLE_CAP, read_output, render
from skitter.report.data import ReportData
from skitter.status.metrics import CrawlMetrics
from skitter.status.session import write_end_files
from tests.integration.site import Site, redirect, settings_for, text

WWW = "www.example.test"


async def grow(request: web.Request) -> web.StreamResponse:
    """Pages that link deeper and deeper (trap drops), to a sibling and back home (seen)."""
    depth = request.path.count("/")
    body = f'<a href="x/">x</a> <a href="a/b/">ab</a> <a href="s{depth}/">s</a> <a href="/">h</a>'
    body += '<a href="/g/r/">r</a>'
    return web.Response(text=body, content_type="text/html")


def line_by_line(out: Path, cap: int) -> tuple[Counter[str], int, list[tuple[str, str]]]:
    """(decision counts, trap rows, first ``cap`` trap rows) read one complete line at a time."""
    counts: Counter[str] = Counter()
    traps: list[tuple[str, str]] = []
    total = 0
    with open(out / "links.tsv", "rb") as f:
        f.readline()
        for line in f:
            if not line.endswith(b"\n"):
                break
            fields = line[:-1].decode().split("\t")
            counts[fields[-1]] += 1
            if fields[-1] == "trap":
                total += 1
                if len(traps) < cap:
                    traps.append((fields[0], fields[1]))
    return counts, total, traps


def figures(d: ReportData) -> tuple[dict[str, int], int, list[tuple[str, str]]]:
    return dict(d.by_decision), d.trap_total, d.trap_rows


def assert_both_ways(out: Path, cap: int = 1000) -> None:
    """The checkpoint way and the whole-file way both give the line-by-line figures."""
    counts, total, traps = line_by_line(out, cap)
    want = (dict(counts), total, traps)
    assert figures(read_output(out, cap)) == want
    scan = out.with_name(out.name + "-scan")
    shutil.rmtree(scan, ignore_errors=True)
    shutil.copytree(out, scan)
    (scan / "checkpoint.json").unlink()
    assert figures(read_output(scan, cap)) == want


async def test_link_figures_from_checkpoint_equal_the_file(site: Site, tmp_path: Path) -> None:
    site.fallback(WWW, grow)
    sitemap = '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    sitemap += f"<url><loc>{site.url(WWW, '/m/')}</loc></url><url><loc>http://else.test/</loc>"
    site.route(WWW, "/robots.txt", text(f"Sitemap: {site.url(WWW, '/sm.xml')}\n"))
    site.route(WWW, "/sm.xml", text(sitemap + "</url></urlset>", content_type="application/xml"))
    site.route(WWW, "/g/r/", redirect("/g/"))  # a redirect row ("redirect" kind)
    out = tmp_path / "out"
    settings = settings_for(
        site,
        out,
        [site.url(WWW, "/g/")],
        max_pages=12,
        scope_max_path_depth=5,
        quality_sitemaps="robots",
    )
    async with Crawler.from_settings(settings) as crawler:
        await crawler.run()
    assert_both_ways(out)
    async with Crawler.from_settings(replace(settings, max_pages=None, resume=True)) as crawler:
        await crawler.run()
    counts, total, _ = line_by_line(out, 0)
    assert {"queued", "seen", "trap", "scope"} <= set(counts) and total > 3
    kinds = Counter(ln.split(b"\t")[4] for ln in (out / "links.tsv").read_bytes().splitlines())
    assert kinds[b"sitemap"] == 2 and kinds[b"redirect"] >= 1
    cp = json.loads((out / "checkpoint.json").read_text())
    assert cp["links_offset"] == (out / "links.tsv").stat().st_size  # the final checkpoint
    assert_both_ways(out)
    assert_both_ways(out, cap=2)  # the trap rows stop at the cap; the total does not
    # the end files read pages.jsonl once for both: the same as each read on its own
    write_end_files(out)
    assert (out / "metrics.prom").read_text() == CrawlMetrics.from_output(out).text()
    want = render(read_output(out, TABLE_CAP), title=out.resolve().name)
    assert (out / "report.html").read_text(encoding="utf-8") == want
    # a kill -9 leaves rows past the last checkpoint (and maybe half a row): counted too
    rows = (out / "links.tsv").read_bytes().splitlines(keepends=True)[1:]
    trap = next(r for r in rows if r.endswith(b"\ttrap\n"))
    with open(out / "links.tsv", "ab") as f:
        f.write(b"".join(rows[:5]) + trap + b"http://www.example.test/\tnew\t\t\ta\t0\tnew\n")
        f.write(b"http://www.example.test/\tcut")
    assert_both_ways(out)
    assert read_output(out).by_decision["new"] == 1
    # a checkpoint past the end of the file (damaged): the whole file is scanned instead
    cp["links_offset"] = (out / "links.tsv").stat().st_size + 1
    (out / "checkpoint.json").write_text(json.dumps(cp))
    counts, total, traps = line_by_line(out, 1000)
    assert figures(read_output(out)) == (dict(counts), total, traps)


def test_scan_in_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole-file scan over many blocks: a decision first seen in a later block, a row
    without a TAB, trap rows in several blocks, a crash-cut last line."""
    import skitter.report.data as data

    monkeypatch.setattr(data, "_FIRST_BLOCK", 100)
    monkeypatch.setattr(data, "_SCAN_BLOCK", 700)
    lines = [b"source\ttarget\tfragment\tanchor\tkind\tnofollow\tdecision\n"]
    for i in range(400):
        dec = [b"seen", b"queued", b"seen", b"trap"][i % 4] if i < 300 else b"scope"
        lines.append(b"http://a.test/%d\thttp://a.test/t%d\t\tx\ta\t0\t%s\n" % (i, i, dec))
        if i == 350:
            lines.append(b"no tab at all\n")
    (tmp_path / "links.tsv").write_bytes(b"".join(lines) + b"http://a.test/\tcut")
    (tmp_path / "pages.jsonl").write_text("")
    counts, total, traps = line_by_line(tmp_path, 30)
    assert counts["scope"] == 100 and counts["no tab at all"] == 1 and total == 75
    assert figures(read_output(tmp_path, 30)) == (dict(counts), total, traps)


def test_end_files_without_pages(tmp_path: Path) -> None:
    """No pages.jsonl: metrics.prom is written all the same, report.html is not (a warning)."""
    write_end_files(tmp_path)
    assert "skitter_fetches" in (tmp_path / "metrics.prom").read_text()
    assert not (tmp_path / "report.html").exists()
