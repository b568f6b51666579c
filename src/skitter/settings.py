"""Crawl settings: frozen dataclasses with defaults and units in their names.

No file or environment reading happens here (see :mod:`skitter.config` / :mod:`skitter.cli`).
Every dataclass validates itself on construction by the rules the command line applies to
the same flags, and raises :class:`~skitter.errors.ConfigError` (one line naming the
setting) for a bad value: the library refuses what ``skitter crawl`` refuses.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

from skitter import __version__
from skitter.errors import ConfigError

__all__ = [
    "DEFAULT_USER_AGENT",
    "REDACTED",
    "SCOPES",
    "CrawlSettings",
    "FetchSettings",
    "FocusSettings",
    "PolitenessSettings",
    "QualitySettings",
    "ScopeSettings",
    "is_redis_url",
    "parse_seen",
    "redact_url",
]

DEFAULT_USER_AGENT = f"Skitter/{__version__} (+https://github.com/skitter-crawler/skitter)"

#: The values of ``ScopeSettings.scope``.
SCOPES = ("host", "domain", "any")


def _number(
    owner: str,
    name: str,
    value: Any,
    *,
    low: float = 0,
    strict: bool = False,
    whole: bool = False,
    optional: bool = False,
) -> None:
    """Raise ConfigError unless ``value`` is a finite number >= ``low`` (> when ``strict``),
    a whole number when ``whole``, or None when ``optional``."""
    if value is None and optional:
        return
    kind = "a whole number" if whole else "a number"
    ok_type = isinstance(value, int) if whole else isinstance(value, (int, float))
    if not ok_type or isinstance(value, bool):
        raise ConfigError(f"{owner}.{name} must be {kind}, got {value!r}")
    if not math.isfinite(value) or value < low or (strict and value == low):
        rel = ">" if strict else ">="
        raise ConfigError(f"{owner}.{name} must be a finite number {rel} {low:g}, got {value!r}")


def _flag(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{owner}.{name} must be True or False, got {value!r}")


def _strings(owner: str, name: str, value: Any) -> tuple[Any, ...]:
    """A tuple from a list/tuple (never from a str, which would iterate characters)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ConfigError(
            f"{owner}.{name} must be a tuple of strings, not {type(value).__name__} {value!r}"
        )
    return tuple(value)


def _regexes(owner: str, name: str, value: Any) -> tuple[str, ...]:
    items = _strings(owner, name, value)
    for item in items:
        try:
            re.compile(item)
        except (re.error, TypeError) as exc:
            raise ConfigError(f"{owner}.{name}: bad regular expression {item!r}: {exc}") from None
    return items


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

    def __post_init__(self) -> None:
        from skitter.seeds import canonical_host

        o = "FetchSettings"
        if not isinstance(self.user_agent, str) or not self.user_agent.strip():
            raise ConfigError(f"{o}.user_agent must be a non-empty string (--user-agent)")
        if any(c in self.user_agent for c in "\r\n\0"):
            raise ConfigError(f"{o}.user_agent: control characters in {self.user_agent!r}")
        headers = _strings(o, "headers", self.headers)
        for h in headers:
            if (
                not isinstance(h, (list, tuple))
                or len(h) != 2
                or not all(isinstance(x, str) for x in h)
            ):
                raise ConfigError(f"{o}.headers must hold (name, value) pairs, got {h!r}")
            if (
                not h[0].strip()
                or any(c in h[0] for c in " \t:")
                or any(c in h[0] + h[1] for c in "\r\n\0")
            ):
                raise ConfigError(f"{o}.headers: bad header {h[0]!r}: {h[1]!r}")
        object.__setattr__(self, "headers", tuple(tuple(h) for h in headers))
        for name in ("timeout_s", "connect_timeout_s", "read_timeout_s"):
            _number(o, name, getattr(self, name), strict=True)
        _number(o, "max_body_bytes", self.max_body_bytes, whole=True)
        _number(o, "max_redirects", self.max_redirects, whole=True)
        _number(o, "dns_cache_ttl_s", self.dns_cache_ttl_s)
        _flag(o, "resolve_only", self.resolve_only)
        _flag(o, "allow_private", self.allow_private)
        if self.proxy is not None:
            from urllib.parse import urlsplit

            try:
                parts = urlsplit(self.proxy)
                ok = parts.scheme in ("http", "https") and bool(parts.hostname)
                _ = parts.port
            except (ValueError, TypeError, AttributeError):
                ok = False
            if not ok:
                raise ConfigError(f"{o}.proxy: expected an http:// proxy URL, got {self.proxy!r}")
        if not isinstance(self.resolve, dict):
            raise ConfigError(f"{o}.resolve must be a dict {{(host, port): address}}")
        resolve: dict[tuple[str, int], str] = {}
        for key, addr in self.resolve.items():
            import ipaddress

            pair: tuple[Any, Any] = key if isinstance(key, tuple) and len(key) == 2 else ("", 0)
            host, port = pair
            canon = canonical_host(host) if isinstance(host, str) else None
            good_port = isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536
            if canon is None or not good_port or not isinstance(addr, str):
                raise ConfigError(f"{o}.resolve: bad entry {key!r}: {addr!r}")
            for a in addr.split(","):
                try:
                    ipaddress.ip_address(a.strip().strip("[]"))
                except ValueError:
                    raise ConfigError(f"{o}.resolve: bad address {addr!r} for {host}") from None
            resolve[(canon.strip("[]"), port)] = addr
        object.__setattr__(self, "resolve", resolve)


