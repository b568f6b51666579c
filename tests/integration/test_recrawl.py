"""Recrawl with validators (C37): --since PREV, conditional GETs, 304 revisits."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.conftest import REPO
from tests.integration.site import Site, crawl, html
from tests.warc_check import warc_records

RC = "rc.example.test"
LM = "Wed, 21 Oct 2025 07:28:00 GMT"


def c37_site(site: Site, run: list[int]) -> None:
    """C37's table; ``run[0]`` is 1 or 2."""

    def page(path: str, body: str, headers: dict[str, str], second: Any = None) -> None:
        async def h(request: web.Request) -> web.StreamResponse:
            if run[0] == 2 and second is not None:
                got = await second(request)
                if got is not None:
                    return got
            return web.Response(
                text=f"<html><body>{body}</body></html>", content_type="text/html", headers=headers
            )

        site.route(RC, path, h)

    def not_modified_if(name: str, test: Any) -> Any:
        async def second(request: web.Request) -> web.StreamResponse | None:
            if test(request.headers.get(name)):
                return web.Response(status=304)
            return None

        return second

    links = "".join(f'<a href="/u{i}">u{i}</a>' for i in range(1, 8))
    page("/", links, {"ETag": '"i1"'}, not_modified_if("If-None-Match", lambda v: v == '"i1"'))
    page(
        "/u1",
        "one",
        {"ETag": '"v1"', "Last-Modified": LM},
        not_modified_if("If-None-Match", lambda v: v == '"v1"'),
    )
    page(
        "/u2", "two", {"Last-Modified": LM}, not_modified_if("If-Modified-Since", lambda v: v == LM)
    )
    page(
        "/u3",
        "three",
        {"ETag": 'W/"abc"'},
        not_modified_if("If-None-Match", lambda v: v is not None and 'W/"abc"' in v),
    )

    async def u4(request: web.Request) -> web.StreamResponse:
        return web.Response(
            text='<html><body>four, new <a href="/new">new</a></body></html>',
            content_type="text/html",
            headers={"ETag": '"v2"'},
        )

    page("/u4", "four", {"ETag": '"v1"'}, u4)

    async def gone(request: web.Request) -> web.StreamResponse:
        return web.Response(status=410, text="gone")

    page("/u5", "five", {"ETag": '"v1"'}, gone)
    page("/u6", "six", {})
    page("/u7", "seven", {"ETag": '"s"'})
    page("/new", "new page", {})


async def test_c37_recrawl_with_validators(site: Site, tmp_path: Path) -> None:
    run = [1]
    c37_site(site, run)
    run1 = await crawl(site, tmp_path / "run1", [site.url(RC, "/")])
    assert len(run1.records) == 8
    run[0] = 2
    site.hits.clear()
    run2 = await crawl(
        site, tmp_path / "run2", [site.url(RC, "/")], quality_since_dir=str(tmp_path / "run1")
    )
    sent = {h.path_qs: h.headers for h in site.hits if h.path_qs != "/robots.txt"}
    for path, etag in (("/", '"i1"'), ("/u1", '"v1"'), ("/u3", 'W/"abc"'), ("/u4", '"v1"'),
                       ("/u5", '"v1"'), ("/u7", '"s"')):  # fmt: skip
        assert sent[path].get("If-None-Match") == etag, path
    assert sent["/u2"].get("If-Modified-Since") == LM
    assert "If-None-Match" not in sent["/u2"]
    assert "If-None-Match" not in sent["/u6"] and "If-Modified-Since" not in sent["/u6"]
    assert sorted(sent) == ["/", "/new", *[f"/u{i}" for i in range(1, 8)]]
    recs = {r["url"]: r for r in run2.records}
    for p in ("/", "/u1", "/u2", "/u3"):
        r = recs[site.url(RC, p)]
        assert (r["status"], r["error"], r["error_detail"]) == (304, None, None), p
    assert recs[site.url(RC, "/u5")]["status"] == 410
    # an unchanged page's links are the same rows as in run 1
    for p in ("/", "/u1", "/u2", "/u3"):
        src = site.url(RC, p)
        old = [(r["target"], r["kind"]) for r in run1.links if r["source"] == src]
        new = [(r["target"], r["kind"]) for r in run2.links if r["source"] == src]
        assert old == new, p
    rc = run2.report["recrawl"]
    assert (rc["unchanged"], rc["changed"], rc["gone"], rc["new"]) == (6, 1, 1, 1)
    assert rc["bytes_saved"] > 0
    recs_w = warc_records(run2.out)
    old_w = {h["WARC-Target-URI"]: h for t, h in warc_records(run1.out) if t == "response"}
    revisits = {h["WARC-Target-URI"]: h for t, h in recs_w if t == "revisit"}
    assert sorted(revisits) == sorted(site.url(RC, p) for p in ("/", "/u1", "/u2", "/u3"))
    for uri, h in revisits.items():
        assert h["WARC-Profile"].endswith("/server-not-modified")
        assert h["WARC-Refers-To-Target-URI"] == uri
        assert h["WARC-Refers-To-Date"] == old_w[uri]["WARC-Date"]
        assert h["WARC-Refers-To"] == old_w[uri]["WARC-Record-ID"]


