"""Crawl settings: frozen dataclasses with defaults and units in their names.

No file or environment reading happens here (see :mod:`skitter.config` / :mod:`skitter.cli`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skitter import __version__

__all__ = [
    "DEFAULT_USER_AGENT",
    "CrawlSettings",
    "FetchSettings",
    "FocusSettings",
    "PolitenessSettings",
    "QualitySettings",
    "ScopeSettings",
    "is_redis_url",
]

DEFAULT_USER_AGENT = f"Skitter/{__version__} (+https://github.com/skitter-crawler/skitter)"


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """How single HTTP requests are made.

    Attributes:
        user_agent: User-Agent header; its first word (before "/") is the robots.txt
            product token.
        headers: extra request headers (name, value), sent on every request.
        timeout_s: whole-fetch deadline in seconds (connect + headers + body).
        connect_timeout_s: TCP/TLS connect deadline in seconds.
        read_timeout_s: idle-read deadline in seconds (no byte received for this long).
        max_body_bytes: cap on the *decoded* body size in bytes.
        max_redirects: redirect hops followed before ``too_many_redirects``.
        proxy: HTTP proxy URL or None.
        resolve: ``{(host, port): address}`` overrides, like curl's ``--resolve``.
        resolve_only: names not in ``resolve`` fail as DNS errors without any query.
        dns_cache_ttl_s: seconds a DNS answer is reused.
        allow_private: allow fetching private/loopback addresses found by links.
    """

    user_agent: str = DEFAULT_USER_AGENT
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 30.0
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 20.0
    max_body_bytes: int = 10 * 1024 * 1024
    max_redirects: int = 10
    proxy: str | None = None
    resolve: dict[tuple[str, int], str] = field(default_factory=dict)
    resolve_only: bool = False
    dns_cache_ttl_s: float = 300.0
    allow_private: bool = False


@dataclass(frozen=True, slots=True)
class PolitenessSettings:
    """How hard one host (and one IP) may be hit.

    Attributes:
        delay_s: seconds between the end of one request and the start of the next to a host.
        host_concurrency: requests in flight at once per host.
        ip_concurrency: requests in flight at once per IP address (hosts sharing it).
        concurrency: requests in flight at once overall.
        retries: extra attempts for timeouts, 429 and 5xx.
        max_retry_after_s: Retry-After waits longer than this are not honoured (no retry).
        ignore_robots: skip robots.txt entirely (only for one's own site).
        robots_retry_s: after a 5xx/unreachable robots.txt, seconds before asking again.
        robots_ttl_s: seconds a fetched robots.txt is reused.
        max_crawl_delay_s: cap on a robots.txt Crawl-delay, in seconds.
    """

    delay_s: float = 1.0
    host_concurrency: int = 1
    ip_concurrency: int = 4
    concurrency: int = 64
    retries: int = 2
    max_retry_after_s: float = 60.0
    ignore_robots: bool = False
    robots_retry_s: float = 60.0
    robots_ttl_s: float = 24 * 3600.0
    max_crawl_delay_s: float = 30.0


@dataclass(frozen=True, slots=True)
class ScopeSettings:
    """Which discovered URLs are queued.

    Attributes:
        scope: "host" (same host as a seed), "domain" (same registered domain), "any".
        include: regexes; if any are given a URL must match one of them.
        exclude: regexes; a URL matching any of them is dropped.
        max_depth: hops from a seed; None = unlimited.
        max_links_per_page: first N links of a page are considered; None = all.
        max_seed_links: the same cap for seed pages; None = use max_links_per_page.
        max_url_length: longer canonical URLs are dropped (characters).
        follow_nofollow: queue rel=nofollow links too.
        max_pages_per_host: at most N distinct URLs per host (host key) are queued,
            seeds, links and redirect targets alike; None = unlimited. Drops: "limit".
        max_path_depth: URLs whose path has more segments are dropped as traps; None = off.
        max_query_variants_per_path: at most N distinct queries are queued for one
            scheme + host + path; None = off.
        max_segment_repeats: URLs with one path segment occurring more often are dropped
            as traps (``/a/b/a/b/a/b``); None = off. See :mod:`skitter.traps`.
    """

    scope: str = "host"
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_depth: int | None = None
    max_links_per_page: int | None = None
    max_seed_links: int | None = None
    max_url_length: int = 2048
    follow_nofollow: bool = False
    max_pages_per_host: int | None = None
    max_path_depth: int | None = 32
    max_query_variants_per_path: int | None = 100
    max_segment_repeats: int | None = 2


@dataclass(frozen=True, slots=True)
class QualitySettings:
    """Duplicate pages, sitemaps and fetch order (:mod:`skitter.dedup`,
    :mod:`skitter.sitemaps`, ``Frontier.note_inlinks``).

    Attributes:
        dedup: "off", "exact" (same decoded body) or "near" (also SimHash within
            ``near_dup_distance`` bits, HTML only).
        near_dup_distance: Hamming distance (bits of 64) that counts as a near duplicate.
        max_duplicate_ratio: a host whose share of duplicate pages passes this (after
            ``duplicate_ratio_min_pages`` pages) gets no more links queued ("trap");
            None = off.
        duplicate_ratio_min_pages: pages of a host recorded before the ratio applies.
        sitemaps: "robots" (the Sitemap lines of robots.txt), "also" (and ``/sitemap.xml``),
            "only" (sitemap entries and seeds only: page links are not followed), "off".
        sitemap_urls: extra sitemap URLs (``--sitemap``), read whatever ``sitemaps`` says
            unless "off".
        max_sitemap_bytes: decoded size cap of one sitemap file (bytes).
        max_sitemap_depth: index nesting read below a root sitemap.
        order: "bfs" (by depth) or "inlinks" (within a host, URLs linked from more distinct
            other hosts first).
        since_dir: a previous crawl folder to recrawl (:mod:`skitter.recrawl`), or None.
    """

    dedup: str = "exact"
    near_dup_distance: int = 3
    max_duplicate_ratio: float | None = 0.5
    duplicate_ratio_min_pages: int = 50
    sitemaps: str = "robots"
    sitemap_urls: tuple[str, ...] = ()
    max_sitemap_bytes: int = 50 * 1024 * 1024
    max_sitemap_depth: int = 5
    order: str = "bfs"
    since_dir: str | None = None


@dataclass(frozen=True, slots=True)
class FocusSettings:
    """File-type focus and self-tuning (:mod:`skitter.typefocus`, :mod:`skitter.autotune`).

    Attributes:
        accept_types, reject_types: media types or families (``image/*``), lower-case.
        accept_exts, reject_exts: URL path extensions without the dot, lower-case.
        save_files: folder where accepted bodies are written (wget ``-x``), or None.
        concurrency_auto: tune the fetches in flight (``--concurrency auto``), up to
            ``PolitenessSettings.concurrency``.
        cpu_target: share of one core the process may use before concurrency is lowered.
        max_memory_bytes: resident memory above which concurrency is lowered; None = a
            quarter of the machine.
        timeout_auto: per-host idle-read deadline from observed response times
            (``--timeout auto``); ``FetchSettings.timeout_s`` stays the hard cap.
        timeout_floor_s: the shortest adaptive idle-read deadline, seconds.
    """

    accept_types: tuple[str, ...] = ()
    reject_types: tuple[str, ...] = ()
    accept_exts: tuple[str, ...] = ()
    reject_exts: tuple[str, ...] = ()
    save_files: str | None = None
    concurrency_auto: bool = False
    cpu_target: float = 0.85
    max_memory_bytes: int | None = None
    timeout_auto: bool = False
    timeout_floor_s: float = 3.0


@dataclass(frozen=True, slots=True)
class CrawlSettings:
    """Everything one crawl needs.

    Attributes:
        out_dir: output folder (WARC, pages.jsonl, links.tsv, report.json, state).
        seeds: seed URLs as given (canonicalised at start).
        frontier: "sqlite", "memory", or a Redis URL (``redis://``, ``rediss://``,
            ``redis+cluster://``: the frontier shared by many workers).
        max_pages: stop after this many records with a 2xx status; None = no limit.
        warc: write WARC files.
        warc_max_bytes: rotate WARC files at this size (bytes).
        quiet: no progress display.
        resume: continue the crawl stored in ``out_dir``.
        check_links: link-checking mode (``skitter check-links``, :mod:`skitter.checklinks`):
            links that are not crawled -- other hosts, nofollow, past ``max_depth``, in
            scope but not matching ``include`` -- are queued as ``check_only`` requests
            (HEAD, GET fallback, never parsed) instead of being dropped; excluded ones
            (``exclude``) stay dropped.
        check_resources: with ``check_links``, also extract and check page resources
            (``<img src>``, ``srcset``, ``<script src>``, stylesheet/icon ``<link href>``)
            as ``check_only`` requests.
        check_fragments: record every HTML page's fragment targets (``id``, ``<a name>``)
            in ``anchors.jsonl`` so that ``page#name`` links can be checked.
        processes: crawler processes, each owning the hosts that hash to it
            (:mod:`skitter.processes`; run by the command line). 1 = this process only.
        quality: duplicate pages, sitemaps, fetch order (:class:`QualitySettings`).
        crawl_id: with a Redis frontier, the crawl's key prefix in Redis.
        lease_ttl_s: with a Redis frontier, seconds a lease lasts unless renewed (renewed
            every third of it while the worker lives).
        redis_wait_s: with a Redis frontier, seconds to keep retrying while Redis is
            unreachable before giving up (exit 1, resumable).
        join: with a Redis frontier, join the existing crawl (``skitter worker``) instead
            of creating it (``skitter crawl``).
        extract_links: parse HTML pages for links (False = ``skitter fetch``: pages are
            fetched, archived and recorded, never parsed; only redirects are followed).
        focus: file-type focus, ``--save-files``, adaptive concurrency and timeouts.
    """

    out_dir: str
    seeds: tuple[str, ...] = ()
    fetch: FetchSettings = field(default_factory=FetchSettings)
    politeness: PolitenessSettings = field(default_factory=PolitenessSettings)
    scope: ScopeSettings = field(default_factory=ScopeSettings)
    frontier: str = "sqlite"
    max_pages: int | None = None
    warc: bool = True
    warc_max_bytes: int = 1024**3
    quiet: bool = False
    resume: bool = False
    check_links: bool = False
    check_resources: bool = False
    check_fragments: bool = False
    processes: int = 1
    quality: QualitySettings = field(default_factory=QualitySettings)
    extract_links: bool = True
    focus: FocusSettings = field(default_factory=FocusSettings)
    crawl_id: str = "skitter"
    lease_ttl_s: float = 60.0
    redis_wait_s: float = 300.0
    join: bool = False


def is_redis_url(frontier: str) -> bool:
    """True when a ``frontier`` setting names a Redis URL (``redis://``, ``rediss://``,
    ``redis+cluster://``) rather than ``sqlite`` or ``memory``."""
    return frontier.split("://", 1)[0].lower() in ("redis", "rediss", "redis+cluster")
