"""Duplicate pages, sitemaps and in-link order on loopback sites (issue 12, C35)."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import random
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.integration.site import Site, crawl, html, links_page, redirect, text
from tests.warc_check import warc_records

A = "www.example.test"
SM = "sm.example.test"
ELSE = "elsewhere.example.test"

_RNG = random.Random(12)
_SYL = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "da", "fo", "gu", "hi", "je"]
_VOCAB = [a + b + c for a in _SYL for b in _SYL for c in _SYL[:3]]  # 675 words, no digits
#: a page of 400 varied words (near-duplicate detection needs real text, not a repeated line)
BODY = "<p>" + " ".join(_RNG.choice(_VOCAB) for _ in range(400)) + "</p>"


def dup_page(extra: str = "", links: str = "") -> str:
    head = "<!doctype html><html><head><title>d</title></head>"
    return f"{head}<body>{extra}{BODY}{links}</body></html>"


def assert_revisits_resolve(recs: list[tuple[str, dict[str, str]]]) -> list[dict[str, str]]:
    """Every revisit names a response record by target URI and date; returns the revisits."""
    responses = {(h["WARC-Target-URI"], h["WARC-Date"]): h for t, h in recs if t == "response"}
    revisits = [h for t, h in recs if t == "revisit"]
    for h in revisits:
        key = (h["WARC-Refers-To-Target-URI"], h["WARC-Refers-To-Date"])
        assert key in responses, h
        if h["WARC-Profile"].endswith("identical-payload-digest"):
            assert h["WARC-Payload-Digest"] == responses[key]["WARC-Payload-Digest"]
    return revisits


def gzip_encoded(body: bytes, content_type: str = "text/html") -> Any:
    async def h(request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=gzip.compress(body),
            headers={"Content-Type": content_type, "Content-Encoding": "gzip"},
        )

    return h


async def test_exact_duplicates_revisits_and_gzip(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/a", "/b", "/gz", "/c"))
    copy = dup_page(links='<a href="/from-copy">x</a>')
    site.route(A, "/a", html(copy))
    site.route(A, "/b", html(copy))
    site.route(A, "/gz", gzip_encoded(copy.encode()))
    site.route(A, "/c", html(dup_page("<h1>another page</h1>")))
    site.route(A, "/from-copy", html("<p>leaf</p>"))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")], quality_dedup="exact")
    recs = {r["url"]: r for r in res.records}
    a, b, gz, c = (recs[site.url(A, p)] for p in ("/a", "/b", "/gz", "/c"))
    assert "duplicate" not in a and "duplicate" not in c
    assert (b["duplicate"], b["duplicate_of"]) == ("exact", site.url(A, "/a"))
    assert (gz["duplicate"], gz["duplicate_of"]) == ("exact", site.url(A, "/a"))
    assert a["sha1"] == b["sha1"] == gz["sha1"]
    assert "simhash" not in a  # exact mode computes no SimHash
    # a duplicate's links are recorded, not queued; the original's were
    rows = [(r["source"], r["decision"]) for r in res.links if r["target"].endswith("/from-copy")]
    assert sorted(rows) == sorted(
        [
            (site.url(A, "/a"), "queued"),
            (site.url(A, "/b"), "duplicate"),
            (site.url(A, "/gz"), "duplicate"),
        ]
    )
    assert site.paths(A).count("/from-copy") == 1
    dups = res.report["duplicates"]
    assert (dups["mode"], dups["duplicates"], dups["exact"], dups["revisits"]) == (
        "exact",
        2,
        2,
        1,
    )
    host = f"{A}:{site.port}"
    assert dups["by_host"] == {host: {"pages": 6, "duplicates": 2}}
    assert res.report["totals"]["by_decision"]["duplicate"] == 2
    recs_w = warc_records(res.out)
    revisits = assert_revisits_resolve(recs_w)
    # /b's payload is /a's byte for byte: a revisit; /gz came gzip-encoded: a full response
    assert [h["WARC-Target-URI"] for h in revisits] == [site.url(A, "/b")]
    assert revisits[0]["WARC-Refers-To-Target-URI"] == site.url(A, "/a")
    gz_types = [t for t, h in recs_w if h.get("WARC-Target-URI") == site.url(A, "/gz")]
    assert gz_types == ["request", "response"]


async def test_dedup_off_records_no_duplicates(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/a", "/b"))
    site.route(A, "/a", html(dup_page()))
    site.route(A, "/b", html(dup_page()))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")], quality_dedup="off")
    assert all("duplicate" not in r for r in res.records)
    assert res.report["duplicates"]["duplicates"] == 0
    assert [t for t, _ in warc_records(res.out)].count("revisit") == 0


async def test_near_duplicates_date_line_and_session_path(site: Site, tmp_path: Path) -> None:
    site.route(A, "/", links_page("/s/8f3a2c/doc", "/s/77b1e0/doc", "/other"))
    site.route(A, "/s/8f3a2c/doc", html(dup_page("<p>Generated 2025-10-21 07:28:00</p>")))
    site.route(A, "/s/77b1e0/doc", html(dup_page("<p>Generated 2025-10-22 09:01:13</p>")))
    other = " ".join(random.Random(99).choice(_VOCAB) for _ in range(400))
    site.route(A, "/other", html(f"<p>{other}</p>"))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")], quality_dedup="near")
    recs = {r["url"]: r for r in res.records}
    first, second = recs[site.url(A, "/s/8f3a2c/doc")], recs[site.url(A, "/s/77b1e0/doc")]
    assert (second["duplicate"], second["duplicate_of"]) == ("near", first["url"])
    assert "duplicate" not in recs[site.url(A, "/other")]
    assert all(len(r["simhash"]) == 16 for r in res.records)  # every HTML page
    assert res.report["duplicates"]["near"] == 1
    # a near duplicate keeps its full response record
    recs_w = warc_records(res.out)
    assert [t for t, h in recs_w if h.get("WARC-Target-URI") == second["url"]] == [
        "request",
        "response",
    ]


async def test_host_serving_mostly_duplicates_is_cut(site: Site, tmp_path: Path) -> None:
    D = "dups.example.test"
    pages = [f"/p{i}" for i in range(8)]
    site.route(A, "/", links_page(*[f"http://{D}:{site.port}{p}" for p in pages], "/later"))
    served = 0
    enough = asyncio.Event()

    async def dup(request: web.Request) -> web.StreamResponse:
        nonlocal served
        served += 1
        if served >= 6:
            enough.set()
        return web.Response(text=dup_page(), content_type="text/html")

    for p in pages:
        site.route(D, p, dup)

    async def later(request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(enough.wait(), 30)  # its links are decided after 6 D pages
        extra = [f"http://{D}:{site.port}/late{i}" for i in range(3)]
        return await links_page(*extra)(request)

    site.route(A, "/later", later)
    res = await crawl(
        site,
        tmp_path / "out",
        [site.url(A, "/")],
        scope_scope="any",
        quality_dedup="exact",
        quality_duplicate_ratio_min_pages=4,
        quality_max_duplicate_ratio=0.5,
    )
    late = [r for r in res.links if "/late" in r["target"] and D in r["target"]]
    assert [r["decision"] for r in late] == ["trap"] * 3
    assert not any(p.startswith("/late") for p in site.paths(D))
    trap = res.report["traps"]["duplicate_ratio"]
    assert (trap["limit"], trap["count"]) == (0.5, 3)
    assert res.report["duplicates"]["hosts_cut"] == [f"{D}:{site.port}"]


# ---------------------------------------------------------------------------- sitemaps


def xml(body: str, content_type: str = "application/xml") -> Any:
    return text(body.encode(), content_type=content_type)


def urlset(*locs: str) -> str:
    items = "".join(f"<url><loc>{u}</loc><lastmod>2025-10-21</lastmod></url>" for u in locs)
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</urlset>'


def index(*locs: str) -> str:
    items = "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in locs)
    return f'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</sitemapindex>'


BOMB = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<urlset><url><loc>http://sm.example.test/bomb/&lol3;</loc></url></urlset>"""


