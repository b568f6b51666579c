"""Walking the sitemap graph of a crawl: fetch, follow redirects, parse, expand indexes.

:class:`SitemapReader` is given two callables by the crawler -- ``fetch(url)`` (one GET,
no redirects followed, politeness and WARC archiving done by the caller, None on a fetch
error) and ``allowed(url)`` (robots.txt) -- and yields the page URLs listed by the sitemaps
reachable from its roots, each sitemap file read once (:class:`skitter.sitemaps.SitemapGraph`).

Roots (see :func:`sitemap_roots`): the ``Sitemap:`` lines of the seed hosts' robots.txt
(relative values joined against the robots.txt URL, as lenient readers do), ``/sitemap.xml``
of each seed origin with ``--sitemaps also``, and the ``--sitemap`` URLs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence

from skitter import urls
from skitter.models import Response
from skitter.redirects import location_target
from skitter.settings import QualitySettings
from skitter.sitemaps import SitemapEntry, SitemapGraph, SitemapStats, parse_sitemap

__all__ = ["MAX_SITEMAP_REDIRECTS", "SitemapReader", "sitemap_roots"]

#: Redirect hops followed for one sitemap URL.
MAX_SITEMAP_REDIRECTS = 5

FetchFn = Callable[[str], Awaitable[Response | None]]
AllowedFn = Callable[[str], Awaitable[bool]]


def sitemap_roots(
    settings: QualitySettings,
    seed_origins: Iterable[str],
    robots_sitemaps: Callable[[str], Sequence[tuple[str, str]]],
) -> list[str]:
    """The root sitemap URLs of a crawl, in order, not deduplicated (the graph does that):
    the seed origins' robots.txt ``Sitemap`` values (and ``/sitemap.xml`` with ``also``)
    unless ``sitemaps`` is ``off``, then the ``--sitemap`` URLs (read whatever the mode).

    Args:
        settings: ``sitemaps`` mode and ``sitemap_urls``.
        seed_origins: ``scheme://host[:port]`` of the seeds.
        robots_sitemaps: for an origin, its robots.txt ``Sitemap`` values with the URL the
            robots.txt was read from: ``[(value, robots_url), ...]``.
    """
    roots: list[str] = []
    for org in seed_origins if settings.sitemaps != "off" else ():
        for value, robots_url in robots_sitemaps(org):
            joined = urls.join(robots_url, value.strip())
            if joined is not None:
                roots.append(joined)
        if settings.sitemaps == "also":
            roots.append(org.rstrip("/") + "/sitemap.xml")
    roots.extend(settings.sitemap_urls)
    return roots


class SitemapReader:
    """Reads sitemaps breadth-first from roots; see the module doc.

    Args:
        settings: caps (``max_sitemap_bytes``, ``max_sitemap_depth``).
        fetch: one GET of a sitemap URL (None when the fetch failed).
        allowed: robots.txt verdict for a URL.
        in_scope: whether a sitemap URL (canonical) may be read at all (the crawl's scope);
            others are dropped and counted in ``out_of_scope``.
        max_files: sitemap files read at most.
        stopping: true once the crawl is stopping (Ctrl-C): no further sitemap is fetched.
    """

    def __init__(
        self,
        settings: QualitySettings,
        fetch: FetchFn,
        allowed: AllowedFn,
        in_scope: Callable[[str], bool] = lambda url: True,
        max_files: int = 10_000,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.settings = settings
        self._stopping = stopping
        self._fetch = fetch
        self._allowed = allowed
        self._in_scope = in_scope
        self.stats = SitemapStats()
        self.graph = SitemapGraph(settings.max_sitemap_depth, max_files, self.stats)

    async def read(self, roots: Iterable[str]) -> AsyncIterator[tuple[str, SitemapEntry]]:
        """Yield ``(sitemap_url, entry)`` for every page URL listed, sitemap by sitemap
        (``sitemap_url``: where it was read, after redirects); ends early, without fetching
        another sitemap, once ``stopping()``. Never raises for bad input."""
        todo: deque[tuple[str, int]] = deque()
        for root in roots:
            self._push(todo, root, 0)
        while todo and not self._stopping():
            url, level = todo.popleft()
            final, resp = await self._get(url)
            if resp is None or final is None:
                continue
            doc = parse_sitemap(
                resp.body, final, max_bytes=self.settings.max_sitemap_bytes, max_entries=50_000
            )
            self.stats.read += 1
            if doc.cut or resp.truncated:
                self.stats.cut += 1
            if doc.error is not None:
                self.stats.errors += 1
            for child in doc.sitemaps:
                self._push(todo, child.url, level + 1)
            for entry in doc.urls:
                self.stats.entries += 1
                yield final, entry

    def _push(self, todo: deque[tuple[str, int]], url: str, level: int) -> None:
        canon = urls.canonicalize(url)
        if canon is not None and not self._in_scope(canon):
            self.stats.out_of_scope += 1
            return
        canon = self.graph.admit(url, level)
        if canon is not None:
            todo.append((canon, level))

    async def _get(self, url: str) -> tuple[str | None, Response | None]:
        """GET ``url`` following redirects (each hop checked against robots.txt and the
        graph); the final URL and its 2xx response, or (None, None)."""
        cur = url
        for _ in range(MAX_SITEMAP_REDIRECTS + 1):
            if not await self._allowed(cur):
                self.stats.robots_disallowed += 1
                return None, None
            resp = await self._fetch(cur)
            if resp is None:
                self.stats.errors += 1
                return None, None
            if 300 <= resp.status < 400 and resp.header("location") is not None:
                target = location_target(cur, resp.header("location"))
                canon = urls.canonicalize(target) if target else None
                if canon is None or not urls.is_http(canon):
                    self.stats.errors += 1
                    return None, None
                if not self._in_scope(canon):
                    self.stats.out_of_scope += 1
                    return None, None
                if not self.graph.arrived(url, canon):
                    return None, None  # a redirect back to a sitemap already read
                cur = canon
                continue
            if not 200 <= resp.status < 300:
                self.stats.errors += 1
                return None, None
            return cur, resp
        self.stats.errors += 1  # too many redirects
        return None, None
