"""Per-origin robots.txt cache: fetch once, follow redirects, apply RFC 9309 §2.3/§2.4.

I/O goes only through an injected fetch function (no HTTP library here) and time only
through an injected clock, so tests drive it with fakes.

Outcome of fetching ``origin + "/robots.txt"`` (RFC 9309 §2.3.1):

==========================  ===================  ==============  ==================
result                      rules                snapshot status  kept for
==========================  ===================  ==============  ==================
2xx (any content type)      parsed body          "ok"            ``ttl_s``
3xx with Location           followed, ≤ 5 hops   (final result)
more than 5 redirects       allow all            "redirect_limit" ``ttl_s``
3xx, no usable Location     allow all            "redirect_invalid" ``ttl_s``
4xx (incl. 401, 403)        allow all            "4xx"           ``ttl_s``
5xx (or other status)       disallow all         "5xx"           ``retry_s``
FetchError / OSError        disallow all         "unreachable"   the retry backoff
==========================  ===================  ==============  ==================

A robots.txt that got no response at all (connect or TLS failure, timeout) is asked again
after the same exponential backoff as a failed page fetch (:func:`skitter.politeness.backoff_s`
of the origin's consecutive failures: 2 s, 4 s ... 60 s, the ``--retries`` schedule), not
after ``retry_s``, which is the wait RFC 9309 §2.3.1.4 asks for after a server error (5xx).

The result of a redirect chain applies to the origin that was asked for only; it is
never stored under the origin of the redirect target (RFC 9309 §2.3.1.2).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from skitter import urls
from skitter.errors import FetchError
from skitter.models import Response
from skitter.politeness import backoff_s
from skitter.robots import MAX_ROBOTS_BYTES, RobotsRules

__all__ = [
    "MAX_ROBOTS_REDIRECTS",
    "FetchFn",
    "RobotsCache",
    "RobotsCheck",
    "RobotsEntry",
    "RobotsVerdictSource",
    "origin_of",
]

#: GET one absolute URL without following redirects; raises :class:`skitter.errors.FetchError`.
FetchFn = Callable[[str], Awaitable[Response]]

#: Redirect hops followed for a robots.txt (RFC 9309 §2.3.1.2: at least five).
MAX_ROBOTS_REDIRECTS = 5

_DEFAULT_PORTS = {"http": "80", "https": "443"}

log = logging.getLogger("skitter")
politeness_log = logging.getLogger("skitter.politeness")

#: What each robots.txt outcome means for the origin's URLs (for the -v log).
_MEANING = {
    "ok": "rules apply",
    "4xx": "allow all",
    "redirect_limit": "allow all",
    "redirect_invalid": "allow all",
    "5xx": "disallow all",
    "unreachable": "disallow all",
}


def _log_outcome(entry: RobotsEntry, cache_s: float) -> None:
    """One ``skitter.politeness`` INFO line per robots.txt fetch: origin, outcome, meaning,
    Crawl-delay and when it is asked again."""
    if not politeness_log.isEnabledFor(logging.INFO):
        return
    what = str(entry.http_status) if entry.http_status is not None else entry.error or "-"
    delay = f", crawl-delay {entry.crawl_delay_s:g} s" if entry.crawl_delay_s is not None else ""
    politeness_log.info(
        "robots.txt %s: %s (%s: %s%s), asked again in %g s",
        entry.origin, what, entry.status, _MEANING.get(entry.status, entry.status), delay,
        cache_s,
    )  # fmt: skip


#: :func:`origin_of` by URL prefix (see there); emptied when it reaches the limit.
_ORIGINS: dict[str, str] = {}
_ORIGINS_MAX = 4096


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of an absolute URL, lower-cased, default port dropped.

    Asked for every URL fetched (its robots.txt rules, its tally): an ``http(s)://`` URL's
    answer is kept by its prefix up to the first ``/`` after the scheme, which holds the
    whole authority (it ends at the first ``/``, ``?`` or ``#``), so the prefix has the
    same origin.

    Raises:
        ValueError: ``url`` has no scheme or no host.
    """
    if not url.startswith(("http://", "https://")):
        return _origin_of(url)
    p = url.find("/", 8)
    key = url if p < 0 else url[:p]
    got = _ORIGINS.get(key)
    if got is None:
        got = _origin_of(key)
        if len(_ORIGINS) >= _ORIGINS_MAX:
            _ORIGINS.clear()
        _ORIGINS[key] = got
    return got


