"""C21 — 429/503 with Retry-After: the whole host waits, retries are bounded, and a wait
longer than the cap is "rate limited", not "broken".

Scaled down from cases.md: ``Retry-After: 1`` instead of 2 s, an HTTP-date about 2 s ahead
instead of 3 s. The waits are checked on the server's clock with a small tolerance.
"""

from __future__ import annotations

import itertools
import time
from email.utils import formatdate
from pathlib import Path

from tests.cases._util import run
from tests.integration.rawserver import RawConnection, RawRequest, RawServer, response

RL = "rl.example.test"
RL2 = "rl2.example.test"
OK = response(200, [("Content-Type", "text/html")], b"<p>ok</p>")


async def test_c21_retry_after_per_host_and_cap(raw: RawServer, tmp_path: Path) -> None:
    sent_429: list[tuple[float, float]] = []  # (monotonic time answered, Retry-After s)
    a_calls = {"n": 0}
    b_calls: list[tuple[float, float]] = []  # (wall time requested, Retry-After date)

    async def a(req: RawRequest, conn: RawConnection) -> None:
        a_calls["n"] += 1
        if a_calls["n"] <= 2:
            await conn.write(response(429, [("Retry-After", "1")], b"slow down"))
            sent_429.append((time.monotonic(), 1.0))
        else:
            await conn.write(OK)

    async def b(req: RawRequest, conn: RawConnection) -> None:
        now = time.time()
        if not b_calls:
            until = float(int(now) + 2)  # whole seconds: an HTTP-date ~1-2 s ahead
            b_calls.append((now, until))
            await conn.write(
                response(503, [("Retry-After", formatdate(until, usegmt=True))], b"busy")
            )
        else:
            b_calls.append((now, 0.0))
            await conn.write(OK)

    raw.route("/a", a, host=RL)
    raw.route("/a2", OK, host=RL)
    raw.route("/b", b, host=RL)
    raw.route("/c", response(429, [("Retry-After", "86400")], b"come back tomorrow"), host=RL2)
    seeds = [raw.url("/a", RL), raw.url("/a2", RL), raw.url("/b", RL), raw.url("/c", RL2)]
    start = time.monotonic()
    res = await run(raw, tmp_path / "out", seeds, pol_retries=3)
    elapsed = time.monotonic() - start

    # /a: three requests, 1 s apart at least, final OK
    rec = res.record(raw.url("/a", RL))
    assert rec["status"] == 200 and rec["attempts"] == 3 and rec["error_detail"] is None
    a_times = [r.time for r in raw.requests("/a", RL)]
    assert len(a_times) == 3
    assert all(t2 - t1 >= 1.0 - 0.05 for t1, t2 in itertools.pairwise(a_times))
    # no request of any kind to the host within Retry-After of a 429 (so /a2 waits too)
    for answered, wait in sent_429:
        later = [r for r in raw.requests(host=RL) if r.time > answered]
        assert all(r.time - answered >= wait - 0.05 for r in later), (answered, later)
    assert res.record(raw.url("/a2", RL))["status"] == 200
    # /b: retried no earlier than the HTTP-date
    assert len(b_calls) == 2
    assert b_calls[1][0] >= b_calls[0][1] - 0.05
    assert res.record(raw.url("/b", RL))["status"] == 200
    # rl2/c: the wait asked for exceeds the 60 s cap: one request, "rate limited (429)"
    assert len(raw.requests("/c", RL2)) == 1
    rec = res.record(raw.url("/c", RL2))
    assert rec["status"] == 429 and rec["error"] is None and rec["attempts"] == 1
    assert rec["error_detail"] == (
        "rate limited (429): Retry-After 86400 s is longer than the 60 s cap, not retried"
    )
    # rl2's huge delay did not stall rl.example.test (waiting for it would take the 60 s cap)
    assert elapsed < 45.0
