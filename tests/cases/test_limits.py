"""Limits that hold under attack (issue 3, part 3), end to end through the crawler.

Decoded-size cap for nested codings, max header size, max redirects, redirect loops (a
cookie-setting self-redirect is followed once), max URL length, the per-host page cap and
the spider-trap defences (repeated segments, path depth, query variants), their report.json
"traps" section and links.tsv decisions, and their budgets across a resume.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import brotli
from aiohttp import web

from skitter.crawler import Crawler
from tests.cases._util import WWW, page, requested, run
from tests.integration.rawserver import RawServer, response
from tests.integration.site import Site, links_page, read_output, redirect, settings_for

MIB = 1 << 20


async def test_decoded_size_cap_holds_for_nested_codings(site: Site, tmp_path: Path) -> None:
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    gz = b"".join(co.compress(bytes(MIB)) for _ in range(64)) + co.flush()  # 64 MiB zeros
    nested = {
        "/gzip-br": ("gzip, br", brotli.compress(gz)),
        "/br-in-two-headers": ("gzip\r\nContent-Encoding: br", brotli.compress(gz)),
        "/gzip-gzip": ("gzip, gzip", zlib.compress(gz, wbits=31)),
    }

    def serve(coding: str, body: bytes) -> object:
        async def h(request: web.Request) -> web.StreamResponse:
            resp = web.Response(body=body, content_type="text/html")
            for c in coding.split("\r\nContent-Encoding: "):
                resp.headers.add("Content-Encoding", c)
            return resp

        return h

    for path, (coding, body) in nested.items():
        site.route(WWW, path, serve(coding, body))  # type: ignore[arg-type]
    site.route(WWW, "/after", page())
    seeds = [site.url(WWW, p) for p in (*nested, "/after")]
    res = await run(site, tmp_path / "out", seeds, fetch_max_body_bytes=MIB)
    for path in nested:
        rec = res.record(site.url(WWW, path))
        assert rec["error"] == "body_too_large", (path, rec)
        assert rec["error_detail"].startswith(f"decoded body exceeds limit of {MIB} bytes")
    assert res.record(site.url(WWW, "/after"))["status"] == 200


async def test_100_kib_header_line_is_a_protocol_error(raw: RawServer, tmp_path: Path) -> None:
    raw.route("/", response(200, [("X-Long", "a" * 100 * 1024)], b"<p>x</p>"), host=WWW)
    raw.route("/ok", response(200, [("Content-Type", "text/html")], b"<p>ok</p>"), host=WWW)
    res = await run(raw, tmp_path / "out", [raw.url("/", WWW), raw.url("/ok", WWW)], pol_retries=0)
    rec = res.record(raw.url("/", WWW))
    assert rec["error"] == "protocol" and rec["status"] is None
    assert rec["error_detail"].startswith("bad response")
    assert res.record(raw.url("/ok", WWW))["status"] == 200


async def test_max_redirects_loops_and_cookie_self_redirect(site: Site, tmp_path: Path) -> None:
    for i in range(12):
        site.route(WWW, f"/r{i}", redirect(f"/r{i + 1}"))
    site.route(WWW, "/r12", page())
    site.route(WWW, "/loop-a", redirect("/loop-b"))
    site.route(WWW, "/loop-b", redirect("/loop-a"))
    cookie_hits = {"n": 0}

    async def sticky(request: web.Request) -> web.StreamResponse:
        # sets a cookie and redirects to itself, forever: followed once, then a loop
        cookie_hits["n"] += 1
        resp = web.Response(status=302, headers={"Location": "/sticky"})
        resp.set_cookie("s", str(cookie_hits["n"]))
        return resp

    site.route(WWW, "/sticky", sticky)
    seeds = [site.url(WWW, p) for p in ("/r0", "/loop-a", "/sticky")]
    res = await run(site, tmp_path / "out", seeds, fetch_max_redirects=10)
    rec = res.record(site.url(WWW, "/r0"))
    assert rec["error"] == "too_many_redirects" and rec["error_detail"] == "more than 10 redirects"
    assert len(rec["redirects"]) == 11 and "/r11" not in site.paths(WWW)
    rec = res.record(site.url(WWW, "/loop-a"))
    assert rec["error"] == "too_many_redirects"
    assert rec["error_detail"] == f"redirect loop back to {site.url(WWW, '/loop-a')}"
    rec = res.record(site.url(WWW, "/sticky"))
    assert rec["error"] == "too_many_redirects" and cookie_hits["n"] == 2


async def test_max_url_length_for_links_and_redirects(site: Site, tmp_path: Path) -> None:
    long_path = "/" + "x" * 300
    site.route(WWW, "/", links_page(long_path, "/short", "/to-long"))
    site.route(WWW, "/to-long", redirect(long_path + "-r"))
    site.fallback(WWW, page())
    res = await run(site, tmp_path / "out", [site.url(WWW, "/")], scope_max_url_length=200)
    assert sorted(requested(site, WWW)) == ["/", "/short", "/to-long"]
    d = {r["target"]: r["decision"] for r in res.links}
    assert d[site.url(WWW, long_path)] == "url_length"
    assert d[site.url(WWW, long_path + "-r")] == "url_length"
    rec = res.record(site.url(WWW, "/to-long"))
    assert rec["status"] == 302
    assert rec["error_detail"].endswith("not followed: URL longer than 200 characters")


async def test_max_pages_per_host(site: Site, tmp_path: Path) -> None:
    site.route(WWW, "/", links_page(*[f"/p{i}" for i in range(10)], "/", "/p0"))
    site.route("b.example.test", "/", links_page("/q1", "/q2"))
    site.fallback(WWW, links_page("/", "/p1", "/p9"))
    site.fallback("b.example.test", page())
    seeds = [site.url(WWW, "/"), site.url("b.example.test", "/")]
    res = await run(site, tmp_path / "out", seeds, scope_max_pages_per_host=3)
    assert sorted(requested(site, WWW)) == ["/", "/p0", "/p1"]  # seed + 2 links
    assert sorted(requested(site, "b.example.test")) == ["/", "/q1", "/q2"]
    rows = [r for r in res.links if r["source"] == site.url(WWW, "/")]
    assert [r["decision"] for r in rows] == ["queued", "queued"] + ["limit"] * 8 + ["seen"] * 2
    cap = res.report["traps"]["max_pages_per_host"]
    assert cap["limit"] == 3
    dropped = {site.url(WWW, f"/p{i}") for i in range(2, 10)}
    assert set(cap["urls"]) == dropped
    # /p1's link back to /p9 is dropped again (counted per link found), /p1 and / are seen
    assert cap["count"] == len([r for r in res.links if r["decision"] == "limit"])
    assert res.report["totals"]["by_decision"]["limit"] == cap["count"]


async def grow(request: web.Request) -> web.StreamResponse:
    """Every page links relatively deeper: a soft-404 style infinite space."""
    return web.Response(
        text='<a href="x/">x</a> <a href="a/b/">ab</a> <a href="seg'
        + str(request.path.count("/"))
        + '/">d</a>',
        content_type="text/html",
    )


async def test_repeated_segments_and_path_depth_traps(site: Site, tmp_path: Path) -> None:
    site.fallback(WWW, grow)
    res = await run(
        site, tmp_path / "out", [site.url(WWW, "/g/")], scope_max_path_depth=6, scope_max_depth=20
    )
    got = requested(site, WWW)
    assert res.report["finished"] is True
    for p in got:
        segs = [s for s in p.split("/") if s]
        assert max(segs.count(s) for s in segs) <= 2, p
        assert len(segs) <= 6, p
    assert "/g/x/x/" in got and "/g/x/x/x/" not in got
    assert "/g/a/b/a/b/" in got and "/g/a/b/a/b/a/b/" not in got
    traps = res.report["traps"]
    assert traps["repeated_segments"]["count"] > 0 and traps["path_depth"]["count"] > 0
    assert site.url(WWW, "/g/x/x/x/") in traps["repeated_segments"]["urls"]
    assert traps["repeated_segments"]["limit"] == 2 and traps["path_depth"]["limit"] == 6
    for url in traps["path_depth"]["urls"]:
        assert len([s for s in url.split("/", 3)[3].split("/") if s]) > 6
    trap_rows = [r["target"] for r in res.links if r["decision"] == "trap"]
    listed = set(traps["repeated_segments"]["urls"]) | set(traps["path_depth"]["urls"])
    assert listed <= set(trap_rows)
    assert traps["repeated_segments"]["count"] + traps["path_depth"]["count"] == len(trap_rows)
    assert len(traps["repeated_segments"]["urls"]) == min(100, traps["repeated_segments"]["count"])
    assert len(got) < 300


async def test_trap_on_a_redirect_target_ends_the_chain(site: Site, tmp_path: Path) -> None:
    site.route(WWW, "/jump", redirect("/x/x/x/"))
    res = await run(site, tmp_path / "out", [site.url(WWW, "/jump")])
    rec = res.record(site.url(WWW, "/jump"))
    assert rec["status"] == 302 and "/x/x/x/" not in site.paths(WWW)
    assert rec["error_detail"] == (
        f"redirect to {site.url(WWW, '/x/x/x/')} not followed: repeated_segments: "
        "path segment 'x' occurs 3 times (at most 2)"
    )
    assert [r["decision"] for r in res.links] == ["trap"]


async def test_trap_budgets_survive_a_resume(site: Site, tmp_path: Path) -> None:
    async def cal(request: web.Request) -> web.StreamResponse:
        n = int(request.query.get("n", "0"))
        links = "".join(f'<a href="/cal?n={n + k}">{k}</a>' for k in (1, 2))
        return web.Response(text=links, content_type="text/html")

    site.fallback(WWW, cal)
    out = tmp_path / "out"
    settings = settings_for(
        site, out, [site.url(WWW, "/cal?n=0")], max_pages=3, scope_max_query_variants_per_path=8
    )
    async with Crawler.from_settings(settings) as crawler:
        await crawler.run()
    first = len(requested(site, WWW))
    assert first == 3
    from dataclasses import replace

    async with Crawler.from_settings(replace(settings, max_pages=None, resume=True)) as crawler:
        await crawler.run()
    res = read_output(out)
    assert len(requested(site, WWW)) == 8  # the budget spent before the resume still counts
    assert res.report["traps"]["query_variants"]["count"] >= 1
    assert res.report["finished"] is True
