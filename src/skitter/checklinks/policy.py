"""Link checking, crawl side: what to check, HEAD or GET, the host failure memo, the cache.

:class:`CheckPolicy` is the crawler's :class:`skitter.lease_policy.LeasePolicy` in
link-checking mode (``CrawlSettings.check_links``); see :mod:`skitter.checklinks` for what
it does differently from a crawl.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from skitter.checklinks.anchors import ANCHORS_FILE, read_anchors, read_cut_pages
from skitter.checklinks.verdicts import status_from_detail
from skitter.errors import BodyTooLarge, FetchError
from skitter.export.pages import PageRecord, read_records
from skitter.fetch.base import Fetcher
from skitter.lease_policy import LeasePolicy, Pause
from skitter.links import RESOURCE_KINDS, extract
from skitter.models import Hop, Request, Response
from skitter.rules import ScopeRule
from skitter.settings import CrawlSettings

__all__ = [
    "CACHE_FILE",
    "CHECK_BODY_BYTES",
    "CHECK_FILES",
    "HOST_ERROR_KINDS",
    "CheckPolicy",
    "collect_cache",
    "host_failure",
]

#: GET bodies of check-only requests are read to this many bytes at most (then aborted).
CHECK_BODY_BYTES = 1024 * 1024
#: Reusable verdicts of external links carried over from the previous check in the folder.
CACHE_FILE = "check-cache.jsonl"
#: Files of a check that a new check in the same folder replaces.
CHECK_FILES = (
    "state.json",
    "checkpoint.json",
    "frontier.sqlite",
    "frontier.sqlite-wal",
    "frontier.sqlite-shm",
    "frontier.sqlite-journal",
    "cookies.json",
    "pages.jsonl",
    "links.tsv",
    "links.tsv.zst",
    "report.json",
    ANCHORS_FILE,
    CACHE_FILE,
)

#: Error kinds that fail a whole host at once (robots.txt time or a connection attempt).
HOST_ERROR_KINDS = frozenset({"dns", "connect", "tls", "blocked_address"})
#: Outcomes worth reusing from a previous check (transient failures are checked again).
_CACHEABLE_STATUSES = frozenset({404, 410})
#: Media types whose ids a fragment can name (the HTML Standard's "indicated part").
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", None})


def host_failure(kind: str, detail: str) -> bool:
    """Is this fetch error about the host rather than the URL (DNS, TLS, no connection)?

    True for kinds "dns", "tls", "blocked_address", a "connect" error while connecting
    (detail ``"connect: HOST:PORT: reason"``, not a reset in the middle of a response) and
    a connect timeout (``"timeout (connect)..."``).
    """
    if kind in ("dns", "tls", "blocked_address"):
        return True
    if kind == "connect":
        return " during " not in detail
    return kind == "timeout" and detail.startswith("timeout (connect)")


class CheckPolicy(LeasePolicy):
    """What the crawler does differently in link-checking mode (``settings.check_links``).

    Args:
        settings: the crawl's settings; ``scope`` (host/domain/any, include, exclude --
            ``--ignore`` patterns are part of exclude) and ``politeness.robots_retry_s``
            (how long a failed host stays failed) are used.
        seeds: canonical seed URLs (more with :meth:`add_seed`).
        clock: seconds, for the failed-host memory.

    Attributes:
        no_head_hosts: hosts whose HEAD answered 405/501 while GET worked: checked with GET
            only from then on (saves a request per link).
        get_only: URLs whose HEAD already failed (>= 400): their next attempt is a GET.
    """

    rejudges_links = True

    def __init__(
        self,
        settings: CrawlSettings,
        seeds: Sequence[str] = (),
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        sc = settings.scope
        # the host part of the scope alone: include/exclude are judged separately below
        self._hosts = ScopeRule(replace(sc, include=(), exclude=()), list(seeds))
        self._include = tuple(re.compile(p) for p in sc.include)
        self._exclude = tuple(re.compile(p) for p in sc.exclude)
        self._clock = clock
        self._failed: dict[str, tuple[float, str, str]] = {}
        self._cache: dict[str, dict[str, Any]] = {}
        self.no_head_hosts: set[str] = set()
        self.get_only: set[str] = set()
        #: check_only URLs linked with a #fragment: fetched with GET and their ids read
        self._want_ids: set[str] = set()
        #: page URL -> (ids, cut) read by fetch() or carried in the cache, until written
        self._ids: dict[str, tuple[frozenset[str], bool]] = {}
        #: check_only URLs fetched (or reused from the cache) without reading their ids
        self._read_plain: set[str] = set()

    def add_seed(self, canonical_url: str) -> None:
        """Extend the internal hosts with a seed's (as :meth:`ScopeRule.add_seed`)."""
        self._hosts.add_seed(canonical_url)

    def is_internal(self, canonical_url: str) -> bool:
        """True if the URL's host is one the check crawls (scope host/domain/any)."""
        return self._hosts.in_scope(canonical_url)

    def excluded(self, canonical_url: str) -> bool:
        """True if ``--exclude`` / ``--ignore`` matches (``re.search``): never fetched."""
        return any(p.search(canonical_url) for p in self._exclude)

    def check_only_for(self, decision: str, canonical_url: str, kind: str) -> bool | None:
        """How a link found on a crawled page is handled in check mode.

        Args:
            decision: the crawl's decision (:class:`skitter.rules.Decision` value).
            canonical_url: the link's canonical URL.
            kind: the link kind (:attr:`skitter.models.Link.kind`; "redirect" for a
                redirect target).

        Returns:
            None: keep ``decision`` (not fetched: excluded, scheme, length, limit...);
            False: queue it as a page (crawled); True: queue it as ``check_only``.
        """
        if decision == "queued":
            return kind in RESOURCE_KINDS
        if decision == "scope":
            if self.excluded(canonical_url):
                return None
            return True  # another host, or in scope but not matching --include
        if decision in ("nofollow", "depth"):
            return True
        return None

    def note_fragment(self, canonical_url: str, fragment: str, kind: str) -> bool:
        """A checked (external) link points at ``#fragment`` of ``canonical_url``: the page
        is fetched with GET (never HEAD) and its ids read, once per URL. Text fragments
        (``#:~:text=``) and the top of the page (``#top``) need no ids; nor do resources
        (``kind`` in RESOURCE_KINDS: an SVG sprite's ``#icon`` is not an HTML id)."""
        if not self.settings.check_fragments or kind in RESOURCE_KINDS:
            return False
        frag = fragment.split(":~:", 1)[0]
        if not frag or frag.lower() == "top" or canonical_url in self._want_ids:
            return False
        self._want_ids.add(canonical_url)
        # already checked without its ids (HEAD, or a cached verdict): read it once more
        return canonical_url in self._read_plain

    def fragment_targets(self, url: str) -> tuple[frozenset[str], bool] | None:
        """``(ids, cut)`` of the external page at ``url`` read by :meth:`fetch` (or carried
        in the cache), handed over once for anchors.jsonl; None if not read."""
        return self._ids.pop(url, None)

    def fail_host(self, host: str, kind: str, detail: str) -> None:
        """Remember that ``host`` failed with a host-level error (``robots_retry_s``)."""
        until = self._clock() + self.settings.politeness.robots_retry_s
        self._failed[host] = (until, kind, detail)

    def failed_host(self, host: str) -> tuple[str, str] | None:
        """``(kind, detail)`` if ``host`` failed at the DNS/connection level recently."""
        hit = self._failed.get(host)
        if hit is None:
            return None
        if hit[0] <= self._clock():
            del self._failed[host]
            return None
        return hit[1], hit[2]

    def set_cache(self, records: Iterable[dict[str, Any]], out_dir: Path | None = None) -> int:
        """Use these pages.jsonl records as verdicts of external URLs (by ``url``).

        With ``out_dir`` they are also written to :data:`CACHE_FILE` there, so that a
        resumed check uses them too. Returns the number of entries.
        """
        self._cache = {r["url"]: r for r in records}
        if out_dir is not None:
            path = out_dir / CACHE_FILE
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                for r in self._cache.values():
                    fh.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
            os.replace(tmp, path)
        return len(self._cache)

    def load_cache(self, out_dir: Path) -> int:
        """Load :data:`CACHE_FILE` of ``out_dir`` if there is one (resume). Returns entries."""
        path = out_dir / CACHE_FILE
        if path.exists():
            self._cache = {r["url"]: r for r in read_records(path) if "url" in r}
        return len(self._cache)

    def cached(self, url: str) -> dict[str, Any] | None:
        """The reusable pages.jsonl record of ``url`` from a previous check, or None."""
        return self._cache.get(url)

    # ------------------------------------------------------------ the lease-policy port

    def reused_record(self, request: Request) -> PageRecord | None:
        """The record of a ``check_only`` request whose verdict is reused from a previous
        check (``--cache-age``): no request is sent. None for anything else."""
        cached = self.cached(request.url) if request.check_only else None
        if cached is None:
            return None
        if request.requested_url not in self._want_ids:
            self._read_plain.add(request.requested_url)
        else:
            ids = cached.get("ids")
            if not isinstance(ids, list):
                return None  # checked by HEAD last time: its ids are needed now
            self._ids[cached["final_url"]] = (frozenset(map(str, ids)), bool(cached.get("ids_cut")))
        hops = [*request.redirects]
        hops += [Hop(h["url"], int(h["status"])) for h in cached.get("redirects") or ()]
        return PageRecord(
            url=request.requested_url,
            final_url=cached["final_url"],
            status=cached.get("status"),
            depth=request.depth,
            content_type=cached.get("content_type"),
            bytes=int(cached.get("bytes") or 0),
            sha1=cached.get("sha1"),
            fetched_at=cached["fetched_at"],
            elapsed_s=0.0,
            attempts=0,
            redirects=hops,
            error=None,
            error_detail="verdict reused from a previous check (--cache-age)",
        )

    def robots_failure_is_final(self, error_kind: str) -> bool:
        """Any host-level failure (:data:`HOST_ERROR_KINDS`) of robots.txt fails the link."""
        return error_kind in HOST_ERROR_KINDS

    def fetch_failed(self, host: str, kind: str, detail: str) -> None:
        """Remember a host-level failure (:func:`host_failure`) for the host's other links."""
        if host_failure(kind, detail):
            self.fail_host(host, kind, detail)

    async def fetch(self, fetcher: Fetcher, request: Request, host: str, pause: Pause) -> Response:
        """Fetch a ``check_only`` request: HEAD, then GET if HEAD is refused (C20); any other
        request as a crawl does.

        HEAD is trusted when 2xx. A HEAD 3xx or status >= 400, or a HEAD failure other than
        at the DNS/connection level, is confirmed with a GET of the same URL (never of
        HEAD's redirect target; after the host's delay, ``pause``) whose body is read to
        :data:`CHECK_BODY_BYTES` at most; a larger body counts by its status
        (``BodyTooLarge`` "(HTTP status N)"), never as an error. A HEAD 429 (or 5xx with
        Retry-After) is returned as is, so the retry, after the wait, is the GET. Hosts that
        refuse HEAD (405/501 while GET works) get GET only from then on.

        Raises:
            FetchError: as :meth:`skitter.fetch.base.Fetcher.fetch`.
        """
        if not request.check_only:
            return await fetcher.fetch(request)
        if request.requested_url in self._want_ids:
            return await self._fetch_ids(fetcher, request)
        self._read_plain.add(request.requested_url)
        head_status: int | None = None
        if request.url not in self.get_only and host not in self.no_head_hosts:
            head: Response | None = None
            try:
                head = await fetcher.fetch(request, method="HEAD")
            except FetchError as exc:
                if exc.kind in HOST_ERROR_KINDS:
                    raise
                self.get_only.add(request.url)  # HEAD is unreliable here: GET from now on
            if head is not None:
                if head.status < 300:
                    return head
                # HEAD is not GET: a HEAD redirect may lead elsewhere than the GET's (an
                # error page); the GET of this URL decides, never one of HEAD's target
                head_status = head.status
                self.get_only.add(request.url)
                if head.status == 429 or (
                    head.status >= 500 and head.header("retry-after") is not None
                ):
                    return head
            await pause()
        try:
            resp = await fetcher.fetch(request, max_body_bytes=CHECK_BODY_BYTES)
        except BodyTooLarge as exc:
            status = status_from_detail(exc.detail)
            if status is None:
                raise
            resp = Response(url=request.url, status=status)
        if head_status in (405, 501) and resp.status < 400:
            self.no_head_hosts.add(host)
        return resp

    async def _fetch_ids(self, fetcher: Fetcher, request: Request) -> Response:
        """GET a page linked with a #fragment, up to ``--max-body`` bytes (cut there, not
        refused), and keep its ids (HTML only) for :meth:`fragment_targets`."""
        resp = await fetcher.fetch(
            request, max_body_bytes=self.settings.fetch.max_body_bytes, truncate=True
        )
        if 200 <= resp.status < 300 and resp.content_type in _HTML_TYPES:
            page = extract(resp.body, request.url, resp.header("content-type"), ids=True)
            self._ids[request.url] = (page.ids, resp.truncated)
        return resp


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def collect_cache(
    out_dir: Path, policy: CheckPolicy, max_age_s: float, now_epoch: float
) -> list[dict[str, Any]]:
    """Reusable verdicts of external links from the previous check stored in ``out_dir``.

    Reads its pages.jsonl and its own carried-over :data:`CACHE_FILE`; keeps, per URL, the
    newest record that is (a) of an external URL for ``policy`` (not an internal host),
    (b) at most ``max_age_s`` seconds old (``fetched_at``), and (c) a stable outcome: a final
    2xx (after redirects, if any) or 404/410. Everything else (timeouts, DNS and connection
    failures, 403, 429, 5xx...) is checked again. Returns the records (pages.jsonl dicts),
    with ``"ids"`` (and ``"ids_cut"``) added for pages whose fragment targets were read.
    """
    if max_age_s <= 0:
        return []
    best: dict[str, tuple[float, dict[str, Any]]] = {}
    for name in (CACHE_FILE, "pages.jsonl"):
        path = out_dir / name
        if not path.exists():
            continue
        for r in read_records(path):
            url, status = r.get("url"), r.get("status")
            if not isinstance(url, str) or r.get("error") is not None:
                continue
            if not isinstance(status, int):
                continue
            if not (200 <= status < 300 or status in _CACHEABLE_STATUSES):
                continue
            when = _epoch(r.get("fetched_at"))
            if when is None or now_epoch - when > max_age_s or policy.is_internal(url):
                continue
            if url not in best or best[url][0] < when:
                best[url] = (when, r)
    # the ids of the pages read for fragments travel with their verdicts
    anchors = read_anchors(out_dir / ANCHORS_FILE)
    cut = read_cut_pages(out_dir / ANCHORS_FILE)
    out = []
    for _, r in sorted(best.values(), key=lambda x: x[1]["url"]):
        final = r.get("final_url")
        if isinstance(final, str) and final in anchors:
            r = {**r, "ids": sorted(anchors[final]), "ids_cut": final in cut}
        out.append(r)
    return out
