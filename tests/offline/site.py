"""The small site the offline tests archive and crawl: ``http://www.example.test/``.

Served by :class:`tests.integration.site.Site` on loopback; wget and the crawler reach it
through ``http_proxy`` / ``--proxy`` (absolute-form requests, no name looked up).
"""

from __future__ import annotations

import gzip

from aiohttp import web

from tests.integration.site import Site, html, redirect, text

HOST = "www.example.test"
ROOT = f"http://{HOST}/"

PAGES: dict[str, str] = {
    "/": (
        "<!doctype html><title>Home</title>"
        '<a href="/a">A page</a> <a href="b#top">B  page</a> '
        '<a rel="nofollow" href="http://other.test/x">elsewhere</a> '
        '<a href="/chunked">chunked</a> <a href="/gz">gzip</a> <a href="/old">old</a> '
        '<a href="mailto:x@example.test">mail</a> <img src="/logo.png">'
    ),
    "/a": '<!doctype html><a href="/">home</a><a href="/b?x=1&amp;y=2">b with query</a>',
    "/b": '<!doctype html><base href="/sub/"><a href="c">relative c</a>',
    "/sub/c": '<!doctype html><meta name="robots" content="nofollow"><a href="/a">a</a>',
    "/chunked": '<!doctype html><a href="/a">from chunked</a><a href="/b">b</a>',
    "/gz": '<!doctype html><a href="/sub/c">from gzip</a>',
}


def _chunked(body: str):  # type: ignore[no-untyped-def]
    async def h(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        data = body.encode()
        for i in range(0, len(data), 20):
            await resp.write(data[i : i + 20])
        await resp.write_eof()
        return resp

    return h


def _gzipped(body: str):  # type: ignore[no-untyped-def]
    async def h(request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=gzip.compress(body.encode()),
            headers={"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"},
        )

    return h


def build_site() -> ProxySite:
    """The site (not started)."""
    s = ProxySite()
    for path, body in PAGES.items():
        if path == "/chunked":
            s.route(HOST, path, _chunked(body))
        elif path == "/gz":
            s.route(HOST, path, _gzipped(body))
        else:
            s.route(HOST, path, html(body))
    s.route(HOST, "/old", redirect("/a#moved", 301))
    s.route(HOST, "/logo.png", text(b"\x89PNG\r\n\x1a\n", content_type="image/png"))
    return s


class ProxySite(Site):
    """A :class:`Site` that also answers absolute-form requests (as an HTTP proxy gets)."""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = request.raw_path
        if raw.startswith(("http://", "https://")):
            from yarl import URL

            url = URL(raw, encoded=True)
            headers = {**request.headers, "Host": url.host or ""}
            request = request.clone(rel_url=url.relative(), headers=headers)
        return await super()._handle(request)
