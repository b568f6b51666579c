"""Ctrl-C / SIGTERM stop promptly (a fetch in flight is abandoned and fetched again on resume),
and a crawl folder in use is refused by every command that writes one (its pid named, nothing
changed). The server's /block handler waits on an event set only after the crawl has exited,
(its body trickles meanwhile), so a crawl that waited for its fetch in flight could not
exit: no timing is assumed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path

import pytest
from aiohttp import web

from tests.e2e.test_cli import arun_cli
from tests.integration.site import Site, html, links_page

A = "stop.example.test"


def _build(site: Site, hit: asyncio.Event, release: asyncio.Event) -> None:
    async def block(request: web.Request) -> web.StreamResponse:
        """A body that never ends until ``release``: a byte a second keeps the crawler's
        idle-read deadline (20 s) away, --timeout 600 its whole-fetch one."""
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        await resp.write(b"<p>")
        hit.set()
        while not release.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(release.wait(), 1.0)
            await resp.write(b" ")
        await resp.write(b"late</p>")
        await resp.write_eof()
        return resp

    site.route(A, "/", links_page("/a", "/b", "/block"))
    site.route(A, "/a", links_page("/c"))
    site.route(A, "/b", html("<p>b</p>"))
    site.route(A, "/c", html("<p>c</p>"))
    site.route(A, "/block", block)


def _flags(site: Site, processes: str) -> list[str]:
    return [
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0",
        "--host-concurrency", "4", "--timeout", "600", "--quiet", "--processes", processes,
    ]  # fmt: skip


def _records(out: Path) -> list[dict[str, object]]:
    data = (out / "pages.jsonl").read_bytes()
    assert data.endswith(b"\n") or not data
    return [json.loads(line) for line in data.splitlines()]


def _urls(out: Path) -> list[str]:
    return [str(r["url"]) for r in _records(out)]


def _link_rows(out: Path) -> list[list[str]]:
    data = (out / "links.tsv").read_text()
    assert data.endswith("\n")
    rows = [line.split("\t") for line in data.splitlines()[1:]]
    assert all(len(r) == 7 for r in rows), rows
    return rows


async def _refused(*args: str) -> str:
    rc, stdout, err = await arun_cli(*args)
    assert rc == 2, (args, stdout, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("processes", "sig"), [("1", signal.SIGINT), ("2", signal.SIGTERM), ("2", signal.SIGINT)]
)
async def test_signal_stops_at_once_and_the_folder_is_locked(
    site: Site, tmp_path: Path, processes: str, sig: signal.Signals
) -> None:
    hit, release = asyncio.Event(), asyncio.Event()
    _build(site, hit, release)
    out = tmp_path / "out"
    flags = _flags(site, processes)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", site.url(A, "/"), "--out", str(out), *flags,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await asyncio.wait_for(hit.wait(), 60)  # /block is in flight and stays so
        # bug 3: a second command on the running crawl's folder is refused, nothing changed
        state = (out / "state.json").read_bytes()
        lock = (out / "skitter.lock").read_bytes()
        size = (out / "pages.jsonl").stat().st_size if (out / "pages.jsonl").exists() else 0
        named = f"{out} is in use by a running skitter crawl (pid {proc.pid})"
        err = await _refused("crawl", "--resume", "--out", str(out), "--max-pages", "1", *flags)
        assert named in err, err
        err = await _refused("crawl", site.url(A, "/"), "--out", str(out), *flags)
        assert named in err, err
        assert named in await _refused("report", str(out))
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "pages.jsonl").write_text("")
        assert named in await _refused("merge", str(tmp_path / "other"), "--out", str(out))
        assert (out / "state.json").read_bytes() == state
        assert (out / "skitter.lock").read_bytes() == lock
        assert not (out / "report.html").exists() and not (out / "merged.json").exists()
        after = (out / "pages.jsonl").stat().st_size if (out / "pages.jsonl").exists() else 0
        assert after >= size
        # bug 2: the signal ends the crawl while /block is still held by the server
        proc.send_signal(sig)
        _, err_b = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert not release.is_set()
    err = err_b.decode()
    assert proc.returncode == 130, err
    assert f"resume with: skitter crawl --resume --out {out}" in err, err
    assert "Traceback" not in err, err
    base = site.url(A, "")
    # the pages fetched are recorded whole; the abandoned fetch is not
    assert f"{base}/block" not in _urls(out)
    assert f"{base}/" in _urls(out)
    assert [r for r in _link_rows(out) if r[1] == f"{base}/block"]
    report = json.loads((out / "report.json").read_text())
    assert report["stop_reason"] == "interrupted"
    # resume: /block is asked again (and answers now), every URL recorded once
    release.set()
    rc, _, err = await arun_cli("crawl", "--resume", "--out", str(out), *flags, timeout=120)
    assert rc == 0, err
    urls = _urls(out)
    assert sorted(urls) == sorted(f"{base}{p}" for p in ("/", "/a", "/b", "/c", "/block"))
    (late,) = [r for r in _records(out) if r["url"] == f"{base}/block"]
    assert late["status"] == 200
    assert [h.path_qs for h in site.hits].count("/block") == 2
    _link_rows(out)
