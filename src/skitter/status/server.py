"""The live status web server of a crawl (``--status-port``), on aiohttp.

Routes: ``/`` the live page (HTML; its script and style are served by this server at
``/static/``, nothing from a CDN), ``/metrics`` (Prometheus text format 0.0.4), ``/api/status``
(headline totals, breakdowns and a time series, JSON), ``/api/hosts`` (a sorted, filtered page of
the per-host table, JSON), ``/healthz``.

DNS rebinding (a page of another site re-pointing its name at 127.0.0.1) is refused: a request
is answered only when its Host header names this server by an IP literal, ``localhost`` or the
name it was bound to, with its port; otherwise 421 Misdirected Request (RFC 9110 §15.5.20).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ipaddress
import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web

from skitter import __version__
from skitter.status.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from skitter.status.source import HOST_FIELDS, HostRow, StatusSource

__all__ = [
    "MAX_PER_PAGE",
    "ServerThread",
    "StatusServer",
    "check_page",
    "host_page",
    "page_of",
    "sort_hosts",
]

#: The largest ``per_page`` of ``/api/hosts``.
MAX_PER_PAGE = 1000
#: Samples of the time series kept (one a ``sample_s``: an hour at 1 s).
MAX_SAMPLES = 3600

_STATIC = {"status.js": "application/javascript", "status.css": "text/css"}
_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
}


class BadQuery(ValueError):
    """A malformed ``/api/hosts`` query parameter (answered 400)."""


def host_page(
    rows: list[HostRow],
    sort: str = "fetched",
    order: str = "desc",
    q: str = "",
    page: int = 1,
    per_page: int = 50,
) -> dict[str, Any]:
    """One page of the host table: rows whose host contains ``q`` (case-insensitive), sorted by
    ``sort`` (a :data:`~skitter.status.source.HOST_FIELDS` name; ties by host), ``order``
    ``asc``/``desc``, page ``page`` (1-based) of ``per_page`` (1..:data:`MAX_PER_PAGE`) rows.

    Returns ``{"total", "hosts_total", "page", "pages", "per_page", "sort", "order", "q",
    "rows"}``; ``total`` counts the matching rows.

    Raises:
        BadQuery: unknown sort field or order, page < 1, per_page out of range.
    """
    check_page(page, per_page)
    return page_of(sort_hosts(rows, sort, order, q), len(rows), sort, order, q, page, per_page)


def check_page(page: int, per_page: int) -> None:
    """Raises :class:`BadQuery` when ``page`` < 1 or ``per_page`` is out of range."""
    if page < 1:
        raise BadQuery("page starts at 1")
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise BadQuery(f"per_page must be 1..{MAX_PER_PAGE}")


def sort_hosts(rows: list[HostRow], sort: str, order: str, q: str) -> list[HostRow]:
    """The rows whose host contains ``q``, in the order of :func:`host_page` (absent values
    last, ties by host).

    Raises:
        BadQuery: unknown sort field or order.
    """
    if sort not in HOST_FIELDS:
        raise BadQuery(f"sort must be one of {', '.join(HOST_FIELDS)}")
    if order not in ("asc", "desc"):
        raise BadQuery("order must be asc or desc")
    needle = q.strip().lower()
    if needle:
        rows = [r for r in rows if needle in r.host]
    present = [r for r in rows if getattr(r, sort) is not None]
    present.sort(key=lambda r: r.host)  # ties: hosts a-z (the sorts below are stable)
    present.sort(key=lambda r: getattr(r, sort), reverse=order == "desc")
    return present + sorted((r for r in rows if getattr(r, sort) is None), key=lambda r: r.host)


def page_of(
    rows: list[HostRow],
    hosts_total: int,
    sort: str,
    order: str,
    q: str,
    page: int,
    per_page: int,
    loading: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The :func:`host_page` answer for ``rows`` already filtered and sorted; ``loading``
    (``{"read": N, "of": M}`` hosts) when the table is still being read (``complete``
    false), None when it is whole."""
    total = len(rows)
    start = (page - 1) * per_page
    return {
        "total": total,
        "hosts_total": hosts_total,
        "page": page,
        "pages": max(1, math.ceil(total / per_page)),
        "per_page": per_page,
        "sort": sort,
        "order": order,
        "q": q,
        "rows": [r.to_dict() for r in rows[start : start + per_page]],
        "complete": loading is None,
        "hosts_loading": loading,
    }


