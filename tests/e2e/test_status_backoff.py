"""End to end: under ``--processes 2`` the status page shows a host's backoff.

A host answers 503 with ``Retry-After: 50``; with ``--retries 1`` its crawler process waits
50 s before trying again. While it waits (the crawl cannot move on that host), the
coordinator's ``/api/hosts`` shows the host's delay cause ``backoff`` and its end time, read
from the process's host journal (skitter.status.host_journal), and ``/api/status`` and the
``skitter_hosts_in_backoff`` gauge (prometheus-client's parser) say 1. The crawl is then
interrupted (SIGINT: exit 130).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.e2e.test_status_live import samples
from tests.integration.site import Site, links_page

pytestmark = pytest.mark.slow


async def test_processes_status_shows_a_backoff(site: Site, tmp_path: Path) -> None:
    async def busy(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503, text="busy", headers={"Retry-After": "50"})

    site.route("a.test", "/busy", busy)
    site.route("b.test", "/", links_page())
    out = tmp_path / "out"
    resolve = [f"--resolve={h}:{site.port}:127.0.0.1" for h in ("a.test", "b.test")]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", site.url("a.test", "/busy"),
        site.url("b.test", "/"), "--out", str(out), "--processes", "2", "--scope", "any",
        "--status-port", "0", *resolve, "--resolve-only", "--delay", "0", "--retries", "1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    busy_host = f"a.test:{site.port}"
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        assert line.startswith("status: http://127.0.0.1:"), line
        url = line.split(" ", 1)[1].strip()
        async with aiohttp.ClientSession() as http:
            row: Any = None
            for _ in range(600):  # until the journal line is read (bounded; 50 s of backoff)
                async with http.get(url + "api/hosts", params={"q": "a.test"}) as r:
                    rows = (await r.json())["rows"]
                row = rows[0] if rows else None
                if row is not None and row["backoff_until"] is not None:
                    break
                await asyncio.sleep(0.05)
            assert row is not None and row["host"] == busy_host, row
            assert row["delay_cause"] == "backoff"
            assert time.time() < row["backoff_until"] <= time.time() + 51
            async with http.get(url + "api/status") as r:
                assert (await r.json())["totals"]["hosts_in_backoff"] == 1
            async with http.get(url + "metrics") as r:
                m = samples(await r.text())
            assert m[("skitter_hosts_in_backoff", ())] == 1
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 60) == 130
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
