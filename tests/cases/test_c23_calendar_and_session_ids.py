"""C23 — an infinite calendar and session ids in every link.

The calendar is bounded by depth (cases.md) or, without a depth limit, by the
``max_query_variants_per_path`` trap defence; session ids are removed by canonicalisation,
so the per-visit ids never make a link look new.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from urllib.parse import parse_qs

from aiohttp import web

from tests.cases._util import requested, run
from tests.integration.site import Site

CAL = "cal.example.test"


async def calendar(request: web.Request) -> web.StreamResponse:
    if request.path == "/cal":
        q = parse_qs(request.query_string)
        y, m = int(q["y"][0]), int(q["m"][0])
        py, pm = (y, m - 1) if m > 1 else (y - 1, 12)
        ny, nm = (y, m + 1) if m < 12 else (y + 1, 1)
        body = (
            f"<h1>{y}-{m:02d}</h1>"
            f'<a href="/cal?y={py}&m={pm}">prev</a> <a href="/cal?y={ny}&m={nm}">next</a>'
            f'<a href="/list;jsessionid={secrets.token_hex(16).upper()}.node7?page=2">list</a>'
            f'<a href="/item?PHPSESSID={secrets.token_hex(16)}&id=7&sort=asc">item</a>'
        )
    else:
        body = "<p>no links</p>"
    return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")


async def test_c23_calendar_bounded_by_depth_and_session_ids_removed(
    site: Site, tmp_path: Path
) -> None:
    site.fallback(CAL, calendar)
    res = await run(site, tmp_path / "out", [site.url(CAL, "/cal?y=2024&m=6")], scope_max_depth=5)
    got = requested(site, CAL)
    cal = sorted(p for p in got if p.startswith("/cal"))
    assert cal == sorted(f"/cal?y=2024&m={m}" for m in range(1, 12))
    assert got.count("/list?page=2") == 1
    assert got.count("/item?id=7&sort=asc") == 1
    assert len(got) == 13  # 11 calendar pages + /list + /item, nothing else
    targets = {r["target"] for r in res.links}
    assert site.url(CAL, "/list?page=2") in targets
    assert site.url(CAL, "/item?id=7&sort=asc") in targets
    assert not any(";" in t or "node7" in t or "SESSID" in t.upper() for t in targets)
    assert res.report["finished"] is True
    assert res.report["traps"]["query_variants"]["count"] == 0  # depth bounded it first


async def test_c23_calendar_without_depth_limit_is_bounded_by_query_variants(
    site: Site, tmp_path: Path
) -> None:
    site.fallback(CAL, calendar)
    res = await run(
        site,
        tmp_path / "out",
        [site.url(CAL, "/cal?y=2024&m=6")],
        scope_max_query_variants_per_path=20,
    )
    got = requested(site, CAL)
    assert len([p for p in got if p.startswith("/cal")]) == 20
    assert got.count("/list?page=2") == 1 and got.count("/item?id=7&sort=asc") == 1
    traps = res.report["traps"]["query_variants"]
    assert traps["limit"] == 20 and traps["count"] >= 1
    trap_rows = [r for r in res.links if r["decision"] == "trap"]
    assert trap_rows and {r["target"] for r in trap_rows} == set(traps["urls"])
    assert all(r["target"].startswith(site.url(CAL, "/cal?")) for r in trap_rows)
    assert res.report["totals"]["by_decision"]["trap"] == traps["count"]
    assert res.report["finished"] is True
