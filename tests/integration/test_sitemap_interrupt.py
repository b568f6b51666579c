"""Ctrl-C (SIGINT) or SIGTERM during the sitemap phase stops the crawl at once, as in the
main loop: the sitemap fetch under way is abandoned (read again on resume), exit 130, and a
resume completes the crawl. The real CLI (a subprocess), one process and ``--processes``."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest
from aiohttp import web

from tests.integration.site import Site, links_page, text
from tests.integration.test_processes import (
    crawl_args,
    finish,
    owner,
    records,
    run_cli,
    start_cli,
)

H = "stall.example.test"
URLSET = (
    '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    "<url><loc>/s1</loc></url></urlset>"
)


@pytest.mark.parametrize(("processes", "sig"), [("1", signal.SIGINT), ("2", signal.SIGINT),
                                                ("1", signal.SIGTERM)])  # fmt: skip
async def test_a_signal_in_the_sitemap_phase_stops_at_once(
    site: Site, tmp_path: Path, processes: str, sig: signal.Signals
) -> None:
    release = asyncio.Event()
    stalled = asyncio.Event()

    async def sitemap(request: web.Request) -> web.StreamResponse:
        if not release.is_set():
            stalled.set()
            await asyncio.wait_for(release.wait(), 120)  # (bounded: the test releases it)
        return web.Response(text=URLSET.replace("/s1", site.url(H, "/s1")),
                            content_type="application/xml")  # fmt: skip

    site.route(H, "/robots.txt", text(f"User-agent: *\nSitemap: {site.url(H, '/sitemap.xml')}\n"))
    site.route(H, "/sitemap.xml", sitemap)
    site.route(H, "/", links_page("/a"))
    site.route(H, "/a", links_page("/"))
    site.route(H, "/s1", links_page("/"))
    out = tmp_path / "out"
    args = crawl_args(site, [H], out, "--processes", processes, "--timeout", "120")
    proc = await start_cli(*args, site.url(H, "/"))
    try:
        await asyncio.wait_for(stalled.wait(), 60)
        assert proc.returncode is None
        proc.send_signal(sig)
        # at once: not when the sitemap's response comes (120 s) or the fetch times out
        rc, _, err = await finish(proc, timeout_s=20)
    finally:
        release.set()
    assert rc == 130, err
    assert "Traceback" not in err
    assert f"interrupted; resume with: skitter crawl --resume --out {out}" in err
    # the phase did not end (where H's sitemap is read): read again on resume
    here = out if processes == "1" else out / "shards" / str(owner(site, H, 2))
    assert not (here / "sitemaps.json").exists()
    assert records(out) == []  # nothing was leased before the phase
    assert json.loads((out / "report.json").read_text())["stop_reason"] == "interrupted"
    rc, _, err = await run_cli(*crawl_args(site, [H], out), "--resume")
    assert rc == 0, err
    assert sorted(r["url"] for r in records(out)) == sorted(
        site.url(H, p) for p in ("/", "/a", "/s1")
    )
    assert len(list(out.rglob("sitemaps.json"))) == int(processes)  # (one per process)
    assert json.loads((out / "report.json").read_text())["sitemaps"]["read"] == 1
    rows = (out / "links.tsv").read_text().splitlines()
    assert [r.split("\t")[-1] for r in rows if "\tsitemap\t" in r] == ["queued"]
    assert [h.path_qs for h in site.hits].count("/sitemap.xml") == 2  # abandoned, read again
