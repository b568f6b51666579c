"""``skitter check-links`` end to end: the real CLI (a subprocess) against loopback sites.

Every host name is mapped to 127.0.0.1 with ``--resolve`` and ``--resolve-only``; names left
out of the map fail as DNS errors without any query, so nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from skitter.cli import main
from tests.integration.rawserver import RawConnection, RawRequest, RawServer, head, response
from tests.integration.site import Handler, Site, html, links_page, redirect, text

W = "www.example.test"
EXT = "ext.example.test"
REPO = Path(__file__).resolve().parents[2]
CASE_UA = "Mozilla/5.0 (compatible; TestCrawler/1.0; +https://www.example.test/bot)"
MIB = 1 << 20


async def run_cli(
    port: int, hosts: Iterable[str], *args: str, timeout_s: float = 60.0
) -> tuple[int, str, str]:
    """Run ``skitter check-links`` with every host mapped; returns (exit code, out, err)."""
    cmd = [sys.executable, "-m", "skitter", "check-links", "--resolve-only", "--delay", "0"]
    for h in sorted(set(hosts)):
        cmd += ["--resolve", f"{h}:{port}:127.0.0.1"]
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
async def raw() -> AsyncIterator[RawServer]:
    """A started raw-bytes server (virtual hosts by Host header)."""
    async with RawServer() as server:
        yield server


def by_method(head_status: int, get_status: int, body: str = "<p>x</p>") -> Handler:
    """HEAD answers ``head_status``, GET ``get_status``."""

    async def h(request: web.Request) -> web.StreamResponse:
        status = head_status if request.method == "HEAD" else get_status
        headers = {"Allow": "GET"} if status == 405 else None
        return web.Response(text=body, status=status, content_type="text/html", headers=headers)

    return h


def first_then(first: web.Response, then: Handler) -> Handler:
    """Answer ``first`` once, then always ``then``."""
    used = [False]

    async def h(request: web.Request) -> web.StreamResponse:
        if not used[0]:
            used[0] = True
            return first
        return await then(request)

    return h


def requests_of(site: Site, host: str, path: str) -> list[str]:
    """Methods of the requests made for host + path, in order."""
    return [h.method for h in site.hits if h.host == host and h.path_qs == path]


def build_site(site: Site) -> dict[str, str]:
    """The test web of the main test; returns name -> absolute URL."""
    p = site.port
    u = {
        "root": site.url(W, "/"),
        "ext_ok": f"http://{EXT}:{p}/ok",
        "ext_gone": f"http://{EXT}:{p}/gone",
        "ext_secret": f"http://{EXT}:{p}/secret",
        "ext_nf": f"http://{EXT}:{p}/nf",
        "nohead": f"http://nohead.example.test:{p}/doc",
        "rl": f"http://rl.example.test:{p}/p",
        "dead_x": f"http://dead.example.test:{p}/x",
        "dead_y": f"http://dead.example.test:{p}/y",
        "perm": f"http://perm.example.test:{p}/old",
    }
    root = f"""<!doctype html><html><head><title>Home</title></head><body>
