"""--concurrency auto in a crawl: readings are taken every few recorded pages (an event,
not a clock), so the outcome depends on the pages crawled, never on timing."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

from aiohttp import web

from skitter.autotune import AutoLimit, ConcurrencyController, Load, ProcessLoad
from skitter.crawler import Crawler
from skitter.events import CrawlHooks
from tests.integration.site import Site, read_output, settings_for

A = "tune.test"
FANOUT = 8


def _tree(site: Site, pages: int, burn_ms: float = 0.0) -> None:
    """Pages /p/N linking to /p/(N*FANOUT+1 .. N*FANOUT+FANOUT), ``pages`` in all; each
    response costs ``burn_ms`` of CPU (hashing) in this process."""

    async def h(request: web.Request) -> web.StreamResponse:
        n = int(request.path.rsplit("/", 1)[-1] or 0)
        if burn_ms:
            loop = asyncio.get_running_loop()
            end = loop.time() + burn_ms / 1000
            x = b"x"
            while loop.time() < end:
                x = hashlib.sha256(x).digest()
        kids = [k for k in range(n * FANOUT + 1, n * FANOUT + FANOUT + 1) if k < pages]
        body = "".join(f'<a href="/p/{k}">{k}</a>' for k in kids)
        return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")

    site.fallback(A, h)


class PageTicks:
    """A sleep that returns after every ``every`` recorded pages (the crawl's own events)."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.pages = 0
        self.cond = asyncio.Condition()

    async def on_page(self, *_a: Any) -> None:
        async with self.cond:
            self.pages += 1
            self.cond.notify_all()

    async def sleep(self, _s: float) -> None:
        target = self.pages + self.every
        async with self.cond:
            await self.cond.wait_for(lambda: self.pages >= target)


async def _crawl(site: Site, out: Path, limit: AutoLimit, ticks: PageTicks) -> Any:
    settings = settings_for(
        site,
        out,
        [site.url(A, "/p/0")],
        frontier="memory",
        warc=False,
        pol_host_concurrency=64,
        pol_ip_concurrency=64,
        pol_concurrency=64,
    )
    async with Crawler(settings, hooks=CrawlHooks(on_page=ticks.on_page), limit=limit) as c:
        await asyncio.wait_for(c.run(), 120)
    return read_output(out)


async def test_concurrency_rises_then_settles_under_a_cpu_cost_per_fetch(
    site: Site, tmp_path: Path
) -> None:
    """A synthetic load (2 % of a core per fetch in flight): the limit climbs from 2, stays
    under the ceiling, and settles around 0.85 / 0.02 = 42; the server never sees more
    requests at once than the highest limit."""
    _tree(site, 1500)
    ticks = PageTicks(every=8)

    async def read(peak: int) -> Load:
        return Load(cpu=0.02 * peak, memory_bytes=0, lag_s=0.0, peak_inflight=peak)

    ctl = ConcurrencyController(64, cpu_target=0.85, max_memory_bytes=1 << 40, start=2, floor=2)
    limit = AutoLimit(ctl, read=read, sleep=ticks.sleep)
    res = await _crawl(site, tmp_path / "out", limit, ticks)
    assert res.report["totals"]["records"] == 1500
    hist = res.report["concurrency"]["history"]
    values = [v for _, v, _ in hist]
    assert values[0] == 2 and max(values) > 30 and max(values) <= 64
    lo, hi = 0.85 / 0.02 * 0.6, 0.85 / 0.02 * 1.3
    settled = next(i for i, v in enumerate(values) if v >= lo)
    assert all(lo <= v <= hi for v in values[settled:])  # once there, it stays in the band
    assert site.max_inflight[A] <= max(values)


async def test_backs_off_under_an_artificial_memory_ceiling(site: Site, tmp_path: Path) -> None:
    """Real readings of this process with a 1-byte memory ceiling: halved at every reading
    down to 1, never raised."""
    _tree(site, 300)
    ticks = PageTicks(every=5)
    ctl = ConcurrencyController(64, max_memory_bytes=1, start=32)
    limit = AutoLimit(ctl, read=ProcessLoad().read, sleep=ticks.sleep)
    res = await _crawl(site, tmp_path / "out", limit, ticks)
    hist = res.report["concurrency"]["history"]
    assert [v for _, v, _ in hist] == [32, 16, 8, 4, 2, 1]
    assert {why for _, _, why in hist[1:]} == {"memory"}
    assert res.report["concurrency"]["current"] == 1


async def test_never_rises_when_responses_cost_more_cpu_than_the_target(
    site: Site, tmp_path: Path
) -> None:
    """Real CPU readings, each response costing 20 ms of CPU in this process and a target of
    5 % of a core: the limit only goes down."""
    _tree(site, 120, burn_ms=20)
    ticks = PageTicks(every=5)
    ctl = ConcurrencyController(64, cpu_target=0.05, max_memory_bytes=1 << 40, start=16, floor=1)
    limit = AutoLimit(ctl, read=ProcessLoad().read, sleep=ticks.sleep)
    res = await _crawl(site, tmp_path / "out", limit, ticks)
    values = [v for _, v, _ in res.report["concurrency"]["history"]]
    assert values == sorted(values, reverse=True) and values[-1] < 16
