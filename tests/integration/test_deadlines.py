"""--timeout auto end to end: a slow but steady host is never cut off; a host that stops
answering is given up at its own short deadline, long before the fixed one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from skitter.settings import FocusSettings
from tests.integration.site import Site, crawl, links_page

SLOW = "slow.test"
DEAD = "dead.test"


async def test_slow_but_steady_host_and_host_that_stops_answering(
    site: Site, tmp_path: Path
) -> None:
    hang = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        n = int(request.path.rsplit("/", 1)[-1] or 0)
        await asyncio.sleep(0.3)  # every answer takes 0.3 s: slow but steady
        nxt = f'<a href="/s/{n + 1}">next</a>' if n < 9 else ""
        return web.Response(text=f"<html>{nxt}</html>", content_type="text/html")

    async def dead(request: web.Request) -> web.StreamResponse:
        n = int(request.path.rsplit("/", 1)[-1] or 0)
        if n >= 6:
            await hang.wait()  # stops answering (until the test ends)
        return web.Response(
            text=f'<html><a href="/d/{n + 1}">next</a></html>', content_type="text/html"
        )

    site.fallback(SLOW, slow)
    site.fallback(DEAD, dead)
    site.route(SLOW, "/", links_page("/s/0"))
    site.route(DEAD, "/", links_page("/d/0"))
    focus = FocusSettings(timeout_auto=True, timeout_floor_s=0.5)
    try:
        res = await crawl(
            site,
            tmp_path / "out",
            [site.url(SLOW, "/"), site.url(DEAD, "/")],
            timeout_s=120,
            focus=focus,
            fetch_timeout_s=60.0,
            fetch_read_timeout_s=60.0,
            pol_retries=1,
        )
    finally:
        hang.set()
    slow_recs = [r for r in res.records if SLOW in r["url"]]
    assert len(slow_recs) == 11 and all(r["status"] == 200 for r in slow_recs)
    assert all(r["elapsed_s"] >= 0.3 for r in slow_recs if "/s/" in r["url"])
    rec = res.record(site.url(DEAD, "/d/6"))
    assert rec["error"] == "timeout" and rec["attempts"] == 2
    assert "adaptive deadline" in rec["error_detail"], rec["error_detail"]
    # the second attempt waited twice the host's deadline (0.5 s floor: its answers were fast)
    assert "no data for 1 s" in rec["error_detail"], rec["error_detail"]
    t = res.report["timeouts"]
    assert t["cut"] == 2 and t["ceiling_s"] == 60.0
    assert t["hosts"][f"{SLOW}:{site.port}"] >= 0.9  # 3 x its 0.3 s answers
    assert t["hosts"][f"{DEAD}:{site.port}"] == 2.0  # 0.5 s doubled twice, no answer since
