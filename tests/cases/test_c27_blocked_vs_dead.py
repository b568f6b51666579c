"""C27 — "blocked" is not "dead": 401/403/999/429 vs 404/410/DNS failure (crawl side).

The report split into "broken" and "could not verify" is the link checker's
(``skitter check-links``, issue 5, built separately). The crawl side, tested here: the
crawler always sends a non-empty User-Agent; 401/403/999/429 are recorded as HTTP statuses,
not as fetch errors; a name that does not resolve is the fetch error ``dns`` (not a
robots.txt verdict); each "unverified" URL is requested at most twice (429: one retry).
"""

from __future__ import annotations

from pathlib import Path

from tests.cases._util import CASE_UA, WWW, run
from tests.integration.rawserver import RawConnection, RawRequest, RawServer, response

HTML = [("Content-Type", "text/html")]


async def wall(req: RawRequest, conn: RawConnection) -> None:
    ua = req.header("user-agent") or ""
    status = 200 if "Firefox/" in ua else 403
    await conn.write(response(status, HTML, b"<p>wall</p>"))


async def login(req: RawRequest, conn: RawConnection) -> None:
    if not (req.header("user-agent") or "").strip():
        await conn.write(response(500, HTML, b"no UA"))
        return
    await conn.write(response(401, [("WWW-Authenticate", 'Basic realm="x"'), *HTML], b"login"))


async def test_c27_blocked_statuses_are_statuses_and_dns_is_an_error(
    raw: RawServer, tmp_path: Path
) -> None:
    targets = {
        "wall": raw.url("/a", "wall.example.test"),
        "social": raw.url("/in/x", "social.example.test"),
        "login": raw.url("/admin", "login.example.test"),
        "busy": raw.url("/p", "busy.example.test"),
        "old": raw.url("/old", "gone.example.test"),
        "removed": raw.url("/removed", "gone.example.test"),
        "nowhere": "http://nowhere.invalid/",
    }
    links = "".join(f'<a href="{u}">{k}</a>' for k, u in targets.items())
    raw.route("/", response(200, HTML, links.encode()), host=WWW)
    raw.route("/a", wall, host="wall.example.test")
    raw.route(
        "/in/x", response(999, HTML, b"denied", reason="Request denied"), host="social.example.test"
    )
    raw.route("/admin", login, host="login.example.test")
    raw.route("/p", response(429, HTML, b"busy"), host="busy.example.test")
    raw.route("/old", response(404, HTML, b"gone"), host="gone.example.test")
    raw.route("/removed", response(410, HTML, b"gone"), host="gone.example.test")
    res = await run(raw, tmp_path / "out", [raw.url("/", WWW)], scope_scope="any", pol_retries=1)

    # a non-empty User-Agent on every request (login answered 401, not 500)
    assert all(r.header("user-agent") == CASE_UA for r in raw.log)
    expected = {"wall": 403, "social": 999, "login": 401, "busy": 429, "old": 404, "removed": 410}
    for key, status in expected.items():
        rec = res.record(targets[key])
        assert rec["status"] == status and rec["error"] is None, (key, rec)
    for key in ("wall", "social", "login"):
        assert res.record(targets[key])["attempts"] == 1
    # 429 without Retry-After: retried once after a backoff, then recorded as rate limited
    busy = res.record(targets["busy"])
    assert busy["attempts"] == 2 and len(raw.requests("/p", "busy.example.test")) == 2
    assert busy["error_detail"] == "rate limited (429): gave up after 2 attempts"
    for host in ("wall", "social", "login"):
        assert len(raw.requests(host=f"{host}.example.test")) <= 3  # robots.txt + at most 2
    # DNS failure: a fetch error ("broken"), not a robots.txt verdict, not retried
    nowhere = res.record(targets["nowhere"])
    assert nowhere["error"] == "dns" and nowhere["status"] is None
    assert nowhere["attempts"] == 1
    assert "nowhere.invalid" in nowhere["error_detail"]
    by_error = res.report["totals"]["by_error"]
    assert by_error == {"dns": 1}
