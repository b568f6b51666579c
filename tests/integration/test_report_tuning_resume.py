"""report.json ``concurrency`` and ``timeouts`` cover the whole crawl across ``--resume``, as
``totals`` do: a crawl with ``--concurrency auto`` and ``--timeout auto`` stopped by
``--max-pages`` and resumed sums the sessions' readings and cut fetches, keeps the highest
limit and every session's history, and lists the sessions."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from aiohttp import web

from skitter.settings import FocusSettings
from tests.integration.site import Site, crawl, links_page

D = "tuning.test"


async def test_concurrency_and_timeouts_cover_every_session(site: Site, tmp_path: Path) -> None:
    hang = asyncio.Event()

    async def stops_answering(request: web.Request) -> web.StreamResponse:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(hang.wait(), 60)  # (bounded: the test releases it)
        return web.Response(text="<p>late</p>", content_type="text/html")

    # one host, fetched in link order (one at a time): 7 answers, /h1 stops answering, ...
    # the first session stops at 9 pages (after /d/7); the second one has 7 answers (its
    # deadlines are learnt again) before /h2 stops answering. Each hang is cut twice
    # (retried once at twice the deadline).
    order = [*(f"/d/{i}" for i in range(6)), "/h1", *(f"/d/{i}" for i in range(6, 15)), "/h2",
             "/d/15"]  # fmt: skip
    site.route(D, "/", links_page(*order))
    for p in order:
        site.route(D, p, stops_answering if p.startswith("/h") else links_page("/"))
    out = tmp_path / "out"
    focus = FocusSettings(timeout_auto=True, timeout_floor_s=0.5, concurrency_auto=True)
    kw = {"focus": focus, "fetch_timeout_s": 60.0, "fetch_read_timeout_s": 60.0,
          "pol_retries": 1, "timeout_s": 120}  # fmt: skip
    try:
        first = await crawl(site, out, [site.url(D, "/")], max_pages=9, **kw)
        assert first.report["stop_reason"] == "max_pages"
        assert first.record(site.url(D, "/h1"))["error"] == "timeout"
        c1, t1 = first.report["concurrency"], first.report["timeouts"]
        assert t1["cut"] == 2
        assert c1["sessions"] == [
            {"ceiling": c1["ceiling"], "floor": c1["floor"], "cpu_target": c1["cpu_target"],
             "max_memory_bytes": c1["max_memory_bytes"], "readings": c1["readings"],
             "peak": c1["peak"], "end": c1["current"]}
        ]  # fmt: skip
        second = await crawl(site, out, [site.url(D, "/")], max_pages=None, resume=True, **kw)
    finally:
        hang.set()
    assert second.report["finished"] is True
    assert sorted(r["url"] for r in second.records) == sorted(
        site.url(D, p) for p in ["/", *order]
    )
    assert second.record(site.url(D, "/h2"))["error"] == "timeout"
    c, t = second.report["concurrency"], second.report["timeouts"]
    # timeouts: the cut fetches of both sessions, per session too
    assert t["cut"] == 4
    assert [s["cut"] for s in t["sessions"]] == [2, 2]
    assert t["sessions"][0] == {k: t1[k] for k in ("floor_s", "ceiling_s", "percentile",
                                                   "factor", "cut")}  # fmt: skip
    assert list(t["hosts"]) == [f"{D}:{site.port}"]
    # concurrency: readings summed, the highest limit, every session's history in order
    assert len(c["sessions"]) == 2
    assert c["sessions"][0] == c1["sessions"][0]
    assert c["readings"] == c1["readings"] + c["sessions"][1]["readings"]
    assert c["peak"] == max(c1["peak"], c["sessions"][1]["peak"])
    assert c["history"][: len(c1["history"])] == c1["history"]
    assert [h for h in c["history"] if h[2] == "start"] == [[0.0, 8, "start"]] * 2
    assert c["current"] == c["sessions"][1]["end"]
