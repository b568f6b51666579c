"""C19 — slow-drip and never-closing servers.

Scaled down from cases.md (10 s total deadline, 5 s idle, 1 byte/s): total deadline 2 s,
idle-read timeout 1 s, one byte every 0.2 s -- so each byte arrives well within the idle
timeout and only the total deadline can stop the drip. The test asserts *which* deadline
fired (the error detail) and uses time only with generous bounds.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from tests.cases._util import run
from tests.integration.rawserver import RawConnection, RawRequest, RawServer, drip, head, response

TOTAL_S = 2.0
IDLE_S = 1.0


async def test_c19_slow_and_silent_servers_end_to_end(raw: RawServer, tmp_path: Path) -> None:
    raw.route("/", drip(b"HTTP/1.1 200 OK\r\nX-Pad: ", b"a", interval_s=0.2), host="slowhead.test")
    raw.route(
        "/",
        drip(head(200, [("Content-Type", "text/html")]), b"x", interval_s=0.2),
        host="slowbody.test",
    )

    async def noclose(_req: RawRequest, conn: RawConnection) -> None:
        await conn.write(head(200, [("Content-Type", "text/html")]))
        await conn.write(b'<html><a href="/c2">c2</a></html>')
        # silent, never closes: wait until the client gives up and closes its side
        while not conn.peer_closed():
            await asyncio.sleep(0.05)

    raw.route("/", noclose, host="noclose.test")
    raw.route("/", response(200, [("Content-Type", "text/html")], b"<p>fast</p>"), host="fast.test")
    hosts = ["slowhead.test", "slowbody.test", "noclose.test", "fast.test"]
    res = await run(
        raw,
        tmp_path / "out",
        [raw.url("/", h) for h in hosts],
        fetch_timeout_s=TOTAL_S,
        fetch_read_timeout_s=IDLE_S,
        pol_retries=0,
        pol_concurrency=4,
    )

    for h in ("slowhead.test", "slowbody.test"):
        rec = res.record(raw.url("/", h))
        assert rec["error"] == "timeout" and rec["status"] is None, rec
        assert rec["error_detail"].startswith("timeout (total deadline): 2 s passed"), rec
    head_rec = res.record(raw.url("/", "slowhead.test"))
    assert "during headers" in head_rec["error_detail"]
    body_rec = res.record(raw.url("/", "slowbody.test"))
    m = re.search(r"during body, (\d+) body bytes read", body_rec["error_detail"])
    assert m is not None and int(m.group(1)) >= 3  # bytes kept arriving: not an idle stop
    rec = res.record(raw.url("/", "noclose.test"))
    assert rec["error"] == "timeout"
    assert rec["error_detail"].startswith("timeout (idle read): no data for 1 s during body")
    assert not raw.requests("/c2")  # a partial body is not a page
    fast = res.record(raw.url("/", "fast.test"))
    assert fast["status"] == 200 and fast["error"] is None
    # the hosts were fetched side by side: every slow host's request reached the server
    # before the first of them could have hit its total deadline (one after another, each
    # would come at least TOTAL_S after the previous one)
    arrivals = [min(r.time for r in raw.requests("/", h)) for h in hosts[:3]]
    assert max(arrivals) - min(arrivals) < TOTAL_S, arrivals
    # nothing stays stuck: the client side closed every connection
    for _ in range(50):
        if not raw._tasks:
            break
        await asyncio.sleep(0.1)
    assert not raw._tasks, "server connections still open after the crawl"