def _origin_of(url: str) -> str:
    """:func:`origin_of` by :func:`urllib.parse.urlsplit`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    netloc = parts.netloc.rpartition("@")[2].lower()
    if not scheme or not netloc:
        raise ValueError(f"not an absolute URL: {url!r}")
    host, sep, port = netloc.rpartition(":")
    if sep and "]" not in port and _DEFAULT_PORTS.get(scheme) == port:
        netloc = host
    elif sep and not port and "]" not in port:
        netloc = host  # "example.test:" (empty port)
    return f"{scheme}://{netloc}"


@dataclass(frozen=True, slots=True)
class RobotsCheck:
    """The robots.txt verdict for one URL.

    Attributes:
        allowed: the URL may be fetched.
        reason: "allowed", "disallowed" (a rule forbids it) or "unreachable" (the
            robots.txt could not be fetched: 5xx or network error; RFC 9309 §2.3.1.4).
        crawl_delay_s: the Crawl-delay of the group that applies, in seconds, or None.
        error_kind: for "unreachable" because of a fetch error, its
            :attr:`~skitter.errors.FetchError.kind` ("dns", "blocked_address", "connect",
            "timeout"...); None for a 5xx answer and for the other reasons.
        error: the fetch error as "kind: detail" (or None), for the record's detail.
    """

    allowed: bool
    reason: str
    crawl_delay_s: float | None
    error_kind: str | None = None
    error: str | None = None


@dataclass(slots=True)
class RobotsEntry:
    """What is known about one origin's robots.txt.

    Attributes:
        origin: ``scheme://host[:port]`` the entry is for.
        rules: the rules to apply.
        status: "ok", "4xx", "5xx", "unreachable", "redirect_limit", "redirect_invalid"
            or "ignored" (see the module table).
        http_status: status of the last response in the chain, or None (no response).
        fetched_at: clock time (seconds) the fetch finished.
        expires_at: clock time (seconds) after which it is fetched again.
        crawl_delay_s: Crawl-delay for the cache's token, seconds, or None.
        final_url: the URL the rules were read from (after redirects), or None.
        redirects: redirect hops followed.
        error: FetchError kind and detail ("timeout: ...") when unreachable, else None.
        error_kind: that FetchError's kind alone ("timeout", "dns"...), else None.
    """

    origin: str
    rules: RobotsRules
    status: str
    http_status: int | None
    fetched_at: float
    expires_at: float
    crawl_delay_s: float | None = None
    final_url: str | None = None
    redirects: int = 0
    error: str | None = None
    error_kind: str | None = None

    @property
    def unreachable(self) -> bool:
        """True when the rules are a disallow-all because the file could not be had."""
        return self.status in ("5xx", "unreachable")


#: What :meth:`RobotsCache.rules_for` returns.
RobotsVerdictSource = RobotsEntry


@dataclass(slots=True)
class _Counts:
    allowed: int = 0
    disallowed: int = 0


@dataclass(slots=True)
class _Outcome:
    rules: RobotsRules
    status: str
    http_status: int | None
    final_url: str | None
    redirects: int
    error: str | None = None
    cache_s: float = field(default=0.0)
    error_kind: str | None = None


class RobotsCache:
    """robots.txt rules per origin, fetched on demand through ``fetch``.

    Args:
        fetch: GETs one absolute URL without following redirects (:data:`FetchFn`).
        token: the crawler's robots.txt product token (see :func:`skitter.robots.product_token`).
        ttl_s: seconds a fetched robots.txt (2xx, 4xx, redirect limit) is reused
            (RFC 9309 §2.4: SHOULD NOT be longer than 24 hours unless unreachable).
        retry_s: seconds a 5xx result (disallow all) is kept before the next check fetches
            again; a fetch without any response is kept for the retry backoff instead.
        clock: returns the current time in seconds (e.g. ``time.monotonic``).
        max_bytes: bytes of the body that are parsed (RFC 9309 §2.5, 500 KiB).
        ignore: do not fetch anything; every URL is allowed.

    Concurrent callers for one origin share a single fetch (single-flight).
    """

    def __init__(
        self,
        fetch: FetchFn,
        *,
        token: str,
        ttl_s: float,
        retry_s: float,
        clock: Callable[[], float],
        max_bytes: int = MAX_ROBOTS_BYTES,
        ignore: bool = False,
    ) -> None:
        self._fetch = fetch
        self._token = token
        self._ttl_s = ttl_s
        self._retry_s = retry_s
        self._clock = clock
        self._max_bytes = max_bytes
        self._ignore = ignore
        self._entries: dict[str, RobotsEntry] = {}
        self._inflight: dict[str, asyncio.Future[RobotsEntry]] = {}
        self._counts: dict[str, _Counts] = {}
        self._failures: dict[str, int] = {}  # origin -> consecutive fetches without response
        self._previous: dict[str, dict[str, object]] = {}  # earlier sessions (load_state)
        self.fetches = 0
        """robots.txt GETs issued so far (redirect hops count one each)."""

    @property
    def token(self) -> str:
        """The product token rules are evaluated for."""
        return self._token

    async def rules_for(self, url: str) -> RobotsVerdictSource:
        """The :class:`RobotsEntry` for ``url``'s origin, fetching it if needed.

        A cached entry is returned until its ``expires_at``; then (or the first time)
        one fetch is made, shared by all concurrent callers. Cancelling one caller does
        not cancel the shared fetch.

        Raises:
            ValueError: ``url`` is not absolute.
        """
        origin = origin_of(url)
        if self._ignore:
            now = self._clock()
            return RobotsEntry(origin, RobotsRules.allow_all(), "ignored", None, now, now)
        entry = self._entries.get(origin)
        if entry is not None and self._clock() < entry.expires_at:
            return entry
        task = self._inflight.get(origin)
        if task is None:
            task = asyncio.ensure_future(self._load(origin))
            self._inflight[origin] = task
        return await asyncio.shield(task)

    async def check(self, url: str, *, count: bool = True) -> RobotsCheck:
        """May ``url`` be fetched? (RFC 9309 §2.2.2 rules, §2.3.1 access results.)

        Counts the verdict per origin for :meth:`snapshot` unless ``count`` is False: a
        caller that may ask again for the same URL (a retry, a lease handed back for the
        politeness gap, a sitemap entry fetched later) counts once with :meth:`tally`.

        Raises:
            ValueError: ``url`` is not absolute.
        """
        if self._ignore:
            return RobotsCheck(True, "allowed", None)
        entry = await self.rules_for(url)
        ok = entry.rules.allowed(url, self._token)
        if count:
            self.tally(url, ok)
        if ok:
            return RobotsCheck(True, "allowed", entry.crawl_delay_s)
        if entry.unreachable:
            return RobotsCheck(
                False, "unreachable", entry.crawl_delay_s, entry.error_kind, entry.error
            )
        return RobotsCheck(False, "disallowed", entry.crawl_delay_s)

    def tally(self, url: str, allowed: bool) -> None:
        """Count one final verdict (allowed or not) on ``url`` for its origin in :meth:`snapshot`:
        one per URL, however often :meth:`check` was asked about it."""
        counts = self._counts.setdefault(origin_of(url), _Counts())
        if allowed:
            counts.allowed += 1
        else:
            counts.disallowed += 1

    def crawl_delay(self, url: str) -> float | None:
        """The cached Crawl-delay (seconds) for ``url``'s origin, or None if not known yet."""
        entry = self._entries.get(origin_of(url))
        return entry.crawl_delay_s if entry is not None else None

    def snapshot(self) -> dict[str, dict[str, object]]:
        """Per-origin robots.txt decisions, for report.json.

        ``{origin: {"status", "http_status", "fetched_at", "expires_at", "crawl_delay_s",
        "truncated", "redirects", "final_url", "error", "sitemaps", "allowed",
        "disallowed"}}``; times are clock seconds, counts are :meth:`check` verdicts.
        """
        out: dict[str, dict[str, object]] = {}
        for origin, e in sorted(self._entries.items()):
            counts = self._counts.get(origin, _Counts())
            out[origin] = {
                "status": e.status,
                "http_status": e.http_status,
                "fetched_at": e.fetched_at,
                "expires_at": e.expires_at,
                "crawl_delay_s": e.crawl_delay_s,
                "truncated": e.rules.truncated,
                "redirects": e.redirects,
                "final_url": e.final_url,
                "error": e.error,
                "sitemaps": e.rules.sitemaps,
                "allowed": counts.allowed,
                "disallowed": counts.disallowed,
            }
        for origin, entry in self._previous.items():
            if origin not in out:
                counts = self._counts.get(origin, _Counts())
                out[origin] = {**entry, "allowed": counts.allowed, "disallowed": counts.disallowed}
        return dict(sorted(out.items()))

    def to_state(self) -> dict[str, dict[str, object]]:
        """The per-origin decisions so far (:meth:`snapshot`), for a checkpoint."""
        return self.snapshot()

    def load_state(self, data: dict[str, dict[str, object]]) -> None:
        """Take back the decisions of the earlier sessions of a resumed crawl
        (:meth:`to_state` output): their allow/disallow counts are added to this session's,
        and an origin whose robots.txt is not fetched again keeps its earlier entry in
        :meth:`snapshot`. The rules themselves are fetched again when needed."""
        for origin, entry in data.items():
            if not isinstance(entry, dict):
                continue
            counts = self._counts.setdefault(origin, _Counts())
            counts.allowed += int(entry.get("allowed", 0) or 0)  # type: ignore[call-overload]
            counts.disallowed += int(entry.get("disallowed", 0) or 0)  # type: ignore[call-overload]
            self._previous[origin] = dict(entry)

    async def _load(self, origin: str) -> RobotsEntry:
        """Fetch and store the entry for ``origin``; always clears the in-flight slot."""
        try:
            outcome = await self._fetch_chain(origin + "/robots.txt")
            if outcome.status == "unreachable":
                failures = self._failures[origin] = self._failures.get(origin, 0) + 1
                outcome.cache_s = backoff_s(failures)
            else:
                self._failures.pop(origin, None)
            now = self._clock()
            entry = RobotsEntry(
                origin=origin,
                rules=outcome.rules,
                status=outcome.status,
                http_status=outcome.http_status,
                fetched_at=now,
                expires_at=now + outcome.cache_s,
                crawl_delay_s=outcome.rules.crawl_delay(self._token),
                final_url=outcome.final_url,
                redirects=outcome.redirects,
                error=outcome.error,
                error_kind=outcome.error_kind,
            )
            if outcome.rules.truncated:
                log.warning(
                    "robots.txt of %s is larger than the parse limit: only its first %d bytes "
                    "were parsed (RFC 9309 §2.5)",
                    origin,
                    self._max_bytes,
                )
            self._entries[origin] = entry
            _log_outcome(entry, outcome.cache_s)
            return entry
        finally:
            self._inflight.pop(origin, None)

    async def _fetch_chain(self, url: str) -> _Outcome:
        """GET ``url``, following up to :data:`MAX_ROBOTS_REDIRECTS` redirects."""
        redirects = 0
        while True:
            self.fetches += 1
            try:
                resp = await self._fetch(url)
            except (FetchError, OSError, TimeoutError) as exc:
                kind = getattr(exc, "kind", type(exc).__name__)
                return _Outcome(
                    RobotsRules.disallow_all(),
                    "unreachable",
                    None,
                    url,
                    redirects,
                    error=str(exc) if str(exc).startswith(f"{kind}:") else f"{kind}: {exc}",
                    cache_s=self._retry_s,
                    error_kind=str(kind),
                )
            status = resp.status
            if 200 <= status < 300:
                rules = RobotsRules.parse(resp.body, max_bytes=self._max_bytes)
                return _Outcome(rules, "ok", status, url, redirects, cache_s=self._ttl_s)
            if 300 <= status < 400:
                location = resp.header("location")
                target = urls.join(url, location.strip()) if location else None
                if target is None or urlsplit(target).scheme.lower() not in _DEFAULT_PORTS:
                    return _Outcome(
                        RobotsRules.allow_all(),
                        "redirect_invalid",
                        status,
                        url,
                        redirects,
                        cache_s=self._ttl_s,
                    )
                if redirects >= MAX_ROBOTS_REDIRECTS:
                    # RFC 9309 §2.3.1.2: more than five redirects → unavailable.
                    return _Outcome(
                        RobotsRules.allow_all(),
                        "redirect_limit",
                        status,
                        url,
                        redirects,
                        cache_s=self._ttl_s,
                    )
                redirects += 1
                url = target
                continue
            if 400 <= status < 500:
                # RFC 9309 §2.3.1.3: unavailable (incl. 401/403) → no restrictions.
                return _Outcome(
                    RobotsRules.allow_all(), "4xx", status, url, redirects, cache_s=self._ttl_s
                )
            # RFC 9309 §2.3.1.4: server error (and anything stranger) → complete disallow.
            return _Outcome(
                RobotsRules.disallow_all(), "5xx", status, url, redirects, cache_s=self._retry_s
            )
