"""Kind 4 of issue 10 — fragments are checked wherever they point.

``other-site/page#id`` is broken when that page has no such id: the page is fetched with GET
once per URL (up to ``--max-body``; ``unverified`` when the id may lie past the cut), its ids
parsed and kept with its verdict for the ``--cache-age`` cache. Text fragments
(``#:~:text=``) are never broken.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp import web

from tests.integration.site import Site, html
from tests.integration.test_check_links import run_cli

W = "www.example.test"
EXT = "ext.example.test"
DOC = '<!doctype html><h1 id="intro">Intro</h1><a name="old">old</a><p>hello world</p>'
BIG = '<!doctype html><p id="early">e</p>' + "<p>filler text</p>" * 400 + '<p id="deep">d</p>'


async def test_k4_fragments_of_external_pages(site: Site, tmp_path: Path) -> None:
    hrefs = [
        "/doc#intro",
        "/doc#old",
        "/doc#nosuch",
        "/doc#:~:text=hello",
        "/doc#:~:text=not%20there",
        "/big#early",
        "/big#deep",
        "/plain",
    ]
    links = "".join(f'<a href="{site.url(EXT, h)}">{h}</a>' for h in hrefs)
    site.route(W, "/", html(f"<!doctype html>{links}"))
    site.route(EXT, "/doc", html(DOC))
    site.route(EXT, "/big", html(BIG))
    site.route(EXT, "/plain", html("<p>no fragment asked</p>"))
    out = tmp_path / "check"
    args = ("--format", "json", "--out", str(out), "--max-body", "2000")
    code, text, err = await run_cli(site.port, site.hosts(), site.url(W, "/"), *args)
    report = json.loads(text)
    assert code == 1, err
    broken = [(b["url"], b["error"]) for b in report["broken"]]
    assert broken == [(site.url(EXT, "/doc#nosuch"), "missing_fragment")]
    unverified = [(u["url"], u["error"]) for u in report["unverified"]]
    assert unverified == [(site.url(EXT, "/big#deep"), "fragment_unverified")]
    # each page read once, with GET (a HEAD gives no ids); a page without fragments: HEAD
    assert [h.method for h in site.hits if h.host == EXT and h.path_qs == "/doc"] == ["GET"]
    assert [h.method for h in site.hits if h.host == EXT and h.path_qs == "/big"] == ["GET"]
    assert [h.method for h in site.hits if h.host == EXT and h.path_qs == "/plain"] == ["HEAD"]

    # a second check in the folder reuses the verdicts and the ids: no request to EXT pages
    before = len(site.hits)
    code, text, err = await run_cli(site.port, site.hosts(), site.url(W, "/"), *args)
    again = json.loads(text)
    assert code == 1, err
    assert [(b["url"], b["error"]) for b in again["broken"]] == broken
    assert [(u["url"], u["error"]) for u in again["unverified"]] == unverified
    later = [h.path_qs for h in site.hits[before:] if h.host == EXT]
    assert later in ([], ["/robots.txt"]), later


async def test_k4_fragment_link_seen_after_the_page_was_checked(site: Site, tmp_path: Path) -> None:
    """The page is first linked without a fragment (checked with HEAD), then, on a page
    crawled after that check, with one: it is read once more, with GET, for its ids."""
    checked = asyncio.Event()
    doc = html(DOC)

    async def ext_doc(request: web.Request) -> web.StreamResponse:
        checked.set()
        return await doc(request)

    later = html(f'<a href="{site.url(EXT, "/doc#nosuch")}">late</a>')

    async def second(request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(checked.wait(), 30)  # served only once /doc was checked
        return await later(request)

    site.route(W, "/", html(f'<a href="{site.url(EXT, "/doc")}">d</a><a href="/second">s</a>'))
    site.route(W, "/second", second)
    site.route(EXT, "/doc", ext_doc)
    code, text, err = await run_cli(site.port, site.hosts(), site.url(W, "/"), "--format", "json")
    report = json.loads(text)
    assert code == 1, err
    assert [(b["url"], b["error"]) for b in report["broken"]] == [
        (site.url(EXT, "/doc#nosuch"), "missing_fragment")
    ]
    assert [h.method for h in site.hits if h.host == EXT and h.path_qs == "/doc"] == [
        "HEAD",
        "GET",
    ]