class StatusServer:
    """Serves a :class:`~skitter.status.source.StatusSource` over HTTP while a crawl runs.

    Args:
        source: where the figures come from.
        host: address to bind (``127.0.0.1`` by default; ``::1``, ``0.0.0.0``... accepted).
        port: TCP port; 0 picks a free one (see :attr:`url` after :meth:`start`).
        sample_s: seconds between two samples of the pages/s and errors time series.
        title: shown in the page's heading (the output folder, say).

    Use ``await start()`` / ``await stop()``, or ``async with``.
    """

    def __init__(
        self,
        source: StatusSource,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        sample_s: float = 1.0,
        title: str = "",
    ) -> None:
        self.source = source
        self.host = host
        self.port = port
        self.sample_s = sample_s
        self.title = title
        self.series: deque[tuple[float, int, int]] = deque(maxlen=MAX_SAMPLES)
        self._runner: web.AppRunner | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._allowed: set[str] = set()

    @property
    def url(self) -> str:
        """``http://host:port/`` of the running server (IPv6 literals in brackets)."""
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{h}:{self.port}/"

    # ------------------------------------------------------------------ life cycle

    def app(self) -> web.Application:
        """The aiohttp application (routes and the Host-header check)."""
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/api/status", self._status)
        app.router.add_get("/api/hosts", self._hosts)
        app.router.add_get("/healthz", self._healthz)
        return app

    async def start(self) -> str:
        """Bind and serve; returns :attr:`url`.

        Raises:
            OSError: the address cannot be bound (in use, not local...).
        """
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            self._runner = None
            raise
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])
        self._allowed = {f"localhost:{self.port}", f"{self.host.lower()}:{self.port}"}
        await self._sample()
        self._sampler = asyncio.get_running_loop().create_task(self._sample_loop())
        return self.url

    async def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
            self._sampler = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> StatusServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def write_url(self, out_dir: str | Path) -> None:
        """Write :attr:`url` and a newline to ``OUT/status.url`` (atomically).

        Raises:
            OSError: the folder cannot be written.
        """
        target = Path(out_dir) / "status.url"
        tmp = target.with_name(".status.url.tmp")
        tmp.write_text(self.url + "\n", encoding="utf-8")
        tmp.replace(target)

    async def _sample(self) -> None:
        t = await self.source.totals()
        self.series.append((time.time(), t.fetched, t.errors))

    async def _sample_loop(self) -> None:
        while True:
            await asyncio.sleep(self.sample_s)
            with contextlib.suppress(Exception):  # a failing source must not stop the crawl
                await self._sample()

    # ------------------------------------------------------------------ handlers

    def _host_ok(self, header: str | None) -> bool:
        if not header:
            return False
        h = header.strip().lower()
        if h in self._allowed:
            return True
        name, sep, port = h.rpartition(":")
        if not sep or port != str(self.port):
            return False
        if name.startswith("[") and name.endswith("]"):
            name = name[1:-1]
        try:
            ipaddress.ip_address(name)  # an IP literal cannot be re-pointed by DNS
        except ValueError:
            return False
        return True

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not self._host_ok(request.headers.get("Host")):
            return web.Response(
                status=421, text="misdirected request: unknown Host\n", headers=_HEADERS
            )
        resp = await handler(request)
        resp.headers.update(_HEADERS)
        return resp

    async def _index(self, request: web.Request) -> web.Response:
        html = _read_static("status.html").replace("{{title}}", _escape(self.title or "crawl"))
        return web.Response(text=html.replace("{{version}}", __version__), content_type="text/html")

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise web.HTTPNotFound()
        return web.Response(text=_read_static(name), content_type=_STATIC[name])

    async def _metrics(self, request: web.Request) -> web.Response:
        body = await self.source.metrics_text()
        return web.Response(
            body=body.encode("utf-8"), headers={"Content-Type": METRICS_CONTENT_TYPE}
        )

    async def _status(self, request: web.Request) -> web.Response:
        t = await self.source.totals()
        now = time.time()
        series = list(self.series)
        minute = [s for s in series if s[0] >= now - 60]
        rate = 0.0
        if len(minute) >= 2 and minute[-1][0] > minute[0][0]:
            rate = (minute[-1][1] - minute[0][1]) / (minute[-1][0] - minute[0][0])
        remaining = None
        if t.target is not None and rate > 0:
            remaining = max(0.0, (t.target - t.fetched) / rate)
        body = {
            "version": __version__,
            "title": self.title,
            "now": round(now, 3),
            "totals": t.to_dict(),
            "pages_per_s_1m": round(rate, 3),
            "remaining_s": None if remaining is None else round(remaining, 1),
            "series": _rates(series),
        }
        return _json(body)

    async def _hosts(self, request: web.Request) -> web.Response:
        q = request.query
        # a source that pages itself (ClusterSource: rows cached, refreshed by changes)
        pager = getattr(self.source, "host_page", None)
        try:
            args = (
                q.get("sort", "fetched"),
                q.get("order", "desc"),
                q.get("q", ""),
                _int(q.get("page", "1"), "page"),
                _int(q.get("per_page", "50"), "per_page"),
            )
            if pager is not None:
                page: dict[str, Any] = await pager(*args)
            else:
                page = host_page(list(self.source.hosts()), *args)
        except BadQuery as exc:
            return _json({"error": str(exc)}, status=400)
        return _json(page)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")