<h1 id="intro">Home</h1>
<a href="/a.html">A page</a>
<a href="/a.html#sec">A section</a>
<a href="/a.html#nosuch">Bad anchor</a>
<a href="#top">Top</a> <a href="#intro">Intro</a>
<a href="/missing.html">Missing</a> <a href="/missing.html">Missing</a>
<a href="/old">Old</a> <a href="/temp">Temp</a> <a href="/loop1">Loop</a>
<a href="/private/x">Private</a>
<a href="mailto:me@example.test">Mail</a> <a href="tel:+1-555-0100">Call</a>
<a href="data:text/plain;base64,SGk=">Data</a> <a href=" javascript:openWin('/popup.html')">JS</a>
<a href="ftp://files.example.test/pub/">FTP</a>
<a href="{u["ext_ok"]}">Ext ok</a> <a href="{u["ext_ok"]}#frag">Ext ok frag</a>
<a href="{u["ext_gone"]}">Ext gone</a> <a href="{u["ext_secret"]}">Ext secret</a>
<a href="{u["ext_nf"]}" rel="nofollow">Ext nofollow</a>
<a href="{u["nohead"]}">No HEAD</a> <a href="{u["rl"]}">Rate limited</a>
<a href="{u["dead_x"]}">Dead x</a> <a href="{u["dead_y"]}">Dead y</a>
<a href="{u["perm"]}">Moved</a>
<img srcset="/img/a.png 1x, /img/missing.png 2x" alt="Logo">
</body></html>"""
    site.route(W, "/robots.txt", text("User-agent: *\nDisallow: /private/\n"))
    site.route(W, "/", html(root))
    site.route(
        W,
        "/a.html",
        html(
            '<h2 id="sec">Sec</h2><a href="/missing.html">Missing again</a>'
            '<a href="/b.html">B</a><a href="/">Home</a>'
        ),
    )
    site.route(W, "/b.html", html('<a href="/a.html#sec">back</a>'))
    site.route(W, "/old", redirect("/a.html", 301))
    site.route(W, "/temp", redirect("/b.html", 302))
    site.route(W, "/loop1", redirect("/loop2", 302))
    site.route(W, "/loop2", redirect("/loop1", 302))
    site.route(W, "/private/x", html("secret"))
    site.route(W, "/img/a.png", text(b"\x89PNG", content_type="image/png"))
    # external pages are checked, never parsed: their links must not be requested
    site.route(EXT, "/ok", links_page("/should-not-fetch"))
    site.route(EXT, "/nf", html("nofollow target"))
    site.route(EXT, "/secret", html("no bots", status=403))
    site.route("nohead.example.test", "/doc", by_method(405, 200))
    slow_down = web.Response(status=429, headers={"Retry-After": "1"}, text="slow down")
    site.route("rl.example.test", "/p", first_then(slow_down, html("ok")))
    site.route("perm.example.test", "/old", redirect("/new", 308))
    site.route("perm.example.test", "/new", html("new"))
    return u


def src(url: str, anchor: str, count: int = 1) -> dict[str, Any]:
    return {"url": url, "anchor": anchor, "count": count}


async def test_check_links_report_exact(site: Site, tmp_path: Path) -> None:
    u = build_site(site)
    w = site.url(W, "")  # http://www.example.test:PORT
    root, a = u["root"], w + "/a.html"
    code, out, err = await run_cli(
        site.port,
        site.hosts(),  # dead.example.test is not mapped: a DNS failure
        root,
        "--check-resources",
        "--format",
        "json",
        "--out",
        str(tmp_path / "check"),
    )
    assert code == 1, err
    assert json.loads(out) == {
        "summary": {
            "checked": 20,
            "ok": 9,
            "broken": 8,
            "unverified": 1,
            "redirected": 2,
            "excluded": 6,
        },
        "broken": [
            {"url": u["dead_x"], "status": None, "error": "dns", "sources": [src(root, "Dead x")]},
            {"url": u["dead_y"], "status": None, "error": "dns", "sources": [src(root, "Dead y")]},
            {"url": u["ext_gone"], "status": 404, "error": None,
             "sources": [src(root, "Ext gone")]},
            {"url": u["ext_ok"] + "#frag", "status": 200, "error": "missing_fragment",
             "sources": [src(root, "Ext ok frag")]},
            {"url": a + "#nosuch", "status": 200, "error": "missing_fragment",
             "sources": [src(root, "Bad anchor")]},
            {"url": w + "/img/missing.png", "status": 404, "error": None,
             "sources": [src(root, "Logo")]},
            {"url": w + "/loop1", "status": None, "error": "too_many_redirects",
             "sources": [src(root, "Loop")]},
            {"url": w + "/missing.html", "status": 404, "error": None,
             "sources": [src(root, "Missing", 2), src(a, "Missing again")]},
        ],
        "unverified": [
            {"url": u["ext_secret"], "status": 403, "error": None,
             "sources": [src(root, "Ext secret")]},
        ],
        "redirected": [
            {"url": u["perm"], "status": 308, "error": None,
             "target": u["perm"].replace("/old", "/new"), "sources": [src(root, "Moved")]},
            {"url": w + "/old", "status": 301, "error": None, "target": a,
             "sources": [src(root, "Old")]},
        ],
    }  # fmt: skip
    # external links: HEAD only when it answers 2xx; never parsed for links, never recursed
    # into; a page linked with a #fragment is read once with GET for its ids (issue 10)
    assert requests_of(site, EXT, "/ok") == ["GET"]
    assert requests_of(site, EXT, "/should-not-fetch") == []
    assert requests_of(site, EXT, "/secret") == ["HEAD", "GET"]  # HEAD >= 400: confirmed
    assert requests_of(site, "nohead.example.test", "/doc") == ["HEAD", "GET"]
    # 429 + Retry-After: 1 on HEAD, the retry (a GET) waits for it
    rl = [h for h in site.hits if h.host == "rl.example.test" and h.path_qs == "/p"]
    assert [h.method for h in rl] == ["HEAD", "GET"]
    assert rl[1].start - rl[0].end >= 0.95
    # internal pages are crawled with GET and parsed; robots.txt keeps /private/ out
    assert requests_of(site, W, "/a.html") == ["GET"]
    assert requests_of(site, W, "/private/x") == []
    # resources are checked (HEAD), not crawled
    assert requests_of(site, W, "/img/a.png") == ["HEAD"]
    # every host's robots.txt is asked once (the dead one cannot be)
    for host in (W, EXT, "nohead.example.test", "rl.example.test", "perm.example.test"):
        assert requests_of(site, host, "/robots.txt") == ["GET"], host
    assert "anchors.jsonl" in os.listdir(tmp_path / "check")
    # C07: other schemes are skipped, never requested, never joined onto a path
    for hit in site.hits:
        assert not any(
            s in hit.path_qs
            for s in ("mailto:", "tel:", "data:", "javascript:", "popup.html", "ftp:")
        ), hit.path_qs


async def test_check_links_text_report_and_formats(site: Site, tmp_path: Path) -> None:
    site.route(W, "/", links_page("/ok", "/gone", "mailto:x@example.test"))
    site.route(W, "/ok", html("ok"))
    root = site.url(W, "/")
    code, out, err = await run_cli(site.port, site.hosts(), root)
    assert code == 1, err
    assert out == (
        "Broken links: 1\n"
        f"  {site.url(W, '/gone')}\n"
        "    HTTP 404\n"
        f'    on {root} "link 1"\n'
        "\n"
        "3 checked: 2 ok, 1 broken, 0 unverified, 0 redirected; 1 excluded "
        "(skipped: unsupported scheme 1)\n"
    )
    for fmt, probe in [  # every format is tested in tests/unit/test_checklinks.py
        ("csv", "verdict,url,status,error,target,source,anchor,count\n"),
        ("junit", '<testsuite name="check-links" tests="1" failures="1"'),
    ]:
        report = tmp_path / f"report.{fmt}"
        code, out, err = await run_cli(
            site.port, site.hosts(), root, "--format", fmt, "--output", str(report)
        )
        assert code == 1 and out == "", (fmt, err)
        assert probe in report.read_text(encoding="utf-8"), fmt
    # nothing broken: exit 0
    site.route(W, "/", links_page("/ok"))
    code, out, err = await run_cli(site.port, site.hosts(), root, "--quiet")
    assert code == 0, err
    assert out.endswith("2 checked: 2 ok, 0 broken, 0 unverified, 0 redirected; 0 excluded\n")


def test_check_links_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def run(*args: str) -> tuple[int, str]:
        try:
            code = main(["check-links", "--resolve-only", *args])
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
        return code, capsys.readouterr().err

    code, err = run("--resume")
    assert code == 2 and "--resume needs --out" in err
    code, err = run()
    assert code == 2 and "no URLs" in err
    code, err = run("http://a.test/", "--format", "yaml")
    assert code == 2 and "invalid choice" in err
    code, err = run("http://a.test/", "--accept", "4x9")
    assert code == 2 and "not an HTTP status" in err
    code, err = run("http://a.test/", "--ignore", "(")
    assert code == 2 and "bad regular expression" in err
    (tmp_path / "crawl").mkdir()
    (tmp_path / "crawl" / "x").write_text("x")
    code, err = run("http://a.test/", "--out", str(tmp_path / "crawl"))
    assert code == 2 and "not empty" in err
    code, err = run("--resume", "--out", str(tmp_path / "nothing"))
    assert code == 2 and "state.json missing" in err


async def test_check_links_accept_ignore_and_no_fragments(site: Site, tmp_path: Path) -> None:
    site.route(W, "/", links_page("/busy", "/gone", "/skip/me", "/p#nosuch"))
    site.route(W, "/busy", html("busy", status=429))
    site.route(W, "/p", html("<p id=x>p</p>"))
    root = site.url(W, "/")
    code, out, err = await run_cli(
        site.port,
        site.hosts(),
        root,
        "--accept",
        "429,404",
        "--ignore",
        "/skip/",
        "--no-check-fragments",
        "--retries",
        "0",
        "--format",
        "json",
    )
    assert code == 0, err
    assert json.loads(out)["summary"] == {
        "checked": 4,
        "ok": 4,
        "broken": 0,
        "unverified": 0,
        "redirected": 0,
        "excluded": 1,
    }
    assert requests_of(site, W, "/skip/me") == []


async def test_check_links_dead_hosts_fail_all_their_links_at_once(
    site: Site, tmp_path: Path
) -> None:
    # a name that resolves to a port nobody listens on: connection refused
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    refused = [f"http://refused.example.test:{closed_port}/{i}" for i in range(4)]
    dead = [f"http://dead.example.test:{site.port}/{i}" for i in range(4)]
    site.route(W, "/", links_page(*refused, *dead))
    start = time.monotonic()
    code, out, err = await run_cli(
        site.port,
        site.hosts(),
        site.url(W, "/"),
        "--resolve",
        f"refused.example.test:{closed_port}:127.0.0.1",
        "--format",
        "json",
    )
    assert code == 1, err
    broken = json.loads(out)["broken"]
    assert [(e["url"], e["status"], e["error"]) for e in broken] == [
        *((u, None, "dns") for u in dead),
        *((u, None, "connect") for u in refused),
    ]
    assert time.monotonic() - start < 10  # no per-link retries with backoff


async def test_check_links_without_robots_remembers_a_dead_host(site: Site, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    refused = [f"http://refused.example.test:{closed_port}/{i}" for i in range(5)]
    site.route(W, "/", links_page(*refused))
    start = time.monotonic()
    code, out, err = await run_cli(
        site.port,
        site.hosts(),
        site.url(W, "/"),
        "--resolve",
        f"refused.example.test:{closed_port}:127.0.0.1",
        "--ignore-robots",
        "--retries",
        "1",
        "--format",
        "json",
        "--out",
        str(tmp_path / "c"),
    )
    assert code == 1, err
    assert {e["error"] for e in json.loads(out)["broken"]} == {"connect"}
    records = [json.loads(x) for x in (tmp_path / "c" / "pages.jsonl").read_text().splitlines()]
    attempts = sorted(r["attempts"] for r in records if "refused" in r["url"])
    assert attempts == [1, 1, 1, 1, 2]  # only the first link tried (and retried) at all
    assert time.monotonic() - start < 10


async def test_check_links_cache_and_rerun_in_the_same_folder(site: Site, tmp_path: Path) -> None:
    e_ok, e_gone = f"http://{EXT}:{site.port}/ok", f"http://{EXT}:{site.port}/gone"
    e_busy = f"http://{EXT}:{site.port}/busy"
    site.route(W, "/", links_page("/in", e_ok, e_gone, e_busy))
    site.route(W, "/in", html("in"))
    site.route(EXT, "/ok", html("ok"))
    site.route(EXT, "/busy", html("busy", status=403))
    out_dir = tmp_path / "check"
    args = (site.url(W, "/"), "--format", "json", "--out", str(out_dir))
    code, first, err = await run_cli(site.port, site.hosts(), *args)
    assert code == 1, err
    hits = len(site.hits)
    code, second, err = await run_cli(site.port, site.hosts(), *args)
    assert code == 1, err
    assert json.loads(second) == json.loads(first)
    new = [(h.host, h.path_qs) for h in site.hits[hits:]]
    # internal pages are crawled again; external verdicts ok/404 come from the cache,
    # the unverified one (403) is checked again
    assert (W, "/in") in new and (EXT, "/busy") in new
    assert (EXT, "/ok") not in new and (EXT, "/gone") not in new
    hits = len(site.hits)
    code, third, err = await run_cli(site.port, site.hosts(), *args, "--cache-age", "0")
    assert code == 1 and json.loads(third) == json.loads(first), err
    assert (EXT, "/ok") in [(h.host, h.path_qs) for h in site.hits[hits:]]


async def test_check_links_refuses_a_crawl_folder(site: Site, tmp_path: Path) -> None:
    site.route(W, "/", links_page("/a"))
    crawl_dir = tmp_path / "crawl"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", site.url(W, "/"), "--out", str(crawl_dir),
        "--resolve", f"{W}:{site.port}:127.0.0.1", "--resolve-only", "--quiet", "--delay", "0",
        cwd=REPO,
    )  # fmt: skip
    assert await proc.wait() == 0
    code, _, err = await run_cli(site.port, [W], site.url(W, "/"), "--out", str(crawl_dir))
    assert code == 2 and "holds a crawl, not a link check" in err
    code, _, err = await run_cli(site.port, [W], "--resume", "--out", str(crawl_dir))
    assert code == 2 and "holds a crawl, not a link check" in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
async def test_check_links_resume_after_interrupt(
    site: Site, tmp_path: Path, sig: signal.Signals
) -> None:
    pages = [f"/p{i}" for i in range(8)]
    ext = f"http://{EXT}:{site.port}/page"
    site.route(W, "/", links_page(ext, *pages, "/gone"))

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.1)
        return web.Response(text="<p>slow</p>", content_type="text/html")

    async def slow_robots(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.5)
        return web.Response(status=404)

    for path in pages:
        site.route(W, path, slow)
    # an external page checked after the interruption: still check-only after the resume
    site.route(EXT, "/robots.txt", slow_robots)
    site.route(EXT, "/page", links_page("/should-not-fetch"))
    out_dir = tmp_path / "check"
    cmd = [
        sys.executable, "-m", "skitter", "check-links", site.url(W, "/"), "--out", str(out_dir),
        "--resolve", f"{W}:{site.port}:127.0.0.1", "--resolve", f"{EXT}:{site.port}:127.0.0.1",
        "--resolve-only", "--delay", "0", "--format", "json",
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    records = out_dir / "pages.jsonl"
    while not (records.exists() and records.read_bytes().count(b"\n") >= 2):
        await asyncio.sleep(0.01)
    proc.send_signal(sig)
    _, err = await proc.communicate()
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        assert b"resume with: skitter check-links --resume --out" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    assert records.read_bytes().count(b"\n") < 11
    code, out, err2 = await run_cli(
        site.port, [W, EXT], "--resume", "--out", str(out_dir), "--format", "json"
    )
    assert code == 1, err2
    report = json.loads(out)
    assert report["summary"]["checked"] == 11 and report["summary"]["broken"] == 1
    assert [e["url"] for e in report["broken"]] == [site.url(W, "/gone")]
    fetched = [h.path_qs for h in site.hits if h.host == W and h.path_qs in pages]
    assert len(fetched) <= len(pages) + 2  # at most the requests in flight are repeated
    assert set(requests_of(site, EXT, "/page")) == {"HEAD"}
    assert requests_of(site, EXT, "/should-not-fetch") == []


# ---------------------------------------------------------------------------- cases.md


async def _by_method_raw(
    req: RawRequest, conn: RawConnection, head_status: int, get_status: int
) -> None:
    status = head_status if req.method == "HEAD" else get_status
    extra = [("Allow", "GET")] if status == 405 else []
    body = b"" if req.method == "HEAD" else b"<p>x</p>"
    await conn.write(response(status, [("Content-Type", "text/html"), *extra], body))


def raw_by_method(head_status: int, get_status: int) -> Any:
    async def handler(req: RawRequest, conn: RawConnection) -> None:
        await _by_method_raw(req, conn, head_status, get_status)

    return handler


def big_body(sent: list[int]) -> Any:
    """HEAD 405; GET 200 with a 50 MiB body streamed 1 MiB at a time (counted in ``sent``)."""

    async def handler(req: RawRequest, conn: RawConnection) -> None:
        if req.method == "HEAD":
            await conn.write(response(405, [("Allow", "GET")]))
            return
        await conn.write(head(200, [("Content-Type", "text/html"), ("Content-Length", "52428800")]))
        chunk = b"x" * MIB
        try:
            for _ in range(50):
                if conn.peer_closed():
                    return
                await conn.write(chunk)
                sent[0] += 1
        except (ConnectionError, OSError):
            return

    return handler


async def test_c20_head_refused_falls_back_to_get(raw: RawServer, tmp_path: Path) -> None:
    lc, www = "lc.example.test", W
    paths = ["/doc", "/api", "/odd", "/gone", "/big"]
    links = "".join(f'<a href="{raw.url(p, lc)}">{p}</a>' for p in paths)
    raw.route("/", response(200, [("Content-Type", "text/html")], links.encode()), host=www)
    raw.route("/doc", raw_by_method(405, 200), host=lc)
    raw.route("/api", raw_by_method(501, 200), host=lc)
    raw.route("/odd", raw_by_method(400, 200), host=lc)
    raw.route("/gone", raw_by_method(404, 404), host=lc)
    sent = [0]
    raw.route("/big", big_body(sent), host=lc)
    code, out, err = await run_cli(raw.port, raw.hosts(), raw.url("/", www), "--format", "json")
    assert code == 1, err
    assert json.loads(out) == {
        "summary": {
            "checked": 6,
            "ok": 5,
            "broken": 1,
            "unverified": 0,
            "redirected": 0,
            "excluded": 0,
        },
        "broken": [
            {
                "url": raw.url("/gone", lc),
                "status": 404,
                "error": None,
                "sources": [{"url": raw.url("/", www), "anchor": "/gone", "count": 1}],
            }
        ],
        "unverified": [],
        "redirected": [],
    }
    assert [r.method for r in raw.requests("/doc", lc)] == ["HEAD", "GET"]
    # /big: refused from its Content-Length, read no further than ~1 MiB
    assert [r.method for r in raw.requests("/big", lc)][-1] == "GET"
    assert sent[0] <= 8  # socket buffers may take a few MiB before the abort is seen


async def test_c20_every_head_refusal_is_confirmed_with_get(raw: RawServer, tmp_path: Path) -> None:
    """One host per path, so that no host is switched to GET-only: each HEAD >= 400 is
    followed by a GET; a big body without Content-Length is cut at ~1 MiB (still ok)."""
    cases = {"doc": (405, 200), "api": (501, 200), "odd": (400, 200), "gone": (404, 404)}
    cases |= {"forbidden": (403, 200), "err": (500, 200)}
    urls = {name: raw.url("/x", f"{name}.example.test") for name in cases}
    for name, (hs, gs) in cases.items():
        raw.route("/x", raw_by_method(hs, gs), host=f"{name}.example.test")

    async def stream(req: RawRequest, conn: RawConnection) -> None:
        if req.method == "HEAD":
            await conn.write(response(404, []))
            return
        await conn.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n")
        try:
            for _ in range(50):
                if conn.peer_closed():
                    return
                await conn.write(b"x" * MIB)
        except (ConnectionError, OSError):
            return

    raw.route("/x", stream, host="stream.example.test")
    urls["stream"] = raw.url("/x", "stream.example.test")
    links = "".join(f'<a href="{u}">{n}</a>' for n, u in urls.items())
    raw.route("/", response(200, [("Content-Type", "text/html")], links.encode()), host=W)
    code, out, err = await run_cli(
        raw.port, raw.hosts(), raw.url("/", W), "--format", "json", "--retries", "0"
    )
    assert code == 1, err
    report = json.loads(out)
    assert [(e["url"], e["status"]) for e in report["broken"]] == [(urls["gone"], 404)]
    assert report["summary"]["ok"] == 7  # the page, doc, api, odd, forbidden, err, stream
    for name in cases:
        assert [r.method for r in raw.requests("/x", f"{name}.example.test")] == [
            "HEAD",
            "GET",
        ], name


def fixed(status: int, headers: list[tuple[str, str]], body: bytes) -> Any:
    """Always the same response; without the body for HEAD (RFC 9110 §9.3.2)."""

    async def handler(req: RawRequest, conn: RawConnection) -> None:
        data = response(status, headers, body)
        if req.method == "HEAD":
            data = data[: len(data) - len(body)]
        await conn.write(data)

    return handler


async def test_c27_blocked_is_not_dead(raw: RawServer, tmp_path: Path) -> None:
    html_ct = [("Content-Type", "text/html")]

    async def wall(req: RawRequest, conn: RawConnection) -> None:
        status = 200 if "Firefox/" in (req.header("user-agent") or "") else 403
        await fixed(status, html_ct, b"<p>wall</p>")(req, conn)

    async def login(req: RawRequest, conn: RawConnection) -> None:
        if not (req.header("user-agent") or "").strip():
            await fixed(500, html_ct, b"no UA")(req, conn)
            return
        await fixed(401, [("WWW-Authenticate", 'Basic realm="x"'), *html_ct], b"")(req, conn)

    t = {
        "wall": raw.url("/a", "wall.example.test"),
        "social": raw.url("/in/x", "social.example.test"),
        "login": raw.url("/admin", "login.example.test"),
        "busy": raw.url("/p", "busy.example.test"),
        "old": raw.url("/old", "gone.example.test"),
        "removed": raw.url("/removed", "gone.example.test"),
        "nowhere": "http://nowhere.invalid/",
    }
    links = "".join(f'<a href="{u}">{k}</a>' for k, u in t.items())
    raw.route("/", response(200, html_ct, links.encode()), host=W)
    raw.route("/a", wall, host="wall.example.test")
    raw.route("/in/x", fixed(999, html_ct, b"denied"), host="social.example.test")
    raw.route("/admin", login, host="login.example.test")
    raw.route("/p", fixed(429, html_ct, b"busy"), host="busy.example.test")
    raw.route("/old", fixed(404, html_ct, b"gone"), host="gone.example.test")
    raw.route("/removed", fixed(410, html_ct, b"gone"), host="gone.example.test")
    root = raw.url("/", W)
    code, out, err = await run_cli(
        raw.port, raw.hosts(), root, "--user-agent", CASE_UA, "--retries", "1"
    )
    assert code == 1, err
    assert out == (
        "Broken links: 3\n"
        f"  {t['old']}\n"
        "    HTTP 404\n"
        f'    on {root} "old"\n'
        f"  {t['removed']}\n"
        "    HTTP 410\n"
        f'    on {root} "removed"\n'
        "  http://nowhere.invalid/\n"
        "    dns (dns: nowhere.invalid:80 is not in the resolve map (resolve_only) "
        "(robots.txt and page not fetched))\n"
        f'    on {root} "nowhere"\n'
        "\n"
        "Unverified links (could not be checked; not proof that they are gone): 4\n"
        f"  {t['busy']}\n"
        "    HTTP 429\n"
        f'    on {root} "busy"\n'
        f"  {t['login']}\n"
        "    HTTP 401\n"
        f'    on {root} "login"\n'
        f"  {t['social']}\n"
        "    HTTP 999\n"
        f'    on {root} "social"\n'
        f"  {t['wall']}\n"
        "    HTTP 403\n"
        f'    on {root} "wall"\n'
        "\n"
        "8 checked: 1 ok, 3 broken, 4 unverified, 0 redirected; 0 excluded\n"
    )
    # a non-empty User-Agent on every request (login answered 401, not 500)
    assert all(r.header("user-agent") == CASE_UA for r in raw.log)
    # each warning URL requested at most twice (HEAD, then GET; 429: the GET is the retry)
    for key, host in [
        ("wall", "wall.example.test"),
        ("social", "social.example.test"),
        ("login", "login.example.test"),
        ("busy", "busy.example.test"),
    ]:
        path = t[key].split(str(raw.port), 1)[1]
        assert [r.method for r in raw.requests(path, host)] == ["HEAD", "GET"], key
