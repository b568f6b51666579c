"""bench/accesslog.py and bench/treewatch.py: the measuring side of `make bench` and
`make bench-site` (the benchmarks themselves run by hand, see bench/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from accesslog import LOG_FORMAT, parse  # noqa: E402


def test_log_format_is_the_one_parsed() -> None:
    assert "$msec $request_time $host $status" in LOG_FORMAT
    assert "$sent_http_content_type" in LOG_FORMAT


def test_parse_counts_pages_robots_and_proxy_requests(tmp_path: Path) -> None:
    log = tmp_path / "a.access"
    log.write_text(
        '1.0 0.001 h1.test 200 "GET /robots.txt HTTP/1.1" "text/plain" 30\n'
        '1.1 0.001 h1.test 200 "GET / HTTP/1.1" "text/html" 100\n'
        '1.2 0.001 h1.test 200 "GET /a.html HTTP/1.1" "text/html; charset=utf-8" 50\n'
        '1.3 0.001 h1.test 200 "GET /a.html HTTP/1.1" "text/html" 50\n'
        '1.4 0.001 h2.test 404 "GET /gone HTTP/1.1" "text/html" 10\n'
        '1.5 0.001 h3.test 200 "GET http://h3.test:9/s.css HTTP/1.1" "text/css" 5\n'
        '1.6 0.001 h3.test 200 "GET http://h3.test:9/robots.txt HTTP/1.1" "text/plain" 5\n'
        "not a log line\n"
        '1.7 0.001 h1.test 200 "GET /old HTTP/1.1"\n'  # the short format: no content type
    )
    r = parse(log, 8080)
    assert r.requests == 8
    assert r.robots_hosts == {"h1.test": 1, "h3.test": 1}
    assert r.robots_requests == 2
    assert r.by_url["http://h1.test:8080/a.html"] == 2
    assert r.ok == {
        "http://h1.test:8080/",
        "http://h1.test:8080/a.html",
        "http://h3.test:9/s.css",
        "http://h1.test:8080/old",
    }
    assert r.ok_html == {"http://h1.test:8080/", "http://h1.test:8080/a.html"}
    assert r.hosts == {"h1.test", "h2.test", "h3.test"}
    assert r.by_status == {200: 7, 404: 1}
    assert r.body_bytes == 30 + 100 + 50 + 50 + 10 + 5 + 5


@pytest.mark.parametrize("code", [0, 3])
def test_treewatch_merges_the_commands_figures(tmp_path: Path, code: int) -> None:
    out = tmp_path / "result.json"
    cwd = tmp_path / "run"
    child = (
        "import json, os, subprocess, sys\n"
        "open('written.bin', 'wb').write(b'x' * 1000)\n"
        "subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
        "json.dump({'pages': 7}, open(os.environ['BENCH_OUT'], 'w'))\n"
        f"sys.exit({code})\n"
    )
    rc = subprocess.run(
        [sys.executable, str(BENCH / "treewatch.py"), "--cwd", str(cwd), "--",
         sys.executable, "-c", child],
        env={"BENCH_OUT": str(out), "PATH": "/usr/bin:/bin"},
        check=False,
        timeout=60,
    ).returncode  # fmt: skip
    assert rc == code
    res = json.loads(out.read_text())
    assert res["pages"] == 7
    assert res["exit_code"] == code
    assert res["output_bytes"] == 1000 and res["output_files"] == 1
    for key in ("peak_rss_mb", "peak_pss_mb", "largest_process_rss_mb", "peak_processes"):
        assert key in res
    assert res["peak_rss_mb"] >= res["largest_process_rss_mb"]
    parts = res["peak_rss_parts_mb"]
    assert 1 <= len(parts) <= 2 and abs(sum(parts) - res["peak_rss_mb"]) <= 0.1 * len(parts)
    assert not (tmp_path / "result.json.inner").exists()


def _results(tmp_path: Path) -> Path:
    """A one-host results folder as bench/run_bench.sh leaves it: Skitter and spider-rs runs,
    both with every page, neither asking for robots.txt; spider-rs also fetched one URL twice."""
    import report  # noqa: F401  (bench/report.py: imported here so a syntax error fails loudly)

    rdir = tmp_path / "res"
    rdir.mkdir()
    urls = ["http://h1.test:8080/", "http://h1.test:8080/a.html"]
    (rdir / "urls.txt").write_text("\n".join(urls) + "\n")
    manifest = dict(hosts=1, pages_per_host=2, seed=1, variants=0, crawlable_200=2, missing=0,
                    port=8080, start=urls[0])  # fmt: skip
    (rdir / "manifest.json").write_text(json.dumps(manifest))
    lines = [f'1.0 0.001 h1.test 200 "GET {u[19:]} HTTP/1.1" "text/html" 10\n' for u in urls]
    for stem, label, extra in (("skitter-p1-c128-r1", "skitter-p1-c128", []),
                               ("spider-r1", "spider", [lines[1]])):  # fmt: skip
        rec = dict(label=label, pages=2, wall_s=1.0, pages_per_s=2.0, cpu_s=0.5,
                   peak_rss_mb=10.0, exit=0, output_bytes=100, rate_to_last_page=4.0)  # fmt: skip
        (rdir / f"{stem}.json").write_text(json.dumps(rec))
        (rdir / f"{stem}.access").write_text("".join(lines + extra))
    out = rdir / "skitter-p1-c128-r1"
    out.mkdir()
    (out / "pages.jsonl").write_text(
        "".join(json.dumps({"url": u, "status": 200}) + "\n" for u in urls)
    )
    totals = {"records": 2, "by_status": {"200": 2}}
    (out / "report.json").write_text(json.dumps({"stop_reason": "finished", "totals": totals}))
    return rdir


def test_report_fails_skitter_but_only_notes_a_peer_for_politeness(tmp_path: Path) -> None:
    import report

    rdir = _results(tmp_path)
    assert report.main(rdir) == 1
    summary = json.loads((rdir / "summary.json").read_text())
    sk = summary["checks"]["skitter-p1-c128-r1"]
    assert len(sk) == 1 and "1 of 1 hosts crawled without a robots.txt request" in sk[0]
    assert summary["checks"]["spider-r1"] == []
    notes = summary["notes"]["spider-r1"]
    assert any("without a robots.txt request" in n for n in notes)
    assert any("1 URLs requested more than once" in n for n in notes)
    # both rates are taken to the last page (spider-rs: not over its watchdog's wall
    # time); the whole wall's rate is kept beside
    for tool in ("spider", "skitter-p1-c128"):
        assert summary["medians"][tool]["pages_per_s"] == 4.0
        assert summary["medians"][tool]["pages_per_s_wall"] == 2.0
    assert summary["ratios"]["skitter-p1-c128/spider"]["pages_per_s"] == 1.0
    assert summary["medians"]["skitter-p1-c128"]["out_bytes_per_page"] == 50


def test_skitter_bench_counts_pages_and_finds_the_last_page(tmp_path: Path) -> None:
    from skitter_bench import count_pages

    jsonl = tmp_path / "pages.jsonl"
    rows = [
        {"status": 200, "fetched_at": "2026-12-02T05:46:35.730Z"},
        {"status": 404, "fetched_at": "2026-12-02T05:46:36.001Z"},
        {"status": 200, "fetched_at": "2026-12-02T05:46:01.000Z", "error": "truncated"},
    ]
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pages, statuses, errors, last = count_pages([jsonl, tmp_path / "missing.jsonl"])
    assert (pages, dict(statuses), dict(errors)) == (1, {"200": 2, "404": 1}, {"truncated": 1})
    assert last == 1796190396.001  # 2026-12-02T05:46:36.001Z: the latest, whatever its status
    assert count_pages([tmp_path / "missing.jsonl"])[3] is None


def _redis_results(tmp_path: Path) -> Path:
    """A one-host results folder as bench/run_redis_bench.sh leaves it: 2 Redis workers that
    split the two pages, robots.txt asked for, each worker's report.json "done"."""
    rdir = tmp_path / "redis"
    rdir.mkdir()
    urls = ["http://h1.test:8085/", "http://h1.test:8085/a.html"]
    (rdir / "urls.txt").write_text("\n".join(urls) + "\n")
    manifest = dict(hosts=1, pages_per_host=2, seed=1, variants=0, crawlable_200=2, missing=0,
                    port=8085, start=urls[0])  # fmt: skip
    (rdir / "manifest.json").write_text(json.dumps(manifest))
    log = ['1.0 0.001 h1.test 200 "GET /robots.txt HTTP/1.1" "text/plain" 5\n']
    log += [f'1.1 0.001 h1.test 200 "GET {u[19:]} HTTP/1.1" "text/html" 10\n' for u in urls]
    rec = dict(label="skitter-redis-w2", workers=2, pages=2, wall_s=1.0, cpu_s=0.5, exit=0,
               skitter_exits=[0, 0], redis_cpu_s=0.25, redis_cpu_sys_s=0.05,
               redis_node_cpu_s=[0.25], redis_peak_memory_b=2 * 2**20)  # fmt: skip
    (rdir / "redis-w2-r1.json").write_text(json.dumps(rec))
    (rdir / "redis-w2-r1.access").write_text("".join(log))
    for k, u in enumerate(urls, 1):
        w = rdir / "redis-w2-r1" / f"w{k}"
        w.mkdir(parents=True)
        (w / "pages.jsonl").write_text(json.dumps({"url": u, "status": 200}) + "\n")
        (w / "report.json").write_text(json.dumps({"stop_reason": "done"}))
    return rdir


