"""kill -9 and resume in the middle of a deduplicating, sitemap-reading, in-link-ordered crawl;
and the same features with --processes 2."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.conftest import REPO
from tests.integration.site import Site, links_page, text
from tests.integration.test_quality import BODY, urlset
from tests.warc_check import warc_records

A = "www.example.test"
B = "other.example.test"
GROUPS = 3  # distinct bodies among the pages
PAGES = 24


def _cli(site: Site, out: Path, *args: str) -> list[str]:
    resolve = [x for h in (A, B) for x in ("--resolve", f"{h}:{site.port}:127.0.0.1")]
    return [
        sys.executable, "-m", "skitter", "crawl", "--out", str(out), *resolve,
        "--resolve-only", "--quiet", "--delay", "0", *args,
    ]  # fmt: skip


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]


def dup_site(site: Site, served: list[str], hold_after: int = 0) -> asyncio.Event:
    """/ links PAGES pages on A and B; page i has body i % GROUPS (and links to /leaf).
    With ``hold_after``, pages past that many wait for the returned event."""
    gate = asyncio.Event()
    if not hold_after:
        gate.set()

    def page(i: int) -> Any:
        body = f"<html><body><h1>group {'xyz'[i % GROUPS]}</h1>{BODY}<a href='/leaf'>l</a>"
        body += "</body></html>"

        async def h(request: web.Request) -> web.StreamResponse:
            served.append(request.host + request.path)
            if len(served) > hold_after:
                await asyncio.wait_for(gate.wait(), 60)
            return web.Response(text=body, content_type="text/html")

        return h

    site.route(A, "/", links_page(*[f"/p{i}" for i in range(PAGES)], f"http://{B}:{site.port}/"))
    site.route(B, "/", links_page(*[f"/p{i}" for i in range(PAGES)]))
    for i in range(PAGES):
        site.route(A, f"/p{i}", page(i))
        site.route(B, f"/p{i}", page(i))
    site.route(A, "/leaf", text("leaf"))
    site.route(B, "/leaf", text("leaf"))
    return gate


def check_dedup_output(out: Path) -> None:
    recs = _records(out)
    urls = [r["url"] for r in recs]
    # /, the pages on each host, A's /leaf (B's pages are all copies: their links not queued)
    assert len(urls) == len(set(urls)) == 2 * (PAGES + 1) + 1
    html = [r for r in recs if r["content_type"] == "text/html" and "/p" in r["url"]]
    originals = Counter(r["sha1"] for r in html if "duplicate" not in r)
    assert sorted(originals.values()) == [1] * GROUPS  # one original per body, resume or not
    first = {r["sha1"]: r["url"] for r in html if "duplicate" not in r}
    for r in html:
        if "duplicate" in r:
            assert (r["duplicate"], r["duplicate_of"]) == ("exact", first[r["sha1"]])
    recs_w = warc_records(out)
    responses = {(h["WARC-Target-URI"], h["WARC-Date"]) for t, h in recs_w if t == "response"}
    for t, h in recs_w:
        if t == "revisit":
            assert (h["WARC-Refers-To-Target-URI"], h["WARC-Refers-To-Date"]) in responses
    report = json.loads((out / "report.json").read_text())
    assert report["duplicates"]["duplicates"] == len(html) - GROUPS
    assert report["finished"] is True


@pytest.mark.slow
async def test_kill_9_mid_dedup_and_inlinks_then_resume(site: Site, tmp_path: Path) -> None:
    served: list[str] = []
    gate = dup_site(site, served, hold_after=12)
    out = tmp_path / "out"
    args = ["--dedup", "exact", "--order", "inlinks", "--max-duplicate-ratio", "off"]
    proc = await asyncio.create_subprocess_exec(
        *_cli(site, out, site.url(A, "/"), "--scope", "any", *args), cwd=REPO
    )
    pages = out / "pages.jsonl"
    for _ in range(3000):  # bounded: 30 s
        if pages.exists() and pages.read_bytes().count(b"\n") >= 10:
            break
        await asyncio.sleep(0.01)
    proc.send_signal(signal.SIGKILL)  # with requests held in flight
    assert await proc.wait() == -signal.SIGKILL
    served_at_kill = set(served)  # (held ones included: the gate is still shut)
    gate.set()
    before = pages.read_bytes().count(b"\n")
    recorded = {
        json.loads(line)["url"].split("://", 1)[1]
        for line in pages.read_bytes().split(b"\n")[:before]  # complete lines only
    }
    assert before < 2 * (PAGES + 1)
    proc = await asyncio.create_subprocess_exec(*_cli(site, out, "--resume"), cwd=REPO)
    assert await proc.wait() == 0
    check_dedup_output(out)
    repeats = {p for p, n in Counter(served).items() if n > 1}
    # only what the killed crawl was serving or had read but not yet recorded is asked again
    # (how many depends on when the kill lands: responses are read ahead of their records)
    assert repeats <= served_at_kill - recorded


@pytest.mark.slow
async def test_kill_9_mid_sitemaps_then_resume(site: Site, tmp_path: Path) -> None:
    n_maps = 10
    served: Counter[str] = Counter()
    third = asyncio.Event()

    def slow_map(k: int) -> Any:
        body = urlset(*[f"/e{k}-{j}" for j in range(3)]).encode()

        async def h(request: web.Request) -> web.StreamResponse:
            served[request.path] += 1
            if len(served) >= 3:
                third.set()
            await asyncio.sleep(0.1)
            return web.Response(body=body, content_type="application/xml")

        return h

    items = "".join(f"<sitemap><loc>/m{k}.xml</loc></sitemap>" for k in range(n_maps))
    site.route(A, "/robots.txt", text("User-agent: *\nSitemap: /index.xml\n"))
    site.route(
        A, "/index.xml", text(f"<sitemapindex>{items}</sitemapindex>", content_type="text/xml")
    )
    for k in range(n_maps):
        site.route(A, f"/m{k}.xml", slow_map(k))
    site.route(A, "/", links_page())
    site.fallback(A, links_page())
    out = tmp_path / "out"
    proc = await asyncio.create_subprocess_exec(*_cli(site, out, site.url(A, "/")), cwd=REPO)
    await asyncio.wait_for(third.wait(), 30)
    proc.send_signal(signal.SIGKILL)
    assert await proc.wait() == -signal.SIGKILL
    assert not (out / "sitemaps.json").exists()
    proc = await asyncio.create_subprocess_exec(*_cli(site, out, "--resume"), cwd=REPO)
    assert await proc.wait() == 0
    recs = _records(out)
    urls = [r["url"] for r in recs]
    entries = {site.url(A, f"/e{k}-{j}") for k in range(n_maps) for j in range(3)}
    assert len(urls) == len(set(urls))
    assert set(urls) == entries | {site.url(A, "/")}
    fetched = Counter(h.path_qs for h in site.hits if h.path_qs.startswith("/e"))
    assert set(fetched.values()) == {1}  # entries are fetched after the phase: once each
    rows = [line.split("\t") for line in (out / "links.tsv").read_text().splitlines()[1:]]
    queued = {r[1] for r in rows if r[4] == "sitemap" and r[6] == "queued"}
    assert queued == entries
    report = json.loads((out / "report.json").read_text())
    assert report["sitemaps"]["read"] == 1 + n_maps and report["sitemaps"]["entries"] == 30
    warc_records(out)


async def test_kill_9_after_sitemap_rows_written_then_resume_writes_each_row_once(
    site: Site, tmp_path: Path
) -> None:
    # the phase is killed after it wrote a batch of rows: the resumed phase reads the
    # sitemaps again but writes each (sitemap, entry) row once, with its first decision
    big = 1200  # more than one batch of rows (sitemap_phase.BATCH)
    gate = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(gate.wait(), 60)
        return web.Response(body=urlset("/h0", "/h1").encode(), content_type="application/xml")

    site.route(A, "/robots.txt", text("User-agent: *\nSitemap: /index.xml\n"))
    items = "<sitemap><loc>/big.xml</loc></sitemap><sitemap><loc>/held.xml</loc></sitemap>"
    site.route(
        A, "/index.xml", text(f"<sitemapindex>{items}</sitemapindex>", content_type="text/xml")
    )
    site.route(
        A, "/big.xml", text(urlset(*[f"/e{j}" for j in range(big)]), content_type="application/xml")
    )
    site.route(A, "/held.xml", held)
    site.route(A, "/", links_page())
    site.fallback(A, links_page())
    out = tmp_path / "out"
    args = ("--processes", "1", "--max-pages", "3")
    proc = await asyncio.create_subprocess_exec(*_cli(site, out, site.url(A, "/"), *args), cwd=REPO)
    links = out / "links.tsv"
    for _ in range(3000):  # bounded: 30 s
        if links.exists() and links.read_bytes().count(b"\tsitemap\t") >= 1000:
            break
        await asyncio.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert await proc.wait() == -signal.SIGKILL
    assert not (out / "sitemaps.json").exists()
    gate.set()
    proc = await asyncio.create_subprocess_exec(*_cli(site, out, "--resume"), cwd=REPO)
    assert await proc.wait() == 0
    rows = [line.split("\t") for line in links.read_text().splitlines()[1:]]
    sm = Counter((r[0], r[1]) for r in rows if r[4] == "sitemap")
    assert len(sm) == big + 2 and set(sm.values()) == {1}
    queued = [r for r in rows if r[4] == "sitemap" and r[6] == "queued"]
    assert len(queued) == big + 2
    report = json.loads((out / "report.json").read_text())
    assert report["sitemaps"]["entries"] == big + 2
    assert report["totals"]["by_decision"].get("seen", 0) == sum(r[6] == "seen" for r in rows)


async def test_processes_2_robots_sitemap_on_another_process_host_is_read(
    site: Site, tmp_path: Path
) -> None:
    # the seed's robots.txt lists a sitemap on a host another process owns: it is read (by
    # the seed's owner, the only one that sees that line) as with one process
    from skitter.sharding import shard_of_url

    owner = shard_of_url(site.url(A, "/"), 2)
    x = next(
        h
        for h in (f"s{i}.example.test" for i in range(64))
        if shard_of_url(f"http://{h}:{site.port}/", 2) != owner
    )
    site.route(A, "/robots.txt", text(f"User-agent: *\nSitemap: http://{x}:{site.port}/sm.xml\n"))
    site.route(x, "/sm.xml", text(urlset("/only-in-sitemap"), content_type="application/xml"))
    site.route(A, "/", links_page())
    site.fallback(x, links_page())
    out = tmp_path / "out"
    args = [
        *("crawl", site.url(A, "/"), "--out", str(out), "--scope", "domain", "--processes", "2"),
        *("--resolve", f"{A}:{site.port}:127.0.0.1", "--resolve", f"{x}:{site.port}:127.0.0.1"),
        *("--resolve-only", "--quiet", "--delay", "0"),
    ]
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "skitter", *args, cwd=REPO)
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    assert {r["url"] for r in _records(out)} == {
        site.url(A, "/"),
        f"http://{x}:{site.port}/only-in-sitemap",
    }
    report = json.loads((out / "report.json").read_text())["sitemaps"]
    assert (report["read"], report["entries"]) == (1, 1)


async def test_damaged_sitemaps_json_is_read_again_on_resume(site: Site, tmp_path: Path) -> None:
    # sitemaps.json damaged by hand: the resume reads the sitemaps again (no traceback, no
    # refusal) and links.tsv still holds each sitemap row once
    site.route(A, "/robots.txt", text("User-agent: *\nSitemap: /sm.xml\n"))
    site.route(A, "/sm.xml", text(urlset("/s1", "/s2"), content_type="application/xml"))
    site.route(A, "/", links_page())
    site.fallback(A, links_page())
    out = tmp_path / "out"
    args = ("--processes", "1", "--max-pages", "2")
    proc = await asyncio.create_subprocess_exec(*_cli(site, out, site.url(A, "/"), *args), cwd=REPO)
    assert await proc.wait() == 0
    first = json.loads((out / "sitemaps.json").read_text())
    for damage in ("{bad", "[1, 2]"):
        (out / "sitemaps.json").write_text(damage)
        proc = await asyncio.create_subprocess_exec(
            *_cli(site, out, "--resume", "--max-pages", "3"), cwd=REPO
        )
        assert await proc.wait() == 0, damage
        assert json.loads((out / "sitemaps.json").read_text()) == first
        assert json.loads((out / "report.json").read_text())["sitemaps"] == first
    rows = [line.split("\t") for line in (out / "links.tsv").read_text().splitlines()[1:]]
    sm = sorted((r[1], r[6]) for r in rows if r[4] == "sitemap")
    assert sm == [(site.url(A, "/s1"), "queued"), (site.url(A, "/s2"), "queued")]


async def test_ctrl_c_mid_sitemaps_stops_without_reading_the_rest(
    site: Site, tmp_path: Path
) -> None:
    # Ctrl-C while a sitemap is in flight: that fetch finishes, no further sitemap is
    # fetched (was: the whole phase, politeness delays included), exit 130; the resume reads
    # them and writes each row once
    started = asyncio.Event()
    gate = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        started.set()
        await asyncio.wait_for(gate.wait(), 60)
        return web.Response(body=urlset("/m0").encode(), content_type="application/xml")

    maps = "".join(f"<sitemap><loc>/m{k}.xml</loc></sitemap>" for k in range(5))
    site.route(A, "/robots.txt", text("User-agent: *\nSitemap: /index.xml\n"))
    site.route(
        A, "/index.xml", text(f"<sitemapindex>{maps}</sitemapindex>", content_type="text/xml")
    )
    site.route(A, "/m0.xml", held)
    for k in range(1, 5):
        site.route(A, f"/m{k}.xml", text(urlset(f"/e{k}"), content_type="application/xml"))
    site.route(A, "/", links_page())
    site.fallback(A, links_page())
    out = tmp_path / "out"
    proc = await asyncio.create_subprocess_exec(
        *_cli(site, out, site.url(A, "/"), "--processes", "1"),
        cwd=REPO,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    await asyncio.wait_for(started.wait(), 30)
    proc.send_signal(signal.SIGINT)
    line = await asyncio.wait_for(proc.stderr.readline(), 30)  # the stop is seen...
    assert line.startswith(b"stopping:"), line
    gate.set()  # ... before the fetch in flight ends
    await asyncio.wait_for(proc.stderr.read(), 60)
    assert await asyncio.wait_for(proc.wait(), 60) == 130
    assert not any(h.path_qs.startswith(("/m1", "/m2", "/m3", "/m4")) for h in site.hits)
    assert not (out / "sitemaps.json").exists()
    proc = await asyncio.create_subprocess_exec(*_cli(site, out, "--resume"), cwd=REPO)
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    rows = [line.split("\t") for line in (out / "links.tsv").read_text().splitlines()[1:]]
    sm = sorted(r[1] for r in rows if r[4] == "sitemap")
    assert sm == sorted(site.url(A, p) for p in ("/m0", "/e1", "/e2", "/e3", "/e4"))


@pytest.mark.slow
async def test_processes_2_dedup_sitemaps_inlinks(site: Site, tmp_path: Path) -> None:
    served: list[str] = []
    dup_site(site, served)
    site.route(A, "/robots.txt", text("User-agent: *\nSitemap: /sm.xml\n"))
    site.route(A, "/sm.xml", text(urlset("/p1", "/from-sitemap"), content_type="text/xml"))
    site.route(A, "/from-sitemap", text("x"))
    out = tmp_path / "out"
    args = ["--dedup", "exact", "--order", "inlinks", "--processes", "2", "--scope", "any"]
    proc = await asyncio.create_subprocess_exec(
        *_cli(site, out, site.url(A, "/"), site.url(B, "/"), *args), cwd=REPO
    )
    assert await proc.wait() == 0
    recs = _records(out)
    urls = [r["url"] for r in recs]
    # each process dedups the hosts it owns: per host, one original per body at most (two
    # hosts of one process share the originals: which host holds one is a race)
    b_originals = 0
    for host in (A, B):
        html = [r for r in recs if host in r["url"] and "/p" in r["url"]]
        originals = Counter(r["sha1"] for r in html if "duplicate" not in r)
        assert set(originals.values()) <= {1}
        b_originals = len(originals)
    # /, the pages, A's /leaf and /from-sitemap (+ B's /leaf when B's pages are originals)
    assert len(urls) == len(set(urls)) == 2 * (PAGES + 1) + 2 + (b_originals > 0)
    assert site.url(A, "/from-sitemap") in urls
    warc_records(out)
