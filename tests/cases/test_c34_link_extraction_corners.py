"""C34 — link extraction corners: SVG links and images, comment edge cases, unquoted values,
``ping``, ``template``; and ``check-links --check-resources`` checking SVG images and media.
"""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp import web

from tests.cases._util import WWW, requested, run
from tests.integration.site import Site, text
from tests.integration.test_check_links import run_cli

PAGE = (
    """<!doctype html><html><body>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" \
width="10" height="10">
  <a xlink:href="/svg/xlink.html"><text>one</text></a>
  <a href="/svg/svg2.html"><text>two</text></a>
  <a href="/svg/new.html" xlink:href="/svg/old.html"><text>three</text></a>
  <image href="/img/chart.png" width="5" height="5"/>
  <image xlink:href="/img/legacy.png" width="5" height="5"/>
  <use href="/icons.svg#star"/>
</svg>
<a name="only-name">no href</a>
<a ping="/track/p1">ping only</a>
<a href="/with-ping" ping="/track/p2">with ping</a>
<!--><a href="/after-abrupt-empty">A</a>
<!---><a href="/after-abrupt-dash">B</a>
<!-- x --!><a href="/after-bang-close">C</a>
<!-- a -- b --><a href="/after-double-dash">D</a>
<a href=/unquoted/path?x=1&y=2>E</a>
<template><a href="/in-template">T</a></template>
<![CDATA[<a href="/in-cdata">X</a>]]>
<a href="/very-long?q="""
    + "x" * 100_000
    + """">L</a>
<map name="m"><area href="/area.html" alt="area"></map>
<a href="/before-unclosed">F</a>
<!-- unclosed <a href="/in-unclosed-comment">G</a>
"""
)

LINKS = [
    "/svg/xlink.html",
    "/svg/svg2.html",
    "/svg/new.html",
    "/with-ping",
    "/after-abrupt-empty",
    "/after-abrupt-dash",
    "/after-bang-close",
    "/after-double-dash",
    "/unquoted/path?x=1&y=2",
    "/very-long",
    "/area.html",
    "/before-unclosed",
]
NEVER = [
    "/svg/old.html",
    "/track/p1",
    "/track/p2",
    "/in-template",
    "/in-cdata",
    "/in-unclosed-comment",
]


def serve(site: Site) -> None:
    async def page(request: web.Request) -> web.StreamResponse:
        return web.Response(text=PAGE, content_type="text/html")

    async def ok(request: web.Request) -> web.StreamResponse:
        return web.Response(text="<p>ok</p>", content_type="text/html")

    site.route(WWW, "/x/page.html", page)
    site.route(WWW, "/img/legacy.png", text(b"gone", status=404, content_type="text/html"))
    site.fallback(WWW, ok)


async def test_c34_link_extraction_corners(site: Site, tmp_path: Path) -> None:
    serve(site)
    seed = site.url(WWW, "/x/page.html")
    res = await run(site, tmp_path / "out", [seed], scope_max_depth=1)
    rows = [r for r in res.links if r["source"] == seed]
    got = [(r["target"].split("?q=x")[0].removeprefix(site.url(WWW, "")), r["kind"]) for r in rows]
    assert got == [(p, "area" if p == "/area.html" else "a") for p in LINKS]
    long_row = rows[LINKS.index("/very-long")]
    assert long_row["decision"] == "url_length"
    fetched = requested(site, WWW)
    for path in [*NEVER, "/very-long"]:
        assert not [p for p in fetched if p.startswith(path)], path
    for path in LINKS:
        if path != "/very-long":
            assert path in fetched, path


async def test_c34_check_resources_reads_svg_images(site: Site, tmp_path: Path) -> None:
    serve(site)
    seed = site.url(WWW, "/x/page.html")
    code, out, err = await run_cli(
        site.port,
        site.hosts(),
        seed,
        "--check-resources",
        "--max-depth",
        "0",
        "--format",
        "json",
        "--out",
        str(tmp_path / "check"),
    )
    assert code == 1, err
    report = json.loads(out)
    assert [b["url"] for b in report["broken"]] == [site.url(WWW, "/img/legacy.png")]
    assert report["broken"][0]["status"] == 404
    links = (tmp_path / "check" / "links.tsv").read_text().splitlines()
    img_rows = [ln.split("\t") for ln in links if ln.split("\t")[4:5] == ["img"]]
    assert [r[1] for r in img_rows] == [
        site.url(WWW, "/img/chart.png"),
        site.url(WWW, "/img/legacy.png"),
        site.url(WWW, "/icons.svg"),
    ]
    for path in ("/img/chart.png", "/img/legacy.png", "/icons.svg"):
        assert path in site.paths(WWW), path