def sitemap_site(site: Site) -> None:
    """C35's site, plus gzip children, a text sitemap and an entity bomb."""
    base = f"http://{SM}:{site.port}"
    site.route(
        SM,
        "/robots.txt",
        text(
            "User-agent: *\nDisallow: /private/\n"
            "Sitemap: /sitemap_index.xml\n"
            f"Sitemap: {base}/robots.txt\n"
            f"sitemap:http://SM.example.test:{site.port}/sitemap_index.xml\n"
            f"Sitemap: http://{ELSE}:{site.port}/sm.xml\n"
        ),
    )
    site.route(
        SM,
        "/sitemap_index.xml",
        xml(
            index(
                f"{base}/sitemap_index.xml",
                "/sm-a.xml",
                "/sm-moved.xml",
                "/nest/1.xml",
                "/gz-plain.xml.gz",
                "/gz-encoded.xml.gz",
                "/gz-double.xml.gz",
                "/list.txt",
                "/bomb.xml",
            )
        ),
    )
    site.route(SM, "/sm-moved.xml", redirect("/sitemap_index.xml", 301))
    site.route(
        SM,
        "/sm-a.xml",
        xml(urlset("/p/1", "/p/2", "/private/secret", f"http://{ELSE}:{site.port}/x", "/p/1")),
    )
    for k in range(1, 21):
        site.route(SM, f"/nest/{k}.xml", xml(index(f"/nest/{k + 1}.xml", f"/leaf/{k}.xml")))
        site.route(SM, f"/leaf/{k}.xml", xml(urlset(f"/deep/{k}")))
    plain = urlset("/g/plain").encode()
    site.route(SM, "/gz-plain.xml.gz", text(gzip.compress(plain), content_type="application/gzip"))
    site.route(
        SM,
        "/gz-encoded.xml.gz",
        gzip_encoded(gzip.compress(urlset("/g/encoded").encode()), "application/x-gzip"),
    )
    site.route(
        SM,
        "/gz-double.xml.gz",
        text(
            gzip.compress(gzip.compress(urlset("/g/double").encode())),
            content_type="application/gzip",
        ),
    )
    site.route(SM, "/list.txt", text(f"{base}/t/1\n\n{base}/t/2\n"))
    site.route(SM, "/bomb.xml", xml(BOMB))
    site.fallback(SM, html("<p>a page</p>"))
    site.route(ELSE, "/sm.xml", xml(urlset(f"http://{ELSE}:{site.port}/y")))


