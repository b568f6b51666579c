"""kill -9 at random moments, then --resume: the same page set as an uninterrupted crawl."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web

from tests.integration.site import Site, html

H = "big.example.test"
N_PAGES = 400


def build_site(site: Site) -> None:
    rng = random.Random(42)

    async def slowish(request: web.Request, body: str) -> web.StreamResponse:
        await asyncio.sleep(0.004)
        return web.Response(text=body, content_type="text/html")

    for i in range(N_PAGES):
        targets = [rng.randrange(N_PAGES) for _ in range(8)] + [i + 1]
        hrefs = "".join(f'<a href="/p/{t}.html">p{t}</a>' for t in targets)
        hrefs += f'<a href="/missing/{i}.html">gone</a>' if i % 50 == 0 else ""
        body = f"<!doctype html><title>p{i}</title>{hrefs}"

        async def h(request: web.Request, body: str = body) -> web.StreamResponse:
            return await slowish(request, body)

        site.route(H, f"/p/{i}.html", h)
    site.route(H, "/", html('<a href="/p/0.html">start</a>'))


def records(out: Path) -> list[dict[str, object]]:
    lines = (out / "pages.jsonl").read_bytes().split(b"\n")
    return [json.loads(x) for x in lines if x.strip()]


async def start_crawl(site: Site, out: Path, resume: bool) -> asyncio.subprocess.Process:
    args = [
        "crawl",
        "--out",
        str(out),
        "--resolve",
        f"{H}:{site.port}:127.0.0.1",
        "--resolve-only",
        "--delay",
        "0",
        "--host-concurrency",
        "4",
        "--quiet",
    ]
    args += ["--resume"] if resume else [site.url(H, "/")]
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "skitter",
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def wait_records(out: Path, n: int, proc: asyncio.subprocess.Process) -> None:
    for _ in range(6000):  # bounded: 60 s
        p = out / "pages.jsonl"
        if p.exists() and p.read_bytes().count(b"\n") >= n:
            return
        if proc.returncode is not None:
            return
        await asyncio.sleep(0.01)


@pytest.mark.slow
async def test_kill_9_three_times_then_resume_same_pages(site: Site, tmp_path: Path) -> None:
    build_site(site)
    ref = tmp_path / "ref"
    proc = await start_crawl(site, ref, resume=False)
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    expected = {r["url"] for r in records(ref)}
    assert len(expected) > N_PAGES // 2

    site.hits.clear()
    out = tmp_path / "out"
    rng = random.Random(os.getpid())
    kill_times: list[tuple[float, set[object]]] = []
    resume = False
    for k in range(3):
        proc = await start_crawl(site, out, resume=resume)
        target = rng.randrange(20, 120) + k * 100
        await wait_records(out, target, proc)
        await asyncio.sleep(rng.random() * 0.05)
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await proc.wait()
        kill_times.append((time.monotonic(), {r["url"] for r in records(out)}))
        resume = True
    proc = await start_crawl(site, out, resume=True)
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    recs = records(out)
    urls = [r["url"] for r in recs]
    assert len(urls) == len(set(urls)), "a URL was recorded twice"
    assert set(urls) == expected
    # nothing recorded before a kill was fetched again afterwards
    for t_kill, done in kill_times:
        later = {site.url(H, h.path_qs) for h in site.hits if h.start > t_kill}
        assert not (later & done)

    # links.tsv has exactly one block of rows per fetched HTML page
    # (the decision column may differ: which page first queues a URL depends on timing)
    def graph(d: Path) -> list[str]:
        return sorted(r.rsplit("\t", 1)[0] for r in (d / "links.tsv").read_text().splitlines()[1:])

    assert graph(out) == graph(ref)
    report = json.loads((out / "report.json").read_text())
    assert report["finished"] is True
    assert report["totals"]["records"] == len(expected)
    import subprocess

    for w in out.glob("*.warc.gz"):
        subprocess.run([str(Path(sys.executable).parent / "warcio"), "check", str(w)], check=True)
