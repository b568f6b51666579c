"""End to end: `skitter crawl --status-port 0` against a loopback site whose pages are held
behind gates, so each check happens at a point where the crawl cannot move (no race):

1. only the seed is served: the live page (headless Chromium) shows 1 fetched and both hosts;
2. a.test's pages are released: the page changes to 3 fetched by itself (polling), /metrics
   (read with prometheus-client's parser) says 3 2xx and 3 URLs queued or in flight, and the
   host table sorts by host and by fetched both ways;
3. b.test is released: the crawl ends, metrics.prom equals pages.jsonl's counts, report.html
   is written; no browser request left loopback and no script error happened.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from tests.browser import Browser
from tests.integration.site import Handler, Site, links_page

pytestmark = pytest.mark.slow


def gated(gate: asyncio.Event, handler: Handler) -> Handler:
    async def h(request: web.Request) -> web.StreamResponse:
        await gate.wait()
        return await handler(request)

    return h


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


@pytest.fixture
async def gated_site() -> AsyncIterator[tuple[Site, asyncio.Event, asyncio.Event]]:
    s = Site()
    gate_a, gate_b = asyncio.Event(), asyncio.Event()
    await s.start()
    a, b = (lambda p: s.url("a.test", p)), (lambda p: s.url("b.test", p))
    s.route("a.test", "/", links_page(a("/1"), a("/2"), b("/1"), b("/2"), b("/missing")))
    for p in ("/1", "/2"):
        s.route("a.test", p, gated(gate_a, links_page(a("/"))))
        s.route("b.test", p, gated(gate_b, links_page(b("/"))))

    async def missing(request: web.Request) -> web.StreamResponse:
        await gate_b.wait()
        return web.Response(status=404, text="gone", content_type="text/html")

    s.route("b.test", "/missing", missing)
    try:
        yield s, gate_a, gate_b
    finally:
        gate_a.set()
        gate_b.set()
        await s.close()


async def test_live_page_metrics_and_end_files(
    gated_site: tuple[Site, asyncio.Event, asyncio.Event], tmp_path: Path
) -> None:
    site, gate_a, gate_b = gated_site
    out = tmp_path / "out"
    resolve = [f"--resolve={h}:{site.port}:127.0.0.1" for h in ("a.test", "b.test")]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", site.url("a.test", "/"), "--out", str(out),
        "--status-port", "0", *resolve, "--resolve-only", "--delay", "0", "--retries", "0",
        "--processes", "1", "--scope", "any",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None and proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        assert line.startswith("status: http://127.0.0.1:"), line
        url = line.split(" ", 1)[1].strip()
        assert (out / "status.url").read_text() == url + "\n"
        async with Browser() as b, aiohttp.ClientSession() as http:
            await b.goto(url)
            # 1. the seed alone
            await b.wait_for("document.getElementById('t-fetched').textContent === '1'")
            await b.wait_for("document.querySelectorAll('#hosts-body tr').length === 2")
            rows = await b.eval(
                "[...document.querySelectorAll('#hosts-body tr')].map(r => r.dataset.host)"
            )
            assert rows == [f"a.test:{site.port}", f"b.test:{site.port}"]  # fetched desc
            polls = await b.eval("Number(document.body.dataset.polls)")
            # 2. a.test's two pages: the page changes by itself
            gate_a.set()
            await b.wait_for("document.getElementById('t-fetched').textContent === '3'")
            assert await b.eval("Number(document.body.dataset.polls)") > polls
            assert await b.eval("document.getElementById('state').textContent") == "running"
            async with http.get(url + "metrics") as r:
                m = samples(await r.text())
            assert m[("skitter_fetches_total", (("status_class", "2xx"),))] == 3
            assert m[("skitter_queued_urls", ())] + m[("skitter_leased_requests", ())] == 3
            assert m[("skitter_link_decisions_total", (("decision", "queued"),))] == 5
            assert m[("skitter_fetch_duration_seconds_count", ())] == 3
            async with http.get(url + "api/hosts", params={"sort": "host", "order": "asc"}) as r:
                hosts = {h["host"]: h for h in (await r.json())["rows"]}
            bh = hosts[f"b.test:{site.port}"]
            assert (bh["queued"], bh["fetched"]) == (3, 0)
            assert hosts[f"a.test:{site.port}"]["fetched"] == 3
            # sorting by clicking the headers
            order = "[...document.querySelectorAll('#hosts-body tr')].map(r => r.dataset.host)"
            for column, want_sort, want_first in (
                ("host", "host:asc", "a.test"),
                ("host", "host:desc", "b.test"),
                ("fetched", "fetched:desc", "a.test"),
                ("fetched", "fetched:asc", "b.test"),
            ):
                await b.eval(f"document.querySelector('th[data-sort={column}]').click()")
                await b.wait_for(f"document.body.dataset.hostsSort === '{want_sort}'")
                assert (await b.eval(order))[0] == f"{want_first}:{site.port}", want_sort
            # 3. the rest: the crawl ends
            gate_b.set()
            code = await asyncio.wait_for(proc.wait(), 60)
            assert b.exceptions == []
            assert b.outside_requests() == []
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 0, (await proc.stderr.read()).decode()
    rows = [json.loads(x) for x in (out / "pages.jsonl").read_text().splitlines()]
    by_class = Counter(f"{r['status'] // 100}xx" for r in rows if r["status"] is not None)
    assert by_class == {"2xx": 5, "4xx": 2}  # b.test/missing and b.test/ (linked, unrouted)
    m = samples((out / "metrics.prom").read_text())
    prom = {k[1][0][1]: v for k, v in m.items() if k[0] == "skitter_fetches_total"}
    assert prom == by_class
    assert m[("skitter_bytes_total", ())] == sum(r["bytes"] for r in rows)
    assert m[("skitter_fetch_duration_seconds_count", ())] == len(rows)
    assert m[("skitter_queued_urls", ())] == 0
    assert (out / "report.html").read_text().count('class="chart"') == 7


async def start_cli(site: Site, out: Path, *args: str) -> tuple[asyncio.subprocess.Process, str]:
    resolve = [f"--resolve={h}:{site.port}:127.0.0.1" for h in ("a.test", "b.test")]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", *args, "--out", str(out), "--status-port", "0",
        *resolve, "--resolve-only", "--delay", "0", "--retries", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
    assert line.startswith("status: http://127.0.0.1:"), line
    return proc, line.split(" ", 1)[1].strip()


async def wait_status(http: aiohttp.ClientSession, url: str, fetched: int) -> dict[str, object]:
    """/api/status once it counts ``fetched`` records (bounded: 600 polls, 0.05 s apart)."""
    for _ in range(600):
        async with http.get(url + "api/status") as r:
            body: dict[str, object] = await r.json()
        if body["totals"]["fetched"] == fetched:  # type: ignore[index]
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"never {fetched} fetched: {body}")


async def test_check_links_status_has_a_known_end(
    gated_site: tuple[Site, asyncio.Event, asyncio.Event], tmp_path: Path
) -> None:
    site, gate_a, gate_b = gated_site
    out = tmp_path / "check"
    proc, url = await start_cli(site, out, "check-links", site.url("a.test", "/"))
    try:
        async with aiohttp.ClientSession() as http:
            body = await wait_status(http, url, 1)  # the start page; its 5 links are held
            totals = body["totals"]
            assert totals["target"] == 6 and totals["state"] == "running"  # type: ignore[index]
        gate_a.set()
        gate_b.set()
        assert await asyncio.wait_for(proc.wait(), 60) == 1  # b.test/missing is broken
        assert proc.stderr is not None
        rest = await proc.stderr.read()  # stderr is a pipe: no display, the summary only
        assert b"slowest" not in rest and b"\x1b[" not in rest, rest
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert (out / "status.url").read_text() == url + "\n"
    m = samples((out / "metrics.prom").read_text())
    assert m[("skitter_fetches_total", (("status_class", "4xx"),))] == 1
    assert (out / "report.html").is_file()


async def test_processes_status_covers_every_process(
    gated_site: tuple[Site, asyncio.Event, asyncio.Event], tmp_path: Path
) -> None:
    site, gate_a, gate_b = gated_site
    out = tmp_path / "out"
    proc, url = await start_cli(
        site, out, "crawl", site.url("a.test", "/"), site.url("b.test", "/1"),
        "--processes", "2", "--scope", "any",
    )  # fmt: skip
    try:
        async with aiohttp.ClientSession() as http:
            gate_a.set()  # a.test's 3 pages; b.test (the other process, or not) held
            body = await wait_status(http, url, 3)
            assert body["totals"]["by_status_class"] == {"2xx": 3}  # type: ignore[index]
            async with http.get(url + "api/hosts", params={"sort": "host", "order": "asc"}) as r:
                rows = (await r.json())["rows"]
            a_row = next(h for h in rows if h["host"] == f"a.test:{site.port}")
            assert (a_row["robots"], a_row["delay_cause"]) == ("ok", "delay")  # its journal
            fetched = {h["host"]: h["fetched"] for h in rows}  # b.test: listed once its
            assert fetched.pop(f"a.test:{site.port}") == 3  # robots.txt is read (journal)
            assert set(fetched.values()) <= {0}
            gate_b.set()
            assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    rows = [json.loads(x) for x in (out / "pages.jsonl").read_text().splitlines()]
    m = samples((out / "metrics.prom").read_text())
    assert m[("skitter_fetches_total", (("status_class", "2xx"),))] == sum(
        1 for r in rows if r["status"] == 200
    )
