"""The command line as a user runs it (subprocesses)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from skitter import __version__
from tests.integration.site import Site, html, links_page

A = "cli.example.test"


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skitter", *args], capture_output=True, text=True, timeout=timeout
    )


async def arun_cli(*args: str, timeout: float = 60) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "skitter",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def loopback_flags(site: Site) -> list[str]:
    """Host A of ``site`` on loopback only, no politeness delay."""
    return ["--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0"]


def test_version() -> None:
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"skitter {__version__}"


@pytest.mark.parametrize(
    "args, message",
    [
        (["crawl", "--out", "x", "--delay", "fast", "http://a.test/"], "not a number"),
        (["crawl", "http://a.test/"], "required: --out"),
        (
            ["crawl", "--out", "OUT", "--seeds-file", "/nonexistent/seeds.txt"],
            "cannot read seeds file",
        ),
        (["crawl", "--out", "OUT", "ftp://a.test/"], "not an http(s) URL"),
        (["crawl", "--out", "OUT"], "no seeds"),
        (["crawl", "--out", "OUT", "--resolve", "a.test:80", "http://a.test/"], "HOST:PORT:ADDR"),
        (["crawl", "--out", "OUT", "--include", "(", "http://a.test/"], "bad regular expression"),
        (["crawl", "--resume", "--out", "OUT"], "no crawl to resume"),
        (["crawl", "--out", "OUT", "--timeout", "0", "http://a.test/"], "must be > 0"),
        (["crawl", "--out", "OUT", "--delay", "inf", "http://a.test/"], "finite"),
        (["crawl", "--out", "OUT", "--delay", "nan", "http://a.test/"], "finite"),
        (["crawl", "--out", "OUT", "--proxy", "notaproxy", "http://a.test/"], "proxy URL"),
        (
            ["crawl", "--out", "OUT", "--header", "X-A: b\r\nX-Evil: 1", "http://a.test/"],
            "control characters",
        ),
        (["crawl", "--out", "OUT", "--seeds-file", "EMPTY"], "has no seeds"),
        (["crawl", "--out", "OUT", "--processes", "0", "http://a.test/"], "must be >= 1"),
        # a fork bomb by typo: 100000 processes of ~70 MB each
        (["crawl", "--out", "OUT", "--processes", "100000", "http://a.test/"], "at most"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "empty.txt").write_text("# only a comment\n\n")
    subst = {"OUT": str(tmp_path / "out"), "EMPTY": str(tmp_path / "empty.txt")}
    args = [subst.get(a, a) for a in args]
    r = run_cli(*args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert message in r.stderr


def test_non_empty_out_dir_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    r = run_cli("crawl", "--out", str(out), "http://a.test/", "--resolve-only")
    assert r.returncode == 2 and "not empty" in r.stderr
    assert (out / "mine.txt").read_text() == "keep me"


async def test_crawl_then_resume_rules(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/a", "/b"))
    site.route(A, "/a", html("<p>a</p>"))
    site.route(A, "/b", html("<p>b</p>"))
    out = tmp_path / "out"
    common = [*loopback_flags(site), "--out", str(out)]
    rc, stdout, err = await arun_cli("crawl", site.url(A, "/"), *common)
    assert rc == 0, err
    assert "3 pages: 3 ok (2xx), 0 redirects (3xx)" in stdout and str(out) in stdout
    report = json.loads((out / "report.json").read_text())
    assert report["totals"]["by_status"] == {"200": 3}
    # same folder without --resume: refused, nothing lost
    rc, _, err = await arun_cli("crawl", site.url(A, "/"), *common)
    assert rc == 2 and "--resume" in err
    # resume with a changed scope: refused
    rc, _, err = await arun_cli("crawl", "--resume", *common, "--scope", "domain")
    assert rc == 2 and "--scope differs" in err
    # resume with a different seed: refused
    rc, _, err = await arun_cli("crawl", "--resume", site.url(A, "/a"), *common)
    assert rc == 2 and "--seeds differs" in err
    # resume of a finished crawl with new politeness flags: accepted, nothing refetched
    before = len(site.hits)
    rc, _, err = await arun_cli("crawl", "--resume", *common, "--delay", "0.5")
    assert rc == 0, err
    assert len(site.hits) == before
    lines = (out / "pages.jsonl").read_text().splitlines()
    assert len(lines) == 3


@pytest.mark.slow
async def test_ctrl_c_stops_cleanly_and_resume_finishes(site: Site, tmp_path: Path) -> None:
    import signal

    from aiohttp import web

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        return web.Response(text="<p>x</p>", content_type="text/html")

    pages = [f"/p{i}" for i in range(60)]
    site.route(A, "/", links_page(*pages))
    for p in pages:
        site.route(A, p, slow)
    out = tmp_path / "out"
    common = [*loopback_flags(site), "--out", str(out)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "skitter",
        "crawl",
        site.url(A, "/"),
        *common,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    for _ in range(3000):  # bounded: 30 s
        p = out / "pages.jsonl"
        if p.exists() and p.read_bytes().count(b"\n") >= 10:
            break
        await asyncio.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 130
    assert f"skitter crawl --resume --out {out}" in err.decode()
    assert "Traceback" not in err.decode()
    n_before = len((out / "pages.jsonl").read_text().splitlines())
    assert 10 <= n_before < 61
    rc, _, err2 = await arun_cli("crawl", "--resume", *common)
    assert rc == 0, err2
    urls = [json.loads(x)["url"] for x in (out / "pages.jsonl").read_text().splitlines()]
    assert sorted(urls) == sorted(site.url(A, p) for p in ["/", *pages])


async def test_max_pages_exits_0_and_seeds_file_forms(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/a", "/b", "/c"))
    for p in ("/a", "/b", "/c"):
        site.route(A, p, html("<p>x</p>"))
    seeds = tmp_path / "seeds.txt"
    # nowhere.test is not in --resolve: under --resolve-only it fails at once as "dns"
    seeds.write_text(f"  # an indented comment\n\nnowhere.test/docs/x\n{site.url(A, '/')}\n")
    out = tmp_path / "out"
    rc, stdout, err = await arun_cli(
        "crawl",
        "--seeds-file",
        str(seeds),
        "--max-pages",
        "2",
        "--out",
        str(out),
        *loopback_flags(site),
        "--concurrency",
        "1",
    )
    assert rc == 0, err
    assert "Traceback" not in err
    report = json.loads((out / "report.json").read_text())
    assert report["stop_reason"] == "max_pages" and report["totals"]["ok"] == 2
    assert "stopped at --max-pages 2" in stdout
    state = json.loads((out / "state.json").read_text())
    # a bare name with a path keeps its path (https, as a bare name means)
    assert state["settings"]["seeds"] == ["https://nowhere.test/docs/x", site.url(A, "/")]
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--max-pages", "3")
    assert rc == 0, err