async def test_since_folder_moved_report_names_the_folder_given(site: Site, tmp_path: Path) -> None:
    # a previous crawl copied elsewhere: report.json recrawl.since is the --since folder,
    # not the path stored in its state.json (where it was first written)
    site.route(RC, "/", html("<p>one</p>", headers={"ETag": '"e"'}))
    await crawl(site, tmp_path / "run1", [site.url(RC, "/")])
    moved = tmp_path / "moved"
    shutil.move(tmp_path / "run1", moved)
    run2 = await crawl(site, tmp_path / "run2", [site.url(RC, "/")], quality_since_dir=str(moved))
    assert run2.report["recrawl"]["since"] == str(moved)
    assert run2.report["recrawl"]["changed"] + run2.report["recrawl"]["unchanged"] == 1


async def test_since_bad_folder_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "prev"
    bad.mkdir()
    code, err = await _cli("--since", str(bad), "--out", str(tmp_path / "new0"))
    assert (
        code == 2
        and err.strip() == f"skitter: error: --since {bad}: no crawl there (state.json missing)"
    )
    (bad / "state.json").write_text('{"format": 999}')
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", "--since", str(bad), "--out",
        str(tmp_path / "new"), cwd=REPO, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "format" in lines[0], lines
    (bad / "state.json").write_text("{not json")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", "--since", str(bad), "--out",
        str(tmp_path / "new2"), cwd=REPO, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode == 2 and len(err.decode().strip().splitlines()) == 1
    assert not (tmp_path / "new").exists() and not (tmp_path / "new2").exists()


async def test_since_out_inside_previous_is_refused(site: Site, tmp_path: Path) -> None:
    # PREV is only read: a NEW folder inside it is refused (one line, exit 2), nothing made
    site.route(RC, "/", html("<p>one</p>"))
    await crawl(site, tmp_path / "run1", [site.url(RC, "/")])
    before = sorted(p.name for p in (tmp_path / "run1").iterdir())
    code, err = await _cli("--since", str(tmp_path / "run1"), "--out", str(tmp_path / "run1/new"))
    assert code == 2 and err.strip().splitlines() == [
        f"skitter: error: --out {tmp_path}/run1/new is inside --since {tmp_path}/run1, "
        "which is only read"
    ]
    assert sorted(p.name for p in (tmp_path / "run1").iterdir()) == before


async def test_since_a_check_links_or_fetch_folder_is_refused(site: Site, tmp_path: Path) -> None:
    # their settings (link checking, no link extraction) would be inherited: not a recrawl
    site.route(RC, "/", html("<p>one</p>"))
    (tmp_path / "urls.txt").write_text(site.url(RC, "/") + "\n")
    resolve = ("--resolve", f"{RC}:{site.port}:127.0.0.1", "--resolve-only", "--quiet")
    for cmd, what in (
        (("check-links", site.url(RC, "/")), "check-links"),
        (("fetch", "--urls", str(tmp_path / "urls.txt")), "fetch"),
    ):
        prev = tmp_path / what
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skitter", *cmd, "--out", str(prev), *resolve, cwd=REPO
        )
        assert await asyncio.wait_for(proc.wait(), 60) == 0
        code, err = await _cli("--since", str(prev), "--out", str(tmp_path / f"new-{what}"))
        assert code == 2 and err.strip().splitlines() == [
            f"skitter: error: --since {prev}: written by skitter {what}, not by a crawl"
        ]
        assert not (tmp_path / f"new-{what}").exists()


