"""report.json ``robots`` counts after kill -9 and --resume: the records written past the last
checkpoint keep their robots.txt verdicts (one per URL, as an uninterrupted crawl counts)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.conftest import REPO
from tests.integration.site import Site, html, links_page, text

A = "robots-resume.example.test"
PAGES = 12
HOLD = 8  # /p0../p7 wait for the first checkpoint, /p8.. for the kill: records past it


def _cli(site: Site, out: Path, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "skitter", "crawl", "--out", str(out),
        "--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve-only", "--quiet",
        "--delay", "0", *args,
    ]  # fmt: skip


@pytest.mark.slow
async def test_kill_9_then_resume_keeps_robots_counts(site: Site, tmp_path: Path) -> None:
    first, gate = asyncio.Event(), asyncio.Event()

    def held(i: int) -> Any:
        page = html(f"<p>{i}</p>")

        async def h(request: web.Request) -> web.StreamResponse:
            await (gate if i >= HOLD else first).wait()
            return await page(request)

        return h

    site.route(A, "/robots.txt", text("User-agent: *\nDisallow: /private\n"))
    links = [f"/p{i}" for i in range(PAGES)] + ["/private/a", "/private/b"]
    site.route(A, "/", links_page(*links))
    for i in range(PAGES):
        site.route(A, f"/p{i}", held(i))
    out = tmp_path / "out"
    proc = await asyncio.create_subprocess_exec(*_cli(site, out, site.url(A, "/")), cwd=REPO)
    for _ in range(3000):  # bounded: 30 s
        if list(out.glob("**/checkpoint.json")):
            break
        await asyncio.sleep(0.01)
    first.set()  # the next checkpoint is CHECKPOINT_EVERY_S (2 s) away
    pages = out / "pages.jsonl"
    for _ in range(3000):  # bounded: 30 s
        if pages.exists() and pages.read_bytes().count(b"\n") >= HOLD:
            break
        await asyncio.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    gate.set()
    assert await proc.wait() == -signal.SIGKILL
    proc = await asyncio.create_subprocess_exec(*_cli(site, out, "--resume"), cwd=REPO)
    assert await proc.wait() == 0
    urls = [json.loads(line)["url"] for line in pages.read_text().splitlines()]
    assert len(urls) == len(set(urls)) == PAGES + 1
    report = json.loads((out / "report.json").read_text())
    robots = report["robots"][f"http://{A}:{site.port}"]
    assert (robots["allowed"], robots["disallowed"]) == (PAGES + 1, 2)
    assert report["totals"]["robots_disallowed"] == 2