def test_redis_report_checks_the_workers_pages_together(tmp_path: Path) -> None:
    import redis_report

    rdir = _redis_results(tmp_path)
    assert redis_report.main(rdir) == 0
    summary = json.loads((rdir / "summary.json").read_text())
    assert summary["checks"]["redis-w2-r1"] == []
    med = summary["medians"]["skitter-redis-w2"]
    assert med["redis_peak_mb"] == 2.0 and med["redis_sys_share"] == 0.2
    # the second worker also recorded the first page: a URL in two workers is a FAIL
    w2 = rdir / "redis-w2-r1" / "w2" / "pages.jsonl"
    w2.write_text(w2.read_text() + json.dumps({"url": "http://h1.test:8085/", "status": 200}))
    assert redis_report.main(rdir) == 1
    probs = json.loads((rdir / "summary.json").read_text())["checks"]["redis-w2-r1"]
    assert probs == ["1 URLs with records in two workers, e.g. ['http://h1.test:8085/']"]


def test_report_takes_stop_reason_done_as_a_finished_crawl(tmp_path: Path) -> None:
    import report

    rdir = _results(tmp_path)
    rep = rdir / "skitter-p1-c128-r1" / "report.json"
    rep.write_text(rep.read_text().replace('"finished"', '"done"'))
    r = {"stem": "skitter-p1-c128-r1", "exit": 0}
    urls = set((rdir / "urls.txt").read_text().split())
    assert report.check_skitter(r, rdir, urls, 0) == []
    rep.write_text(rep.read_text().replace('"done"', '"max_pages"'))
    assert report.check_skitter(r, rdir, urls, 0) == ["report.json stop_reason 'max_pages'"]
