"""report.html from an output folder: figures, charts, caps, escaping, atomic write, CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from skitter.cli import main
from skitter.report import CHARTS, read_output, render, write_report


def row(url: str, status: int | None, *, depth: int = 0, error: str | None = None,
        ctype: str | None = "text/html", elapsed: float = 0.02, second: int = 0,
        nbytes: int = 100) -> dict[str, object]:  # fmt: skip
    return {
        "url": url, "final_url": url, "status": status, "depth": depth, "content_type": ctype,
        "bytes": nbytes, "sha1": None, "fetched_at": f"2024-05-01T12:00:{second:02d}.500Z",
        "elapsed_s": elapsed, "attempts": 1, "redirects": [], "error": error,
        "error_detail": f"detail of {error}" if error else None,
    }  # fmt: skip


def make_output(out: Path, n_errors: int = 3) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = [row(f"http://a.test/{i}", 200, depth=i % 3, second=i % 5) for i in range(20)]
    rows += [row(f"http://b.test/e{i}", None, error="timeout", ctype=None, elapsed=31.0,
                 second=6) for i in range(n_errors)]  # fmt: skip
    rows.insert(0, row("http://b.test/<script>alert(1)</script>", 404, ctype="text/<b>", second=3))
    text = "".join(json.dumps(r) + "\n" for r in rows) + '{"url": "http://cut'
    (out / "pages.jsonl").write_text(text)
    links = ["source\ttarget\tfragment\tanchor\tkind\tnofollow\tdecision"]
    links += [f"http://a.test/\thttp://a.test/{i}\t\tx\ta\t0\tqueued" for i in range(5)]
    links += [f"http://a.test/\thttp://a.test/c/c/c/{i}\t\tx\ta\t0\ttrap" for i in range(4)]
    (out / "links.tsv").write_text("\n".join(links) + "\nhttp://a.test/\tcut")
    report = {
        "skitter": "0.1.0", "finished": False, "stop_reason": "interrupted",
        "seeds": ["http://a.test/"],
        "totals": {"elapsed_s": 10.0, "robots_disallowed": 2},
        "robots": {"http://a.test": {"disallowed": 2,
                   "disallowed_urls": ["http://a.test/private/1", "http://a.test/private/2"]}},
        "traps": {"repeated_segments": {"limit": 2, "count": 4, "urls": []}},
    }  # fmt: skip
    (out / "report.json").write_text(json.dumps(report))


def test_read_output_figures(tmp_path: Path) -> None:
    make_output(tmp_path)
    d = read_output(tmp_path)
    assert (d.records, d.ok, d.errors, d.error_total) == (24, 20, 3, 4)
    assert d.by_status == {"200": 20, "none": 3, "404": 1}
    assert d.by_depth == {0: 11, 1: 7, 2: 6}
    assert d.host_pages == {"a.test": 20, "b.test": 4}
    assert d.host_errors == {"b.test": 4}
    assert d.elapsed_hist[0] == 21 and d.elapsed_hist[-1] == 3  # <= 50 ms, > 30 s
    assert d.by_decision == {"queued": 5, "trap": 4}
    assert d.trap_total == 4 and d.trap_rows[0] == ("http://a.test/", "http://a.test/c/c/c/0")
    assert d.robots_total == 2 and d.robots_rows[1] == (
        "http://a.test",
        "http://a.test/private/2",
        "disallowed",
    )
    # seconds 0..6 since the first record: 4 records in each of 0..4, none in 5, 3 in 6
    assert d.pages_per_s() == [(0.0, 4.0), (1.0, 4.0), (2.0, 4.0), (3.0, 5.0), (4.0, 4.0),
                               (5.0, 0.0), (6.0, 3.0)]  # fmt: skip


def test_render_charts_escaping_and_caps(tmp_path: Path) -> None:
    make_output(tmp_path, n_errors=30)
    html = render(read_output(tmp_path, cap=10), title="t")
    for name in CHARTS:
        assert f'data-chart="{name}"' in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "text/&lt;b&gt;" in html
    errors_table = html[html.index('<table id="errors"') :]
    errors_table = errors_table[: errors_table.index("</table>")]
    assert errors_table.count("<tr>") == 11  # header + cap
    assert "First 10 of 31 shown; the full list: pages.jsonl" in html
    assert "interrupted" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing external


def test_write_report_atomic_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    make_output(out)
    (out / "report.html").write_text("old")
    assert write_report(out) == out / "report.html"
    assert (out / "report.html").read_text().startswith("<!doctype html>")
    assert sorted(p.name for p in out.iterdir()) == [
        "links.tsv",
        "pages.jsonl",
        "report.html",
        "report.json",
    ]
    assert main(["report", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "report.html")
    assert "skitter_fetches_total" in (out / "metrics.prom").read_text()
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"skitter: error: not a folder: {tmp_path / 'missing'}",
        f"skitter: error: {tmp_path}: no pages.jsonl (not a crawl output folder)",
    ]


def test_report_of_empty_crawl(tmp_path: Path) -> None:
    (tmp_path / "pages.jsonl").write_text("")
    html = render(read_output(tmp_path))
    assert html.count("no data") == len(CHARTS) - 1  # the response-time buckets show zeros


def test_check_links_html_has_the_report_look() -> None:
    from skitter.checklinks.formats import format_report
    from skitter.report.page import STYLE
    from tests.unit.test_checklinks import _sample

    html = format_report(_sample(), "html")
    assert STYLE in html and 'data-chart="verdicts"' in html
    for section in ("broken", "unverified", "redirected"):
        assert f'<table id="{section}">' in html and f'data-table="{section}"' in html
    assert '<a href="http://www.test/gone" class="broken">http://www.test/gone</a>' in html


def test_report_disk_full_names_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    """skitter report with report.html not writable (injected: RLIMIT_FSIZE, EFBIG at 4 KiB):
    one line naming report.html, exit 2, no temporary file, the old report.html kept."""
    import resource
    import signal
    import subprocess
    import sys

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    out = tmp_path / "crawl"
    make_output(out)
    (out / "report.html").write_text("old")
    proc = subprocess.run(
        [sys.executable, "-m", "skitter", "report", str(out)],
        capture_output=True, text=True, timeout=60, preexec_fn=small_files,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"skitter: error: File too large: {out / 'report.html'}\n"
    assert sorted(p.name for p in out.iterdir() if "tmp" in p.name) == []
    assert (out / "report.html").read_text() == "old"
