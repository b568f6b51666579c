"""Wiring: turn settings into components. The only module that names concrete backends."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from skitter import __version__
from skitter.checklinks import ANCHORS_FILE, AnchorsWriter, CheckPolicy
from skitter.deadlines import DeadlineEstimator, DeadlineFetcher
from skitter.errors import ConfigError, StateError
from skitter.export.linkfile import ZstdLinksWriter, links_writer, repair_links
from skitter.export.links import LinksWriter
from skitter.export.pages import PagesWriter
from skitter.export.warc import WarcWriter
from skitter.fetch.aiohttp import AiohttpFetcher
from skitter.fetch.base import Fetcher
from skitter.frontier.base import Frontier
from skitter.lease_policy import FetchPolicy, LeasePolicy
from skitter.links import extract
from skitter.models import Page, Response
from skitter.offline.cdxj import CrawlIndexer, index_missing
from skitter.peers import Alone, Peers
from skitter.robots import product_token
from skitter.robots_cache import RobotsCache
from skitter.rules import ScopeRule
from skitter.settings import CrawlSettings, is_redis_url
from skitter.state import (
    COOKIES_FILE,
    FRONTIER_FILE,
    PAGES_FILE,
    prepare_new_out_dir,
    save_state,
)
from skitter.typefocus import Focus, NoFocus, focus_port
from skitter.urls import canonicalize

__all__ = ["Components", "build_components", "default_peers", "lease_policy"]

log = logging.getLogger("skitter")


@dataclass(slots=True)
class Components:
    """Everything a crawl talks to, built from settings by :func:`build_components`."""

    fetcher: AiohttpFetcher
    frontier: Frontier
    robots: RobotsCache
    scope: ScopeRule
    pages: PagesWriter
    links: LinksWriter | ZstdLinksWriter
    warc: WarcWriter | None
    cookies_path: Path
    #: anchors.jsonl (fragment targets per HTML page), with ``check_fragments``.
    anchors: AnchorsWriter | None = None
    #: link checking: also extract page resources / fragment targets (``Page.ids``).
    bot_token: str | None = None
    extract_resources: bool = False
    extract_ids: bool = False
    #: file-type focus port (:mod:`skitter.typefocus`); the plain crawl by default.
    focus: Focus = field(default_factory=NoFocus)
    #: the fetcher for pages (type focus, adaptive deadlines); None = ``fetcher``.
    page_fetcher: Fetcher | None = None
    #: ``--timeout auto`` (:mod:`skitter.deadlines`), or None.
    deadlines: DeadlineEstimator | None = None

    def extract(
        self, body: bytes, url: str, content_type: str | None, x_robots: Sequence[str]
    ) -> Page:
        """Parse an HTML body into a Page (links in document order)."""
        return extract(
            body,
            url,
            content_type,
            x_robots,
            bot_token=self.bot_token,
            resources=self.extract_resources,
            ids=self.extract_ids,
        )

    async def lookup(self, url: str) -> list[str]:
        """The IP addresses ``url``'s host resolves to (cached; honours --resolve)."""
        return await self.fetcher.lookup_url(url)

    def allow_host(self, host: str) -> None:
        """Let ``host`` (a seed's) be fetched even if it resolves to a private address."""
        self.fetcher.allow_host(host)

    def save_cookies(self) -> None:
        """Persist the cookie jar (atomic) so a resumed crawl keeps its sessions."""
        self.fetcher.save_cookies(str(self.cookies_path))

    async def aclose(self) -> None:
        """Close the HTTP session, the frontier and the writers (flushing what they hold)."""
        try:
            await self.fetcher.aclose()
        finally:
            try:
                await self.frontier.aclose()
            finally:
                self.pages.close()
                self.links.close()
                if self.anchors is not None:
                    self.anchors.close()
                if self.warc is not None:
                    self.warc.close()
                self.focus.close()


def default_peers(settings: CrawlSettings) -> Peers:
    """The peers of a crawl alone: none (:class:`skitter.peers.Alone`), or the other workers
    of a Redis crawl (:class:`skitter.redis_peers.RedisPeers`: shared IP slots)."""
    if is_redis_url(settings.frontier):
        from skitter.redis_peers import RedisPeers

        return RedisPeers()
    return Alone()


def lease_policy(settings: CrawlSettings, clock: Callable[[], float]) -> LeasePolicy:
    """The lease policy of the crawl's mode: link checking (``settings.check_links``:
    :class:`skitter.checklinks.CheckPolicy`, with the previous check's cache on resume) or a
    plain crawl (``clock``: seconds, for the failed-host memory), or a plain fetch of the seeds
    (``settings.extract_links`` False, ``skitter fetch``: :class:`FetchPolicy`)."""
    if not settings.extract_links:
        return FetchPolicy()
    if not settings.check_links:
        if settings.quality.since_dir:  # a recrawl: conditional requests (skitter.recrawl)
            from skitter.recrawl import RecrawlPolicy, load_previous

            return RecrawlPolicy(load_previous(settings.quality.since_dir))
        return LeasePolicy()
    seeds = [u for u in (canonicalize(s) for s in settings.seeds) if u is not None]
    policy = CheckPolicy(settings, seeds, clock=clock)
    if settings.resume:
        policy.load_cache(Path(settings.out_dir))
    return policy


