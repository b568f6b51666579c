"""The command line's conventions as a user meets them (issue 9): exit codes, unreachable
seeds, output paths checked first, --resolve names, seeds from stdin, the config file,
logging and the stats line. Subprocesses against loopback servers."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import arun_cli
from tests.integration.site import Site, html, links_page

A = "conv.example.test"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def records(out: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (out / "pages.jsonl").read_text().splitlines()]


# ------------------------------------------------------ fault 2: unreachable seeds, exit 4


HELD: list[asyncio.StreamWriter] = []


async def _hanging_server() -> tuple[asyncio.Server, int]:
    """A TCP server that accepts and never answers (connections kept in HELD)."""

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        HELD.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1])


@pytest.mark.parametrize("processes", ["1", "2"])
@pytest.mark.parametrize("how", ["refused", "tls_to_plain_http", "hangs", "ipv6_to_ipv4_only"])
async def test_unreachable_seed_exits_4_with_cause_soon(
    site: Site, tmp_path: Path, how: str, processes: str
) -> None:
    site.route(A, "/", html("<p>plain http</p>"))
    server = None
    if how == "refused":
        port, scheme, kind = closed_port(), "http", "connect"
    elif how == "tls_to_plain_http":
        port, scheme, kind = site.port, "https", "tls"
    elif how == "hangs":
        server, port = await _hanging_server()
        scheme, kind = "http", "timeout"
    else:  # the site listens on 127.0.0.1 only: ::1 refuses
        port, scheme, kind = site.port, "http", "connect"
    host = "[::1]" if how == "ipv6_to_ipv4_only" else A
    out = tmp_path / "out"
    # --robots-retry 3600: if the failure of robots.txt waited for it (the old behaviour:
    # about 120 s), this would time out; the --retries backoff is 2 s
    try:
        rc, _stdout, err = await arun_cli(
            "crawl",
            f"{scheme}://{host}:{port}/",
            "--out", str(out),
            "--resolve", f"{A}:{port}:127.0.0.1",
            "--resolve-only",
            "--retries", "1",
            "--robots-retry", "3600",
            "--timeout", "1",
            "--delay", "0",
            "--processes", processes,
            "-v",
            timeout=45,
        )  # fmt: skip
    finally:
        if server is not None:
            server.close()
            for w in HELD:
                w.close()
            HELD.clear()
            await server.wait_closed()
    assert rc == 4, err
    assert "no seed got any HTTP response" in err and "Traceback" not in err
    # -v: the politeness decision, with the --retries backoff (2 s), not --robots-retry
    assert re.search(
        r"INFO p[01] backoff \S+: \S+ retried in 2\.00 s after robots\.txt unreachable "
        r"\(attempt 1 failed\)",
        err,
    ), err
    (rec,) = records(out)
    assert rec["status"] is None and rec["error"] == "robots_unreachable"
    detail = str(rec["error_detail"])
    assert detail.startswith(f"robots.txt unreachable ({kind}:"), detail
    assert "after 2 attempts" in detail
    report = json.loads((out / "report.json").read_text())
    assert report["totals"]["by_error"] == {"robots_unreachable": 1}
    assert report["stop_reason"] == "done"


async def test_check_links_unreachable_start_url_exits_4(tmp_path: Path) -> None:
    port = closed_port()
    rc, _, err = await arun_cli(
        "check-links",
        f"http://{A}:{port}/",
        "--resolve", f"{A}:{port}:127.0.0.1",
        "--resolve-only",
        "--retries", "0",
        "--delay", "0",
        "-o", str(tmp_path / "r.txt"),
        timeout=45,
    )  # fmt: skip
    assert rc == 4, err
    assert "no start URL got any HTTP response" in err


async def test_one_answering_seed_is_enough_for_exit_0(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", html("<p>x</p>"))
    dead = closed_port()
    rc, _, err = await arun_cli(
        "crawl",
        site.url(A, "/"),
        f"http://dead.test:{dead}/",
        "--out", str(tmp_path / "o"),
        "--resolve", f"{A}:{site.port}:127.0.0.1",
        "--resolve", f"dead.test:{dead}:127.0.0.1",
        "--resolve-only", "--retries", "0", "--delay", "0",
    )  # fmt: skip
    assert rc == 0, err


async def test_every_seed_refused_by_robots_exits_4(site: Site, tmp_path: Path) -> None:
    from tests.integration.site import text

    site.route(A, "/robots.txt", text("User-agent: *\nDisallow: /\n"))
    rc, stdout, err = await arun_cli(
        "crawl", site.url(A, "/"), "--out", str(tmp_path / "o"),
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0",
    )  # fmt: skip
    assert rc == 4, err  # robots.txt refusals count as no answer (issue 9, fault 2)
    assert "1 more URL blocked by robots.txt" in stdout  # singular (fault 12)


# ---------------------------------------------- fault 4: check-links output path first


@pytest.mark.parametrize("target", ["missing/dir/report.html", "."])
async def test_check_links_output_checked_before_crawling(
    site: Site, tmp_path: Path, target: str
) -> None:
    site.route(A, "/", links_page("/a"))
    rc, _stdout, err = await arun_cli(
        "check-links", site.url(A, "/"), "-o", str(tmp_path / target),
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0",
    )  # fmt: skip
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "--output" in err
    assert site.hits == []  # refused before any request


async def test_check_links_report_write_failure_keeps_results(site: Site, tmp_path: Path) -> None:
    """A report that cannot be written after the check (here: the folder is removed while
    checking) gives exit 1, one line, and keeps the results for a resume."""
    gone = tmp_path / "gone"
    gone.mkdir()
    gate = asyncio.Event()

    async def slow(request: object) -> object:
        gone.rmdir()
        gate.set()
        return await html("<p>a</p>")(request)  # type: ignore[arg-type]

    site.route(A, "/", links_page("/a"))
    site.route(A, "/a", slow)
    rc, _stdout, err = await arun_cli(
        "check-links", site.url(A, "/"), "-o", str(gone / "r.txt"),
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0",
    )  # fmt: skip
    assert gate.is_set()
    assert rc == 1, err
    (line,) = err.strip().splitlines()
    assert "No such file or directory" in line and "r.txt" in line
    resume = line.split("write the report with: ")[1]
    out_dir = Path(resume.split("--out ")[1].split(" ")[0])
    assert (out_dir / "pages.jsonl").exists()  # the results are kept
    (tmp_path / "here").mkdir()
    rc, _, err = await arun_cli(
        "check-links", "--resume", "--out", str(out_dir), "-o", str(tmp_path / "here/r.txt")
    )
    assert rc == 0, err
    assert "2 checked" in (tmp_path / "here/r.txt").read_text()
    import shutil

    shutil.rmtree(out_dir.parent)


# --------------------------------------- fault 6: --resolve IDNA; seeds on stdin; config


async def test_resolve_idna_name_and_seeds_from_stdin(site: Site, tmp_path: Path) -> None:
    site.route("xn--dcs-gna.test", "/", html("<p>docs</p>"))
    out = tmp_path / "out"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl",
        "--seeds-file", "-",
        "--out", str(out),
        "--resolve", f"DÓCS.test:{site.port}:127.0.0.1",
        "--resolve-only", "--delay", "0",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(
        proc.communicate(f"http://dócs.test:{site.port}/\n".encode()), 60
    )
    assert proc.returncode == 0, err.decode()
    (rec,) = records(out)
    assert rec["status"] == 200 and rec["url"] == f"http://xn--dcs-gna.test:{site.port}/"


async def test_config_file_drives_a_crawl(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/a", "/b"))
    site.route(A, "/a", html("<p>a</p>"))
    site.route(A, "/b", html("<p>b</p>"))
    out = tmp_path / "out"
    cfg = tmp_path / "crawl.toml"
    cfg.write_text(
        f'seeds = ["{site.url(A, "/")}"]\nout = "{out}"\n'
        f'resolve = ["{A}:{site.port}:127.0.0.1"]\nresolve-only = true\n'
        "delay = 0\nmax-pages = 1\nno-warc = true\n"
    )
    # the command line wins: --max-pages 2 over the file's 1
    rc, stdout, err = await arun_cli("crawl", "--config", str(cfg), "--max-pages", "2")
    assert rc == 0, err
    assert json.loads((out / "report.json").read_text())["totals"]["ok"] == 2
    assert not list(out.glob("*.warc.gz"))
    # fault 12: no *.warc.gz in the summary with --no-warc
    assert "output:" in stdout and "warc" not in stdout


# ------------------------------------------- fault 9: -v, --log-file, --stats-interval


async def test_verbose_logs_each_request_on_stderr_and_log_file(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/a"))
    site.route(A, "/a", html("<p>" + "x" * 100 + "</p>"))
    out, log = tmp_path / "out", tmp_path / "crawl.log"
    rc, stdout, err = await arun_cli(
        "crawl", site.url(A, "/"), "--out", str(out), "-v", "--log-file", str(log),
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0",
    )  # fmt: skip
    assert rc == 0, err
    import re

    line = re.compile(
        r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO p[01] (GET|HEAD) (\S+) (\d{3}|-) (\d+) "
        r"(\d+) attempt=(\d+)"
    )
    for text in (err, log.read_text()):
        reqs = [m.groups() for m in map(line.match, text.splitlines()) if m]
        by_url = {u: (st, int(n), int(a)) for _, u, st, n, _ms, a in reqs}
        assert by_url[site.url(A, "/robots.txt")][0] == "404"
        assert by_url[site.url(A, "/a")] == ("200", len("<p>" + "x" * 100 + "</p>"), 1)
    assert "INFO" not in stdout and "GET" not in stdout  # logs never on stdout
    # politeness decisions are logged too
    assert re.search(r"INFO p[01] robots\.txt http://conv\.example\.test:\d+: 404 \(4xx", err)
    assert re.search(r"INFO p[01] delay conv\.example\.test:\d+: next request in 0\.00 s", err)


async def test_stats_line_when_stderr_is_not_a_terminal(site: Site, tmp_path: Path) -> None:
    for i in range(4):
        site.route(A, f"/{i}", links_page(f"/{i + 1}"))
    site.route(A, "/4", html("<p>end</p>"))
    rc, _stdout, err = await arun_cli(
        "crawl", site.url(A, "/0"), "--out", str(tmp_path / "o"),
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only",
        "--delay", "0.3", "--stats-interval", "0.05",
    )  # fmt: skip
    assert rc == 0, err
    stats = [x for x in err.splitlines() if x.startswith("skitter: stats: ")]
    line = re.compile(
        r"^skitter: stats: \d+ pages? \([\d.]+ pages/s\), \d+ queued, \d+ in flight, "
        r"\d+ errors?$"
    )
    assert stats and all(line.match(x) for x in stats), stats
    rc, _, err = await arun_cli(
        "crawl", site.url(A, "/0"), "--out", str(tmp_path / "o2"),
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only",
        "--delay", "0.3", "--stats-interval", "0",
    )  # fmt: skip
    assert rc == 0 and "skitter: stats" not in err


# ---------------------------------------------------- fault 8: resuming a finished crawl


async def test_resuming_a_finished_crawl_touches_nothing(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/a"))
    site.route(A, "/a", html("<p>a</p>"))
    out = tmp_path / "out"
    flags = ["--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0"]
    rc, _, err = await arun_cli("crawl", site.url(A, "/"), "--out", str(out), *flags)
    assert rc == 0, err

    def files() -> dict[str, tuple[int, bytes]]:
        return {
            str(p.relative_to(out)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(out.rglob("*"))
            if p.is_file()
        }

    before = files()
    hits = len(site.hits)
    rc, _stdout, err = await arun_cli("crawl", "--resume", "--out", str(out), *flags)
    assert rc == 0, err
    assert f"the crawl in {out} is finished (2 pages); nothing to resume" in err
    assert files() == before  # no file touched: report.json robots and elapsed_s unchanged
    assert len(site.hits) == hits  # nothing fetched (robots.txt included)


# ------------------------------------------ fault 12: --processes shows queued, in flight


@pytest.mark.parametrize("processes", ["1", "2"])
async def test_stats_show_queued_and_in_flight(site: Site, tmp_path: Path, processes: str) -> None:
    """While /slow is held by the server, a stats line reports it in flight and the other
    pages of its host (host concurrency 1) queued."""
    release = asyncio.Event()

    async def slow(request: Any) -> Any:
        await release.wait()
        return await html("<p>slow</p>")(request)

    site.route(A, "/", links_page("/slow", "/a", "/b"))
    site.route(A, "/slow", slow)
    site.route(A, "/a", html("<p>a</p>"))
    site.route(A, "/b", html("<p>b</p>"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", site.url(A, "/"),
        "--out", str(tmp_path / "o"), "--processes", processes,
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0",
        "--stats-interval", "0.1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    seen = ""
    try:
        # a line may be sampled before /a and /b are queued (the root in flight, or a status
        # message older than the lease): wait for the held state (bounded: 1200 lines)
        for _ in range(1200):
            raw = await asyncio.wait_for(proc.stderr.readline(), 60)
            assert raw, "stderr closed before the expected stats line"
            seen = raw.decode()
            # the seed's own line (it in flight while parsed, 0 queued) may come first
            if seen.startswith("skitter: stats: ") and " 2 queued, 1 in flight" in seen:
                break
    finally:
        release.set()
    assert " 2 queued, 1 in flight, 0 errors" in seen, seen
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err


# ------------------------------------- fault 7: summary = report.json; --max-redirects


async def test_summary_agrees_with_report_and_max_redirects(site: Site, tmp_path: Path) -> None:
    from tests.integration.site import redirect

    site.route(A, "/", links_page("/big", "/r1"))
    site.route(A, "/big", html("<p>" + "x" * 5000 + "</p>"))  # past --max-body
    site.route(A, "/r1", redirect("/r2"))
    site.route(A, "/r2", redirect("/r3"))
    site.route(A, "/r3", redirect("/end"))
    site.route(A, "/end", html("<p>end</p>"))
    out = tmp_path / "o"
    rc, stdout, err = await arun_cli(
        "crawl", site.url(A, "/"), "--out", str(out), "--max-body", "1k",
        "--max-redirects", "2",
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0",
    )  # fmt: skip
    assert rc == 0, err
    recs = {r["url"]: r for r in records(out)}
    assert recs[site.url(A, "/big")]["error"] == "body_too_large"
    assert recs[site.url(A, "/r1")]["error"] == "too_many_redirects"
    t = json.loads((out / "report.json").read_text())["totals"]
    line = stdout.splitlines()[0]
    assert line.startswith(f"{t['records']} pages: {t['ok']} ok (2xx)"), (line, t)
    assert f"{t['errors']} errors (body_too_large 1, too_many_redirects 1)" in line, line


async def test_check_links_output_to_a_fifo_or_symlink_is_written_not_replaced(
    site: Site, tmp_path: Path
) -> None:
    """-o /dev/stdout style targets: a FIFO (or device) is written in place, a symlink's
    target gets the report; neither is replaced by a regular file (a rename would)."""
    import os
    import threading

    site.route(A, "/", links_page("/a"))
    site.route(A, "/a", html("<p>a</p>"))
    common = ["--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0"]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    rc, _, err = await arun_cli("check-links", site.url(A, "/"), "-o", str(fifo), *common)
    await asyncio.to_thread(reader.join, 30)
    assert rc == 0, err
    assert fifo.is_fifo() and b"2 checked" in got[0]
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    rc, _, err = await arun_cli("check-links", site.url(A, "/"), "-o", str(link), *common)
    assert rc == 0, err
    assert link.is_symlink() and "2 checked" in real.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "pipe", "real.txt"]


@pytest.mark.parametrize("command", ["crawl", "fetch"])
async def test_summary_on_a_full_stdout_says_so(site: Site, tmp_path: Path, command: str) -> None:
    """stdout on a full disk (/dev/full): the files are whole; one line says the summary
    could not be written (not "cannot write ?" and a resume hint), exit 1."""
    site.route(A, "/", links_page("/a"))
    site.route(A, "/a", html("<p>a</p>"))
    out = tmp_path / "out"
    urls = tmp_path / "urls.txt"
    urls.write_text(site.url(A, "/") + "\n" + site.url(A, "/a") + "\n")
    seeds = [site.url(A, "/")] if command == "crawl" else ["--urls", str(urls)]
    with open("/dev/full", "w") as full:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skitter", command, *seeds, "--out", str(out),
            "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0",
            stdout=full, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err_b = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1, err_b
    files = "the crawl's files" if command == "crawl" else "the files"
    assert err_b.decode() == (
        "skitter: error: cannot write the summary to stdout: No space left on device "
        f"({files} in {out}/ are not affected)\n"
    )
    assert len(records(out)) == 2
    assert json.loads((out / "report.json").read_text())["stop_reason"] == "done"