def _rates(series: list[tuple[float, int, int]], points: int = 360) -> list[list[float]]:
    """``[[unix_s, pages_per_s, errors_per_s], ...]`` between samples: consecutive ones, or
    every k-th when there are more than ``points`` (the rate averaged over k samples)."""
    step = max(1, -(-(len(series) - 1) // points))
    if step > 1:
        series = series[(len(series) - 1) % step :: step]
    out = []
    for (t0, p0, e0), (t1, p1, e1) in itertools.pairwise(series):
        dt = t1 - t0
        if dt > 0:
            out.append([round(t1, 3), round((p1 - p0) / dt, 3), round((e1 - e0) / dt, 3)])
    return out


def _int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise BadQuery(f"{name} must be an integer") from None


def _json(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(body, separators=(",", ":")), status=status, content_type="application/json"
    )


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _read_static(name: str) -> str:
    return resources.files("skitter.status").joinpath("static", name).read_text(encoding="utf-8")


class ServerThread:
    """Runs a :class:`StatusServer` on an event loop of its own in a daemon thread, for a
    caller that blocks (the ``--processes`` coordinator). ``start()`` returns the URL or raises
    what binding raised; ``stop()`` is idempotent."""

    def __init__(self, server: StatusServer) -> None:
        self.server = server
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Start serving; returns :attr:`StatusServer.url`.

        Raises:
            OSError: the address cannot be bound.
        """
        loop = asyncio.new_event_loop()
        started: concurrent.futures.Future[str] = concurrent.futures.Future()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                started.set_result(loop.run_until_complete(self.server.start()))
            except BaseException as exc:
                started.set_exception(exc)
                loop.close()
                return
            loop.run_forever()
            loop.run_until_complete(self.server.stop())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="skitter-status", daemon=True)
        self._thread.start()
        try:
            return started.result(timeout=30)
        except BaseException:
            self._thread.join(timeout=30)
            self._thread = None
            raise

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._thread = None