async def test_since_a_levels_crawl_names_its_level_warc_records(
    site: Site, tmp_path: Path
) -> None:
    # a --levels crawl keeps its WARC files in levels/NNNN/: a 304 is a revisit naming them
    site.route(RC, "/", html('<a href="/a">a</a>', headers={"ETag": '"r"'}))
    site.route(RC, "/a", html("<p>a</p>", headers={"ETag": '"a"'}))

    async def cond(request: web.Request) -> web.StreamResponse:
        if request.headers.get("If-None-Match") == '"a"':
            return web.Response(status=304)
        return web.Response(text="<p>a</p>", content_type="text/html", headers={"ETag": '"a"'})

    prev, new = tmp_path / "prev", tmp_path / "new"
    resolve = ("--resolve", f"{RC}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0")
    code, err = await _cli("--levels", site.url(RC, "/"), "--out", str(prev), *resolve)
    assert code == 0, err
    site.route(RC, "/a", cond)
    code, err = await _cli("--since", str(prev), "--out", str(new), "--processes", "1")
    assert code == 0, err
    old = {
        h["WARC-Target-URI"]: h
        for w in sorted(prev.glob("levels/*"))
        for t, h in warc_records(w)
        if t == "response"
    }
    revisits = [h for t, h in warc_records(new) if t == "revisit"]
    assert [h["WARC-Target-URI"] for h in revisits] == [site.url(RC, "/a")]
    assert revisits[0]["WARC-Refers-To"] == old[site.url(RC, "/a")]["WARC-Record-ID"]


async def _cli(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", "--quiet", *args, cwd=REPO,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, err.decode()


@pytest.mark.slow
async def test_recrawl_killed_and_resumed_and_damaged_previous(site: Site, tmp_path: Path) -> None:
    run = [1]
    c37_site(site, run)
    await crawl(site, tmp_path / "run1", [site.url(RC, "/")])
    run[0] = 2
    # hold /u4 .. /u7 until the kill: the recrawl dies with pages done and pages in flight
    gate = asyncio.Event()
    for p in ("/u4", "/u5", "/u6", "/u7"):
        inner = site.routes[(RC, p)]

        async def held(request: web.Request, inner: Any = inner) -> web.StreamResponse:
            await asyncio.wait_for(gate.wait(), 60)
            return await inner(request)

        site.routes[(RC, p)] = held
    out = tmp_path / "run2"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", "--since", str(tmp_path / "run1"),
        "--out", str(out), "--quiet", "--processes", "1", "--host-concurrency", "2", cwd=REPO,
    )  # fmt: skip
    pages = out / "pages.jsonl"
    for _ in range(3000):  # bounded: 30 s
        if pages.exists() and pages.read_bytes().count(b"\n") >= 3:
            break
        await asyncio.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert await proc.wait() == -signal.SIGKILL
    gate.set()
    code, err = await _cli("--resume", "--out", str(out))
    assert code == 0, err
    recs = [json.loads(line) for line in pages.read_text().splitlines()]
    assert len(recs) == len({r["url"] for r in recs}) == 9
    report = json.loads((out / "report.json").read_text())["recrawl"]
    assert (report["unchanged"], report["changed"], report["gone"], report["new"]) == (6, 1, 1, 1)
    warc_records(out)  # warcio check
    # a damaged previous folder: one line, exit 2, nothing written
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "run1", broken)
    with open(broken / "pages.jsonl", "r+b") as f:
        f.seek(10)
        f.write(b"\x00garbage\n")
    code, err = await _cli("--since", str(broken), "--out", str(tmp_path / "run3"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "damaged" in err, err
    assert not (tmp_path / "run3").exists()