async def test_sitemaps_c35_graph_loops_nesting_gzip_text_and_bomb(
    site: Site, tmp_path: Path
) -> None:
    sitemap_site(site)
    res = await crawl(
        site,
        tmp_path / "out",
        [site.url(SM, "/")],
        quality_sitemaps="robots",
        quality_max_sitemap_depth=5,
        extra_hosts=(ELSE,),
    )
    paths = site.paths(SM)
    assert paths.count("/robots.txt") <= 2
    assert paths.count("/sitemap_index.xml") == 1
    assert paths.count("/sm-moved.xml") <= 1
    # index levels: sitemap_index 0, nest/K at K; children of a level-5 index are cut
    assert sorted(int(p[6:-4]) for p in paths if p.startswith("/nest/")) == [1, 2, 3, 4, 5]
    assert sorted(int(p[6:-4]) for p in paths if p.startswith("/leaf/")) == [1, 2, 3, 4]
    assert sorted(int(p[6:]) for p in paths if p.startswith("/deep/")) == [1, 2, 3, 4]
    assert site.paths(ELSE) == []
    assert "/private/secret" not in paths
    for p in ("/p/1", "/p/2", "/g/plain", "/g/encoded", "/g/double", "/t/1", "/t/2"):
        assert paths.count(p) == 1, (p, paths)
    assert not any(p.startswith("/bomb/") for p in paths)
    rows = [r for r in res.links if r["kind"] == "sitemap"]
    by_target = {}
    for r in rows:
        by_target.setdefault(r["target"], []).append(r)
    p1 = by_target[site.url(SM, "/p/1")]
    assert [(r["source"], r["decision"]) for r in p1] == [
        (site.url(SM, "/sm-a.xml"), "queued"),
        (site.url(SM, "/sm-a.xml"), "seen"),
    ]
    assert p1[0]["anchor"] == "2025-10-21"  # lastmod
    assert [r["decision"] for r in by_target[f"http://{ELSE}:{site.port}/x"]] == ["scope"]
    recs = {r["url"]: r for r in res.records}
    assert recs[site.url(SM, "/p/1")]["depth"] == 1
    assert not any("sitemap" in u or u.endswith(".xml") or u.endswith(".gz") for u in recs)
    sm = res.report["sitemaps"]
    assert sm["mode"] == "robots"
    assert sm["out_of_scope"] == 2  # elsewhere's sitemap and elsewhere/x
    assert sm["robots_disallowed"] == 1
    assert sm["cut"] == 2  # nest/6 and leaf/5
    assert sm["errors"] == 1  # the bomb
    assert sm["loops"] >= 3  # self-listing, other spelling, redirect back
    assert sm["read"] == 1 + 1 + 5 + 4 + 3 + 1 + 1 + 1  # robots.txt read as a sitemap too
    # sitemap fetches are archived like robots.txt
    uris = {h.get("WARC-Target-URI") for t, h in warc_records(res.out) if t == "response"}
    assert site.url(SM, "/sitemap_index.xml") in uris
    assert res.report["finished"] is True


