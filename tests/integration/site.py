"""A multi-host loopback test web for crawl tests (aiohttp), with an access log.

Every virtual host is served by one aiohttp server on 127.0.0.1; the crawler maps the names
to it with ``--resolve`` (``resolve`` setting) and ``resolve_only``, so no DNS query leaves.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from skitter.crawler import Crawler
from skitter.events import CrawlHooks
from skitter.settings import (
    CrawlSettings,
    FetchSettings,
    PolitenessSettings,
    QualitySettings,
    ScopeSettings,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Hit:
    """One request as the server saw it; times are time.monotonic() seconds."""

    host: str
    path_qs: str
    method: str
    start: float
    end: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> Handler:
    """A handler answering an HTML page."""

    async def h(request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=body.encode(),
            status=status,
            content_type="text/html",
            charset="utf-8",
            headers=headers,
        )

    return h


def text(body: str | bytes, status: int = 200, content_type: str = "text/plain") -> Handler:
    """A handler answering plain bytes."""

    async def h(request: web.Request) -> web.StreamResponse:
        data = body.encode() if isinstance(body, str) else body
        return web.Response(body=data, status=status, headers={"Content-Type": content_type})

    return h


def redirect(location: str, status: int = 302, headers: dict[str, str] | None = None) -> Handler:
    """A handler answering a redirect."""

    async def h(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location, **(headers or {})})

    return h


def links_page(*hrefs: str, title: str = "t") -> Handler:
    """An HTML page linking to ``hrefs``."""
    items = "".join(f'<a href="{h}">link {i}</a>\n' for i, h in enumerate(hrefs))
    return html(
        f"<!doctype html><html><head><title>{title}</title></head><body>{items}</body></html>"
    )


class Site:
    """Virtual hosts on one loopback server: ``site.route("a.test", "/x", handler)``.

    Unknown paths answer 404 (robots.txt too, unless routed: 404 = allow all).
    """

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.fallbacks: dict[str, Handler] = {}
        self.hits: list[Hit] = []
        self.inflight: dict[str, int] = {}
        self.max_inflight: dict[str, int] = {}
        self.port = 0
        self._runner: web.AppRunner | None = None

    def route(self, host: str, path_qs: str, handler: Handler) -> None:
        """Serve ``handler`` for ``host`` + path (with query, exactly as requested)."""
        self.routes[(host, path_qs)] = handler

    def fallback(self, host: str, handler: Handler) -> None:
        """Serve ``handler`` for every path of ``host`` that has no route, but /robots.txt."""
        self.fallbacks[host] = handler

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        host = request.host.rsplit(":", 1)[0].lower()
        hit = Hit(
            host, request.path_qs, request.method, time.monotonic(), headers=dict(request.headers)
        )
        self.hits.append(hit)
        self.inflight[host] = self.inflight.get(host, 0) + 1
        self.max_inflight[host] = max(self.max_inflight.get(host, 0), self.inflight[host])
        try:
            h = self.routes.get((host, request.raw_path))
            if h is None and request.raw_path != "/robots.txt":
                h = self.fallbacks.get(host)
            if h is None:
                return web.Response(status=404, text="not found", content_type="text/html")
            return await h(request)
        finally:
            self.inflight[host] -= 1
            hit.end = time.monotonic()

    async def start(self) -> None:
        """Listen on 127.0.0.1 on a free port."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()

    def url(self, host: str, path: str = "/") -> str:
        """Absolute URL of ``path`` on virtual host ``host``."""
        return f"http://{host}:{self.port}{path}"

    def hosts(self) -> set[str]:
        """Every routed host name."""
        return {h for h, _ in self.routes} | set(self.fallbacks)

    def paths(self, host: str, method: str | None = None) -> list[str]:
        """Requested paths on ``host`` in order (robots.txt included)."""
        return [
            h.path_qs
            for h in self.hits
            if h.host == host and (method is None or h.method == method)
        ]


@dataclass
class CrawlResult:
    """What a test crawl left behind."""

    out: Path
    snapshot: Any
    records: list[dict[str, Any]]
    links: list[dict[str, str]]
    report: dict[str, Any]

    def record(self, url: str) -> dict[str, Any]:
        """The pages.jsonl record whose ``url`` is ``url``."""
        found = [r for r in self.records if r["url"] == url]
        assert len(found) == 1, (url, [r["url"] for r in self.records])
        return found[0]


def settings_for(
    site: Any, out: Path, seeds: list[str], *, extra_hosts: tuple[str, ...] = (), **kw: Any
) -> CrawlSettings:
    """Test settings: every site host mapped to 127.0.0.1, --resolve-only, no delay."""
    resolve = {(h, site.port): "127.0.0.1" for h in (*site.hosts(), *extra_hosts)}
    fetch = FetchSettings(
        resolve=resolve,
        resolve_only=True,
        **{k[6:]: v for k, v in kw.items() if k.startswith("fetch_")},
    )
    pol = PolitenessSettings(
        **{"delay_s": 0.0, **{k[4:]: v for k, v in kw.items() if k.startswith("pol_")}}
    )
    scope = ScopeSettings(**{k[6:]: v for k, v in kw.items() if k.startswith("scope_")})
    # duplicates and sitemaps off unless asked for (quality_dedup=..., quality_sitemaps=...):
    # the page sets these tests check are those of a crawl without them
    quality = QualitySettings(
        **{
            "dedup": "off",
            "sitemaps": "off",
            **{k[8:]: v for k, v in kw.items() if k.startswith("quality_")},
        }
    )
    rest = {
        k: v for k, v in kw.items() if not k.startswith(("fetch_", "pol_", "scope_", "quality_"))
    }
    return CrawlSettings(
        out_dir=str(out),
        seeds=tuple(seeds),
        fetch=fetch,
        politeness=pol,
        scope=scope,
        quality=quality,
        quiet=True,
        **rest,
    )


def read_output(out: Path, snapshot: Any = None) -> CrawlResult:
    """Load pages.jsonl, links.tsv and report.json of a finished crawl."""
    records = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    lines = (out / "links.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    links = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]
    report = json.loads((out / "report.json").read_text())
    return CrawlResult(out, snapshot, records, links, report)


async def crawl(
    site: Any,
    out: Path,
    seeds: list[str],
    timeout_s: float = 60.0,
    hooks: CrawlHooks | None = None,
    **kw: Any,
) -> CrawlResult:
    """Run one crawl to completion (bounded by ``timeout_s``) and load its output.

    ``site`` is a :class:`Site` or a :class:`tests.integration.rawserver.RawServer` (anything
    with ``port`` and ``hosts()``); ``hooks`` are passed to the crawler.
    """
    settings = settings_for(site, out, seeds, **kw)
    async with Crawler.from_settings(settings, hooks) as crawler:
        snap = await asyncio.wait_for(crawler.run(), timeout=timeout_s)
    return read_output(out, snap)
