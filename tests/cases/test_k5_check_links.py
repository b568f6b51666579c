"""Kind 5 of issue 10 — link checking, from a run against LinkChecker's own test data.

``--check-resources`` checks media (``<video src>``, ``<video poster>``, ``<audio src>``,
``<source src>``, ``<track src>``: links.tsv kind ``media``) and SVG ``<image href>`` /
``<use href>`` (kind ``img``).
"""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp import web

from tests.cases._util import WWW
from tests.integration.site import Site, text
from tests.integration.test_check_links import run_cli

MEDIA_PAGE = """<!doctype html><html><body>
<video src="/m/clip.mp4" poster="/m/poster.jpg">
  <source src="/m/clip.webm" type="video/webm">
  <track src="/m/subs.vtt" kind="subtitles">
</video>
<audio src="/m/gone.mp3"></audio>
<svg><image href="/m/chart.png"/><use xlink:href="/m/icons.svg#star"/></svg>
</body></html>"""


async def test_k5_check_resources_checks_media_and_svg_images(site: Site, tmp_path: Path) -> None:
    async def page(request: web.Request) -> web.StreamResponse:
        return web.Response(text=MEDIA_PAGE, content_type="text/html")

    site.route(WWW, "/", page)
    for path in (
        "/m/clip.mp4",
        "/m/poster.jpg",
        "/m/clip.webm",
        "/m/subs.vtt",
        "/m/chart.png",
        "/m/icons.svg",
    ):
        site.route(WWW, path, text(b"bytes", content_type="application/octet-stream"))
    site.route(WWW, "/m/gone.mp3", text(b"no", status=404))
    code, out, err = await run_cli(
        site.port,
        site.hosts(),
        site.url(WWW, "/"),
        "--check-resources",
        "--format",
        "json",
        "--out",
        str(tmp_path / "check"),
    )
    assert code == 1, err
    report = json.loads(out)
    assert [(b["url"], b["status"]) for b in report["broken"]] == [
        (site.url(WWW, "/m/gone.mp3"), 404)
    ]
    assert report["summary"]["ok"] == 7  # the page and six resources
    rows = [ln.split("\t") for ln in (tmp_path / "check" / "links.tsv").read_text().splitlines()]
    kinds = [(r[1].removeprefix(site.url(WWW, "")), r[4]) for r in rows[1:]]
    assert kinds == [
        ("/m/clip.mp4", "media"),
        ("/m/poster.jpg", "media"),
        ("/m/clip.webm", "media"),
        ("/m/subs.vtt", "media"),
        ("/m/gone.mp3", "media"),
        ("/m/chart.png", "img"),
        ("/m/icons.svg", "img"),
    ]
    for path in (
        "/m/clip.mp4",
        "/m/poster.jpg",
        "/m/clip.webm",
        "/m/subs.vtt",
        "/m/gone.mp3",
        "/m/chart.png",
        "/m/icons.svg",
    ):
        assert path in site.paths(WWW), path


async def test_k5_start_url_refused_by_robots_is_excluded(site: Site, tmp_path: Path) -> None:
    site.route(WWW, "/robots.txt", text("User-agent: *\nDisallow: /private/\n"))
    site.route(WWW, "/private/start", text(b"<p>never</p>", content_type="text/html"))
    site.route(WWW, "/open", text(b"<p>fine</p>", content_type="text/html"))
    refused = site.url(WWW, "/private/start")
    # the only start URL refused: reported as excluded (robots.txt), exit 4
    code, out, err = await run_cli(site.port, site.hosts(), refused, "--format", "json")
    report = json.loads(out)
    assert code == 4, err
    assert report["summary"] == {
        "checked": 0,
        "ok": 0,
        "broken": 0,
        "unverified": 0,
        "redirected": 0,
        "excluded": 1,
    }
    assert f"start URL got no HTTP response: {refused}" in err
    code, out, err = await run_cli(site.port, site.hosts(), refused)
    assert code == 4 and "1 excluded (robots.txt 1)" in out, (out, err)
    # one start URL refused, another fine: the refused one is excluded, the check goes on
    code, out, err = await run_cli(
        site.port, site.hosts(), refused, site.url(WWW, "/open"), "--format", "json"
    )
    report = json.loads(out)
    assert code == 0, err
    assert report["summary"]["ok"] == 1 and report["summary"]["excluded"] == 1
    assert "/private/start" not in site.paths(WWW)