@dataclass(frozen=True, slots=True)
class PolitenessSettings:
    """How hard one host (and one IP) may be hit.

    Attributes:
        delay_s: seconds between the end of one request and the start of the next to a host.
        random_wait: each delay is ``delay_s`` times a random factor in 0.5..1.5 (wget's
            ``--random-wait``), so requests do not come at a fixed rhythm.
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
    random_wait: bool = False

    def __post_init__(self) -> None:
        o = "PolitenessSettings"
        for name in (
            "delay_s",
            "max_retry_after_s",
            "robots_retry_s",
            "robots_ttl_s",
            "max_crawl_delay_s",
        ):
            _number(o, name, getattr(self, name))
        for name in ("host_concurrency", "ip_concurrency", "concurrency"):
            _number(o, name, getattr(self, name), low=1, whole=True)
        _number(o, "retries", self.retries, whole=True)
        _flag(o, "ignore_robots", self.ignore_robots)
        _flag(o, "random_wait", self.random_wait)


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

    def __post_init__(self) -> None:
        o = "ScopeSettings"
        if self.scope not in SCOPES:
            raise ConfigError(f"{o}.scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        object.__setattr__(self, "include", _regexes(o, "include", self.include))
        object.__setattr__(self, "exclude", _regexes(o, "exclude", self.exclude))
        for name in (
            "max_depth",
            "max_links_per_page",
            "max_seed_links",
            "max_path_depth",
            "max_query_variants_per_path",
            "max_segment_repeats",
        ):
            _number(o, name, getattr(self, name), whole=True, optional=True)
        _number(o, "max_url_length", self.max_url_length, low=1, whole=True)
        _number(o, "max_pages_per_host", self.max_pages_per_host, whole=True, optional=True)
        _flag(o, "follow_nofollow", self.follow_nofollow)


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
        links_compress: ``"none"`` (links.tsv) or ``"zstd"`` (links.tsv.zst, one zstd frame
            per checkpoint: :mod:`skitter.export.linkfile`); fixed for the life of a crawl.
        warc_level: gzip level 1-9 of the WARC records (default 2); 1-3 are ISA-L's deflate,
            4-9 libdeflate's. On HTML served uncompressed (rust-doc) level 2 costs ≈ 26 µs a
            27 kB page against ≈ 89 µs at 6, for WARC files ≈ 12-14% larger; bodies served
            compressed (gzip, br, zstd) are stored as received at every level.
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
        seen: with a Redis frontier, the URL-seen test: ``exact`` or ``bloom:RATE`` (a
            Bloom filter dropping about that fraction of new URLs:
            :mod:`skitter.frontier.redis_seen`), fixed when the crawl is created.
        seen_capacity: URLs the Bloom filter is sized for.
        join: with a Redis frontier, join the existing crawl (``skitter worker``) instead
            of creating it (``skitter crawl``).
        extract_links: parse HTML pages for links (False = ``skitter fetch``: pages are
            fetched, archived and recorded, never parsed; only redirects are followed).
        focus: file-type focus, ``--save-files``, adaptive concurrency and timeouts.
        max_time_s: stop cleanly (resumable, ``stop_reason`` "max_time") after this many
            seconds of crawling in this session; None = no limit.

    Raises:
        ConfigError: a bad value anywhere (e.g. ``seeds="http://a/"``, a string rather than
            a tuple; a seed that is not an http(s) URL or domain name; ``delay_s=-1``).
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
    links_compress: str = "none"
    warc_level: int = 2
    quiet: bool = False
    resume: bool = False
    check_links: bool = False
    check_resources: bool = False
    check_fragments: bool = False
    processes: int = 1
    quality: QualitySettings = field(default_factory=QualitySettings)
    extract_links: bool = True
    focus: FocusSettings = field(default_factory=FocusSettings)
    max_time_s: float | None = None
    crawl_id: str = "skitter"
    lease_ttl_s: float = 60.0
    redis_wait_s: float = 300.0
    seen: str = "exact"
    seen_capacity: int = 10_000_000
    join: bool = False

    def __post_init__(self) -> None:
        from skitter.seeds import seed_url

        o = "CrawlSettings"
        if not isinstance(self.out_dir, (str, PathLike)) or not str(self.out_dir):
            raise ConfigError(f"{o}.out_dir must be a folder path, got {self.out_dir!r}")
        seeds = _strings(o, "seeds", self.seeds)
        try:
            object.__setattr__(self, "seeds", tuple(seed_url(s) for s in seeds))
        except ConfigError as exc:
            raise ConfigError(f"{o}.seeds: {exc}") from None
        for name, cls in (
            ("fetch", FetchSettings),
            ("politeness", PolitenessSettings),
            ("scope", ScopeSettings),
        ):
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(f"{o}.{name} must be a {cls.__name__}")
        if not isinstance(self.frontier, str) or not self.frontier:
            # the backend names are build.py's (it raises ConfigError for an unknown one)
            raise ConfigError(f"{o}.frontier must be a backend name, got {self.frontier!r}")
        _number(o, "max_pages", self.max_pages, low=1, whole=True, optional=True)
        _number(o, "max_time_s", self.max_time_s, strict=True, optional=True)
        _number(o, "warc_max_bytes", self.warc_max_bytes, low=1, whole=True)
        _number(o, "warc_level", self.warc_level, low=1, whole=True)
        if self.warc_level > 9:
            raise ConfigError(f"{o}.warc_level must be a gzip level 1 .. 9, got {self.warc_level}")
        _number(o, "processes", self.processes, low=1, whole=True)
        if self.links_compress not in ("none", "zstd"):
            raise ConfigError(
                f"{o}.links_compress must be 'none' or 'zstd', got {self.links_compress!r}"
            )
        if not isinstance(self.crawl_id, str) or not self.crawl_id:
            raise ConfigError(f"{o}.crawl_id must be a non-empty name, got {self.crawl_id!r}")
        _number(o, "lease_ttl_s", self.lease_ttl_s, strict=True)
        _number(o, "redis_wait_s", self.redis_wait_s)
        _number(o, "seen_capacity", self.seen_capacity, low=1, whole=True)
        if self.seen != "exact":
            try:
                parse_seen(self.seen)
            except (ValueError, TypeError, AttributeError) as exc:
                raise ConfigError(f"{o}.seen: {exc}") from None
            if not is_redis_url(self.frontier) and self.frontier != "redis":
                raise ConfigError(
                    "--seen bloom:RATE needs a Redis frontier (--frontier redis://...)"
                )
        for name in (
            "warc",
            "quiet",
            "resume",
            "check_links",
            "check_resources",
            "check_fragments",
            "extract_links",
            "join",
        ):
            _flag(o, name, getattr(self, name))


def is_redis_url(frontier: str) -> bool:
    """True when a ``frontier`` setting names a Redis URL (``redis://``, ``rediss://``,
    ``redis+cluster://``) rather than ``sqlite`` or ``memory``."""
    return frontier.split("://", 1)[0].lower() in ("redis", "rediss", "redis+cluster")


#: What a Redis URL's password becomes in every file and message Skitter writes.
REDACTED = "***"


def redact_url(frontier: str) -> str:
    """``frontier`` with the password of a Redis URL replaced by ``***``
    (``redis://:secret@h:6379/0`` -> ``redis://:***@h:6379/0``; a user name is kept); any
    other value unchanged. What state.json, report.json, logs and messages hold."""
    if not is_redis_url(frontier):
        return frontier
    scheme, _, rest = frontier.partition("://")
    netloc, slash, path = rest.partition("/")
    auth, at, hosts = netloc.rpartition("@")
    if not at:
        return frontier
    user, colon, _ = auth.partition(":")
    auth = f"{user}:{REDACTED}" if colon else REDACTED
    return f"{scheme}://{auth}@{hosts}{slash}{path}"


def parse_seen(text: str) -> float | None:
    """The false-positive rate of a ``--seen`` value: ``exact`` -> None, ``bloom:RATE`` ->
    RATE (a number strictly between 0 and 1, e.g. ``bloom:0.001``).

    Raises:
        ValueError: anything else (the message says what is accepted).
    """
    want = "use exact or bloom:RATE with 0 < RATE < 1, e.g. bloom:0.001"
    if text == "exact":
        return None
    kind, colon, rate_s = text.partition(":")
    if kind != "bloom" or not colon:
        raise ValueError(f"--seen {text!r}: {want}")
    try:
        rate = float(rate_s)
    except ValueError:
        raise ValueError(f"--seen {text!r}: {want}") from None
    if not 0.0 < rate < 1.0:
        raise ValueError(f"--seen {text!r}: {want}")
    return rate