async def _open_frontier(settings: CrawlSettings, out_dir: Path) -> Frontier:
    p = settings.politeness
    if settings.frontier == "memory":
        from skitter.frontier.memory import MemoryFrontier

        return MemoryFrontier(host_concurrency=p.host_concurrency)
    if settings.frontier == "sqlite":
        from skitter.frontier.sqlite import SqliteFrontier

        return SqliteFrontier(str(out_dir / FRONTIER_FILE), host_concurrency=p.host_concurrency)
    if is_redis_url(settings.frontier):
        from skitter.frontier.redis_crawl import open_worker_frontier

        return await open_worker_frontier(settings, warn=log.warning)
    raise ConfigError(f"unknown frontier backend {settings.frontier!r} (use sqlite or memory)")


async def build_components(
    settings: CrawlSettings,
    robots_fetch: Callable[[str], Awaitable[Response]],
    *,
    warc_dir: Path | None = None,
    warc_prefix: str = "skitter",
) -> Components:
    """Create the output folder (or check it, for resume) and build every component.

    Args:
        settings: the crawl's settings (``resume`` selects the resume path).
        robots_fetch: how robots.txt is fetched (the crawler's, so it is archived).
        warc_dir: folder of the WARC files (default: ``settings.out_dir``); warc_prefix:
            their file name prefix (one per process of a sharded crawl).
    Raises:
        StateError: unusable output folder. ConfigError: bad settings.
    """
    out_dir = Path(settings.out_dir)
    if settings.resume:
        if settings.frontier == "memory":
            raise StateError("a crawl with --frontier memory keeps no state and cannot resume")
    else:
        prepare_new_out_dir(out_dir)
        save_state(out_dir, settings)
    # the frontier takes the folder's lock: a second process on a live crawl stops here,
    # before it repairs (truncates) anything
    frontier = await _open_frontier(settings, out_dir)
    if is_redis_url(settings.frontier):  # a WARC series per worker; robots.txt shared
        from skitter.distributed import shared_robots_fetch
        from skitter.frontier.redis_crawl import SharedCrawlFrontier

        assert isinstance(frontier, SharedCrawlFrontier)
        warc_prefix = f"skitter-w{frontier.worker_id}"
        robots_fetch = shared_robots_fetch(
            robots_fetch,
            frontier.client,
            frontier.crawl_id,
            ttl_s=settings.politeness.robots_ttl_s,
            retry_s=settings.politeness.robots_retry_s,
        )
    seeds = [u for u in (canonicalize(s) for s in settings.seeds) if u is not None]
    p = settings.politeness
    cookies_path = out_dir / COOKIES_FILE
    fetcher: AiohttpFetcher | None = None
    try:
        scope = ScopeRule(settings.scope, seeds)
        if settings.resume:
            PagesWriter.repair(str(out_dir / PAGES_FILE))
            repair_links(out_dir, settings.links_compress)
            WarcWriter.repair(str(warc_dir or out_dir), prefix=warc_prefix)
            if settings.warc:  # CDXJ of files a killed crawl left unindexed
                index_missing(str(warc_dir or out_dir), warc_prefix)
        fetcher = AiohttpFetcher(
            settings.fetch, concurrency=p.concurrency, host_concurrency=p.host_concurrency
        )
        if cookies_path.exists():
            fetcher.load_cookies(str(cookies_path))
    except BaseException:
        if fetcher is not None:
            await fetcher.aclose()
        await frontier.aclose()
        raise
    import time

    robots = RobotsCache(
        robots_fetch,
        token=product_token(settings.fetch.user_agent),
        ttl_s=p.robots_ttl_s,
        retry_s=p.robots_retry_s,
        clock=time.time,
        ignore=p.ignore_robots,
    )
    focus = focus_port(settings)
    f = settings.focus
    deadlines = (
        DeadlineEstimator(
            settings.fetch.read_timeout_s,
            floor_s=min(f.timeout_floor_s, settings.fetch.read_timeout_s),
        )
        if f.timeout_auto
        else None
    )
    indexer = CrawlIndexer()
    warc = (
        WarcWriter(
            str(warc_dir or out_dir),
            prefix=warc_prefix,
            is_part_of="skitter",
            max_bytes=settings.warc_max_bytes,
            compression_level=settings.warc_level,
            software=f"Skitter/{__version__}",
            on_file_done=indexer,
            on_record=indexer.on_record,
        )
        if settings.warc
        else None
    )
    page_fetcher = focus.page_fetcher(DeadlineFetcher(fetcher, deadlines) if deadlines else fetcher)
    if is_redis_url(settings.frontier):  # no request of a lease near its expiry
        from skitter.frontier.redis_crawl import LeaseGuardFetcher, SharedCrawlFrontier

        assert isinstance(frontier, SharedCrawlFrontier)
        page_fetcher = LeaseGuardFetcher(page_fetcher, frontier)
    return Components(
        fetcher=fetcher,
        frontier=frontier,
        robots=robots,
        scope=scope,
        pages=PagesWriter(str(out_dir / PAGES_FILE)),
        links=links_writer(out_dir, settings.links_compress),
        warc=warc,
        cookies_path=cookies_path,
        anchors=(AnchorsWriter(str(out_dir / ANCHORS_FILE)) if settings.check_fragments else None),
        bot_token=product_token(settings.fetch.user_agent),
        extract_resources=settings.check_links and settings.check_resources,
        extract_ids=settings.check_fragments,
        focus=focus,
        page_fetcher=page_fetcher,
        deadlines=deadlines,
    )
