"""Scope and link decisions: which discovered links are queued, and why the others are not.

Pure functions of the settings and the seeds; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from skitter.errors import ConfigError
from skitter.settings import ScopeSettings
from skitter.urls import canonicalize_with_host, host_key, registered_domain

__all__ = ["SCOPES", "Decision", "ScopeRule"]

#: Valid values of :attr:`ScopeSettings.scope`.
SCOPES = ("host", "domain", "any")


class Decision(StrEnum):
    """What happened to a discovered link (the value is written to links.tsv).

    TRAP (and LIMIT for the per-host cap) come from :mod:`skitter.traps`, the others from
    :meth:`ScopeRule.decide` and the frontier (SEEN).
    """

    QUEUED = "queued"
    SEEN = "seen"
    SCOPE = "scope"
    NOFOLLOW = "nofollow"
    DEPTH = "depth"
    SCHEME = "scheme"
    URL_LENGTH = "url_length"
    LIMIT = "limit"
    TRAP = "trap"
    DUPLICATE = "duplicate"
    TYPE = "type"  # path extension not wanted (skitter.typefocus)


def _compile(patterns: Sequence[str], what: str) -> tuple[re.Pattern[str], ...]:
    compiled: list[re.Pattern[str]] = []
    for pat in patterns:
        try:
            compiled.append(re.compile(pat))
        except re.error as exc:
            raise ConfigError(f"invalid {what} regex {pat!r}: {exc}") from None
    return tuple(compiled)


def _strip_port(hk: str) -> str:
    """Host name part of a host key ("a.test:8080" → "a.test", "[::1]:81" → "[::1]")."""
    if hk.startswith("["):
        return hk[: hk.find("]") + 1]
    return hk.partition(":")[0]


class ScopeRule:
    """Decides, for every link found, whether it is queued (see :meth:`decide`).

    Scope ("host", "domain" or "any", from :class:`ScopeSettings`):

    * host: the URL's :func:`~skitter.urls.host_key` (host plus non-default port) equals
      a seed's;
    * domain: the registered domain (eTLD+1, Public Suffix List) of its host equals a
      seed's;
    * any: every http(s) URL.

    Then, if ``include`` regexes are given one must match (``re.search`` on the canonical
    URL), and no ``exclude`` regex may match.
    """

    __slots__ = (
        "_any",
        "_domain",
        "_domains",
        "_exclude",
        "_host_keys",
        "_include",
        "_patterns",
        "settings",
    )

    def __init__(self, settings: ScopeSettings, seeds: Sequence[str]) -> None:
        """Build the rule.

        Args:
            settings: scope settings.
            seeds: canonical seed URLs.

        Raises:
            ConfigError: unknown scope, an invalid include/exclude regex, or a seed that
                is not an absolute URL with a host (one-line message).
        """
        if settings.scope not in SCOPES:
            raise ConfigError(
                f"invalid scope {settings.scope!r}: expected one of {', '.join(SCOPES)}"
            )
        self.settings = settings
        self._any = settings.scope == "any"
        self._domain = settings.scope == "domain"
        self._include = _compile(settings.include, "include")
        self._exclude = _compile(settings.exclude, "exclude")
        self._patterns = bool(self._include or self._exclude)
        self._host_keys: set[str] = set()
        self._domains: set[str] = set()
        for seed in seeds:
            self.add_seed(seed)

    def add_seed(self, canonical_url: str) -> None:
        """Extend the scope with the host (and registered domain) of a new seed.

        Raises:
            ConfigError: ``canonical_url`` is not an absolute URL with a host.
        """
        try:
            hk = host_key(canonical_url)
        except ValueError as exc:
            raise ConfigError(f"invalid seed URL {canonical_url!r}: {exc}") from None
        self._host_keys.add(hk)
        if self._domain:  # registered domains only for this scope (the PSL loads on demand)
            self._domains.add(registered_domain(_strip_port(hk)))

    def _host_in_scope(self, hk: str) -> bool:
        if self._any:
            return True
        if self._domain:
            return registered_domain(_strip_port(hk)) in self._domains
        return hk in self._host_keys

    def _patterns_ok(self, canonical_url: str) -> bool:
        if self._include and not any(p.search(canonical_url) for p in self._include):
            return False
        return not any(p.search(canonical_url) for p in self._exclude)

    def in_scope(self, canonical_url: str) -> bool:
        """True if ``canonical_url`` is within the crawl scope and passes include/exclude.

        Args:
            canonical_url: a URL as returned by :func:`skitter.urls.canonicalize`.
                Unparseable URLs are out of scope.
        """
        try:
            hk = host_key(canonical_url)
        except ValueError:
            return False
        return self._host_in_scope(hk) and self._patterns_ok(canonical_url)

    def decide_page(
        self, links: Sequence[tuple[str | None, bool]], *, depth: int, is_seed_page: bool
    ) -> list[tuple[Decision, str | None]]:
        """:meth:`decide` for every link of one page, each judged as ``decide(url,
        nofollow=nofollow, index=position)`` would: same results, but a link repeated on the
        page (same URL and nofollow) is judged once.

        Args:
            links: ``(absolute URL or None, nofollow)`` per link, in document order.
            depth, is_seed_page: as for :meth:`decide`, the same for the whole page.

        Returns:
            One ``(decision, canonical URL)`` per link, in order.
        """
        s = self.settings
        cap = s.max_seed_links if is_seed_page and s.max_seed_links is not None else None
        if cap is None:
            cap = s.max_links_per_page
        memo: dict[tuple[str | None, bool], tuple[Decision, str | None]] = {}
        out: list[tuple[Decision, str | None]] = []
        for i, key in enumerate(links):
            r = memo.get(key) if cap is None or i < cap else None  # the cap: per position
            if r is None:
                r = self.decide(
                    key[0], depth=depth, nofollow=key[1], index=i, is_seed_page=is_seed_page
                )
                if cap is None or i < cap:
                    memo[key] = r
            out.append(r)
        return out

    def decide(
        self,
        raw_url: str | None,
        *,
        depth: int,
        nofollow: bool,
        index: int,
        is_seed_page: bool,
    ) -> tuple[Decision, str | None]:
        """Decide what to do with one link found on a page.

        Checks, in this order: not parseable or not http(s) → SCHEME; canonical URL longer
        than ``max_url_length`` characters → URL_LENGTH; ``index`` at or past the page's
        link cap (``max_seed_links`` on seed pages when set, else ``max_links_per_page``)
        → LIMIT; out of scope or include/exclude → SCOPE; rel=nofollow without
        ``follow_nofollow`` → NOFOLLOW; ``depth > max_depth`` → DEPTH; else QUEUED
        (the crawl's :class:`skitter.traps.TrapGuard` may still turn it into TRAP or
        LIMIT, and the frontier into SEEN).

        Args:
            raw_url: the absolute link URL (fragment allowed), or None if it did not parse.
            depth: the depth the linked page would have (parent depth + 1).
            nofollow: the link (or its page) is marked nofollow.
            index: 0-based position of the link in the page's link list.
            is_seed_page: the page holding the link is a seed.

        Returns:
            ``(decision, canonical URL)``; the URL is None only for SCHEME.
        """
        if raw_url is None:
            return Decision.SCHEME, None
        res = canonicalize_with_host(raw_url)
        if res is None:
            return Decision.SCHEME, None
        canonical, hk = res
        s = self.settings
        if len(canonical) > s.max_url_length:
            return Decision.URL_LENGTH, canonical
        cap = s.max_seed_links if is_seed_page and s.max_seed_links is not None else None
        if cap is None:
            cap = s.max_links_per_page
        if cap is not None and index >= cap:
            return Decision.LIMIT, canonical
        if self._any:
            pass
        elif self._domain:
            if registered_domain(_strip_port(hk)) not in self._domains:
                return Decision.SCOPE, canonical
        elif hk not in self._host_keys:
            return Decision.SCOPE, canonical
        if self._patterns and not self._patterns_ok(canonical):
            return Decision.SCOPE, canonical
        if nofollow and not s.follow_nofollow:
            return Decision.NOFOLLOW, canonical
        if s.max_depth is not None and depth > s.max_depth:
            return Decision.DEPTH, canonical
        return Decision.QUEUED, canonical