async def test_sitemaps_only_follows_no_page_links(site: Site, tmp_path: Path) -> None:
    site.route(A, "/robots.txt", text("User-agent: *\nSitemap: /sm.xml\n"))
    site.route(A, "/sm.xml", xml(urlset("/in-sitemap")))
    site.route(A, "/", links_page("/linked"))
    site.route(A, "/in-sitemap", links_page("/linked-too"))
    res = await crawl(site, tmp_path / "out", [site.url(A, "/")], quality_sitemaps="only")
    assert sorted(r["url"] for r in res.records) == [site.url(A, "/"), site.url(A, "/in-sitemap")]
    assert {r["decision"] for r in res.links if r["kind"] == "a"} == {"scope"}


async def test_sitemap_fetches_keep_the_politeness_delay(site: Site, tmp_path: Path) -> None:
    site.route(A, "/robots.txt", text("User-agent: *\nSitemap: /sm1.xml\nSitemap: /sm2.xml\n"))
    site.route(A, "/sm1.xml", xml(urlset("/a")))
    site.route(A, "/sm2.xml", xml(urlset("/b")))
    site.route(A, "/", html("<p>seed</p>"))
    await crawl(
        site, tmp_path / "out", [site.url(A, "/")], quality_sitemaps="robots", pol_delay_s=0.2
    )
    hits = sorted((h for h in site.hits if h.host == A), key=lambda h: h.start)
    assert [h.path_qs for h in hits][:3] == ["/robots.txt", "/sm1.xml", "/sm2.xml"]
    for prev, nxt in itertools.pairwise(hits):
        assert nxt.start - prev.end >= 0.2 - 0.01, [(h.path_qs, h.start, h.end) for h in hits]


# ---------------------------------------------------------------------------- order


async def test_inlinks_order_most_linked_first(site: Site, tmp_path: Path) -> None:
    T = "target.example.test"
    hosts = ["h1.example.test", "h2.example.test", "h3.example.test"]
    tgt = [f"http://{T}:{site.port}/{p}" for p in ("a", "b", "c")]
    links = {hosts[0]: tgt, hosts[1]: tgt[1:], hosts[2]: tgt[2:]}
    nexts: set[str] = set()
    ready = asyncio.Event()

    def next_page(h: str) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            nexts.add(h)
            if len(nexts) == len(hosts):
                ready.set()
            return web.Response(text="<p>next</p>", content_type="text/html")

        return handler

    for h in hosts:
        site.route(h, "/", links_page(*links[h], "/next"))
        site.route(h, "/next", next_page(h))

    async def robots(request: web.Request) -> web.StreamResponse:
        # every h page's links are decided before the target host is fetched
        await asyncio.wait_for(ready.wait(), 30)
        return web.Response(status=404)

    site.route(T, "/robots.txt", robots)
    site.route(T, "/", links_page("/a", "/b", "/c"))
    for p in ("/a", "/b", "/c"):
        site.route(T, p, html("<p>t</p>"))
    seeds = [site.url(h, "/") for h in hosts] + [site.url(T, "/")]
    for order, expected in (("inlinks", ["/c", "/b", "/a"]), ("bfs", ["/a", "/b", "/c"])):
        site.hits.clear()
        nexts.clear()
        ready.clear()
        await crawl(site, tmp_path / order, seeds, scope_scope="any", quality_order=order)
        got = [p for p in site.paths(T) if p in ("/a", "/b", "/c")]
        assert got == expected, order


async def test_sitemaps_of_several_hosts_are_read_in_parallel(site: Site, tmp_path: Path) -> None:
    hosts = ["s1.example.test", "s2.example.test"]
    arrived: set[str] = set()
    both = asyncio.Event()

    def sitemap(host: str) -> Any:
        async def h(request: web.Request) -> web.StreamResponse:
            arrived.add(host)
            if len(arrived) == len(hosts):
                both.set()
            # answers only once the other host's sitemap is asked for too (bounded)
            await asyncio.wait_for(both.wait(), 20)
            return web.Response(text=urlset(f"/from-{host}"), content_type="application/xml")

        return h

    for h in hosts:
        site.route(h, "/robots.txt", text("User-agent: *\nSitemap: /sm.xml\n"))
        site.route(h, "/sm.xml", sitemap(h))
        site.route(h, "/", html("<p>seed</p>"))
        site.route(h, f"/from-{h}", html("<p>entry</p>"))
    res = await crawl(
        site, tmp_path / "out", [site.url(h, "/") for h in hosts], quality_sitemaps="robots"
    )
    assert sorted(r["url"] for r in res.records) == sorted(
        [site.url(h, "/") for h in hosts] + [site.url(h, f"/from-{h}") for h in hosts]
    )
    assert res.report["sitemaps"]["read"] == 2 and res.report["sitemaps"]["errors"] == 0
