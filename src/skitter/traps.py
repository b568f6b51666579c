"""Spider-trap defences: bounds that hold when a site generates URLs without end.

A :class:`TrapGuard` sees every URL the crawler is about to queue (links and redirect
targets; seeds are admitted unchecked) and drops those that look like a trap:

==========================  ==========  =============================================
defence                     decision    drops a URL when
==========================  ==========  =============================================
``repeated_segments``       ``trap``    one path segment occurs more than
                                        ``max_segment_repeats`` times (default 2):
                                        ``/a/b/a/b/a/b/``, ``/x/x/x``; also catches
                                        relative links that grow a path forever
``path_depth``              ``trap``    the path has more than ``max_path_depth``
                                        segments (default 32)
``query_variants``          ``trap``    its scheme + host + path already has
                                        ``max_query_variants_per_path`` distinct
                                        queries queued (default 100): calendars,
                                        faceted search, sort/filter permutations
``max_pages_per_host``      ``limit``   its host already has ``max_pages_per_host``
                                        distinct URLs queued (off by default)
==========================  ==========  =============================================

Session ids in every link (``;jsessionid=...``, ``?PHPSESSID=...``) are not a defence
here: :func:`skitter.urls.canonicalize` removes them, so the dedup key never changes.

Budgets count *distinct admitted* URLs: a URL already admitted passes again (the frontier
then calls it ``seen``), so a link to one of the first 100 calendar pages is never called a
trap. Only queued URLs spend budget; a dropped URL spends nothing. Memory: one 64-bit key
(a string hash, see :func:`_key`) per admitted URL that has a query (at most
``max_query_variants_per_path`` per path) and, with ``max_pages_per_host``, per admitted URL.

All checks look at the canonical URL only (:func:`skitter.urls.canonicalize`); nothing
here does I/O except :meth:`TrapGuard.replay_links`, which rebuilds the budgets of a
resumed crawl from its links.tsv.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skitter.rules import Decision
from skitter.settings import ScopeSettings
from skitter.urls import host_key

__all__ = ["DEFENCES", "MAX_REPORTED_URLS", "TrapGuard", "TrapVerdict", "path_depth"]

#: The defences, in the order they are checked and reported.
DEFENCES = ("repeated_segments", "path_depth", "query_variants", "max_pages_per_host")

#: URLs listed per defence in the report (the count is always complete).
MAX_REPORTED_URLS = 100


@dataclass(frozen=True, slots=True)
class TrapVerdict:
    """Why a URL was dropped.

    Attributes:
        decision: :attr:`Decision.TRAP` or :attr:`Decision.LIMIT` (per-host cap).
        defence: one of :data:`DEFENCES`.
        detail: a short human-readable reason (for logs and error details).
    """

    decision: Decision
    defence: str
    detail: str


#: Paths whose :meth:`TrapGuard._pure_check` verdict is remembered (≈ 10 MB at most).
_PATH_MEMO_SIZE = 1 << 16


def _key(text: str) -> int:
    """The in-memory 64-bit key of a URL, path or query in the budgets: Python's string
    hash (SipHash, 64 bits on 64-bit builds). Budgets are never written to disk (they are
    rebuilt from links.tsv on resume), so a per-process hash is enough, and it costs a
    tenth of :func:`skitter.urls.fingerprint`."""
    return hash(text)


def _split(canonical_url: str) -> tuple[str, str, str | None]:
    """(scheme://authority, path, query or None) of a canonical http(s) URL."""
    start = canonical_url.find("://")
    start = start + 3 if start >= 0 else 0
    p = canonical_url.find("/", start)
    if p < 0:
        return canonical_url, "/", None
    q = canonical_url.find("?", p)
    if q < 0:
        return canonical_url[:p], canonical_url[p:], None
    return canonical_url[:p], canonical_url[p:q], canonical_url[q + 1 :]


def path_depth(path: str) -> int:
    """Number of segments of a URL path; a trailing empty one (``/a/``) does not count.

    ``"/"`` → 0, ``"/a"`` and ``"/a/"`` → 1, ``"/a/b"`` → 2, ``"/a//b"`` → 3 (an empty
    segment counts: ``//`` runs are a trap of their own).
    """
    n = path.count("/")
    return n - 1 if path.endswith("/") else n


def _most_repeated(path: str) -> tuple[str, int]:
    """The non-empty path segment occurring most often, and how often ("", 0 if none)."""
    segs = [seg for seg in path.split("/") if seg]
    if len(set(segs)) == len(segs):  # the common case: no segment repeats
        return (segs[0], 1) if segs else ("", 0)
    seg, n = Counter(segs).most_common(1)[0]
    return seg, n


class TrapGuard:
    """Decides, per URL about to be queued, whether it is a trap (see the module table).

    Args:
        settings: ``max_segment_repeats``, ``max_path_depth``,
            ``max_query_variants_per_path`` and ``max_pages_per_host`` (each None or 0 =
            that defence is off).

    Not thread-safe; one per crawl, used from the event loop only.
    """

    def __init__(self, settings: ScopeSettings) -> None:
        # 0 counts as "off", like None (a bound of 0 would forbid every URL)
        self._max_repeats = settings.max_segment_repeats or None
        self._max_depth = settings.max_path_depth or None
        self._max_variants = settings.max_query_variants_per_path or None
        self._max_host = settings.max_pages_per_host or None
        # _key(scheme://host/path) -> _key(query) (one variant) or a set of them
        self._variants: dict[int, int | set[int]] = {}
        # host key -> _key of admitted URLs (only with max_pages_per_host)
        self._hosts: dict[str, set[int]] = {}
        self._counts: Counter[str] = Counter()
        self._urls: dict[str, list[str]] = {d: [] for d in DEFENCES}
        # path -> verdict of the pure path checks (pages link the same paths again and again)
        self._path_verdicts: dict[str, TrapVerdict | None] = {}

    # ----------------------------------------------------------------- decisions

    def _path_check(self, path: str) -> TrapVerdict | None:
        """:meth:`_pure_check`, memoised (bounded: the memo is emptied when it is full)."""
        cache = self._path_verdicts
        try:
            return cache[path]
        except KeyError:
            pass
        if len(cache) >= _PATH_MEMO_SIZE:
            cache.clear()
        verdict = cache[path] = self._pure_check(path)
        return verdict

    def _pure_check(self, path: str) -> TrapVerdict | None:
        if self._max_repeats is not None:
            seg, n = _most_repeated(path)
            if n > self._max_repeats:
                return TrapVerdict(
                    Decision.TRAP,
                    "repeated_segments",
                    f"path segment {seg!r} occurs {n} times (at most {self._max_repeats})",
                )
        if self._max_depth is not None:
            depth = path_depth(path)
            if depth > self._max_depth:
                return TrapVerdict(
                    Decision.TRAP,
                    "path_depth",
                    f"path has {depth} segments (at most {self._max_depth})",
                )
        return None

    def _host_set(self, canonical_url: str) -> set[int] | None:
        """The admitted-URL set of the URL's host (None if the cap is off or no host)."""
        if self._max_host is None:
            return None
        try:
            hk = host_key(canonical_url)
        except ValueError:
            return None
        return self._hosts.setdefault(hk, set())

    def admit(self, canonical_url: str) -> TrapVerdict | None:
        """Check ``canonical_url`` and, if it passes, spend its budgets.

        Args:
            canonical_url: the URL about to be queued (:func:`skitter.urls.canonicalize`);
                its :func:`skitter.urls.host_key` is the per-host cap's unit.

        Returns:
            None if the URL may be queued (it now counts against its path's query
            variants and its host's cap), else the :class:`TrapVerdict` (counted and,
            within the first :data:`MAX_REPORTED_URLS`, listed in :meth:`report`).
            Never raises.
        """
        prefix, path, query = _split(canonical_url)
        verdict = self._path_check(path)
        if verdict is not None:
            self._dropped(verdict.defence, canonical_url)
            return verdict
        host_set = self._host_set(canonical_url)
        url_fp = _key(canonical_url) if host_set is not None else 0
        if (
            host_set is not None
            and self._max_host is not None
            and url_fp not in host_set
            and len(host_set) >= self._max_host
        ):
            verdict = TrapVerdict(
                Decision.LIMIT,
                "max_pages_per_host",
                f"its host already has {len(host_set)} URLs queued (at most {self._max_host})",
            )
            self._dropped(verdict.defence, canonical_url)
            return verdict
        if query is not None and self._max_variants is not None:
            full = self._spend_variant(prefix + path, query, self._max_variants)
            if full:
                return self._drop_variant(canonical_url, full)
        if host_set is not None:
            host_set.add(url_fp)
        return None

    def _spend_variant(self, path_key: str, query: str, limit: int | None) -> int:
        """Count ``query`` as a variant of ``path_key`` (scheme + host + path); with
        ``limit``, when the path already has that many other queries, count nothing and
        return that number (the URL is a trap), else 0."""
        key = _key(path_key)
        q_fp = _key(query)
        known = self._variants.get(key)
        if known is None:
            self._variants[key] = q_fp
        elif isinstance(known, int):
            if known != q_fp:
                if limit == 1:
                    return 1
                self._variants[key] = {known, q_fp}
        elif q_fp not in known:
            if limit is not None and len(known) >= limit:
                return len(known)
            known.add(q_fp)
        return 0

    def _drop_variant(self, canonical_url: str, n: int) -> TrapVerdict:
        verdict = TrapVerdict(
            Decision.TRAP,
            "query_variants",
            f"its path already has {n} distinct queries queued (at most {self._max_variants})",
        )
        self._dropped(verdict.defence, canonical_url)
        return verdict

    def note(self, canonical_url: str) -> None:
        """Spend the budgets of a URL queued without a check (a seed, a replayed link).

        Idempotent per URL. Never drops, never raises.
        """
        prefix, path, query = _split(canonical_url)
        host_set = self._host_set(canonical_url)
        if host_set is not None:
            host_set.add(_key(canonical_url))
        if query is not None and self._max_variants is not None:
            self._spend_variant(prefix + path, query, None)

    def _dropped(self, defence: str, url: str) -> None:
        self._counts[defence] += 1
        urls = self._urls[defence]
        if len(urls) < MAX_REPORTED_URLS:
            urls.append(url)

    # ----------------------------------------------------------------- report / state

    def report(self) -> dict[str, dict[str, Any]]:
        """The report.json "traps" section.

        ``{defence: {"limit": int | None, "count": int, "urls": [str, ...]}}`` for every
        defence of :data:`DEFENCES`: its setting (None = off), how many URLs it dropped and
        the first :data:`MAX_REPORTED_URLS` of them.
        """
        limits = {
            "repeated_segments": self._max_repeats,
            "path_depth": self._max_depth,
            "query_variants": self._max_variants,
            "max_pages_per_host": self._max_host,
        }
        return {
            d: {"limit": limits[d], "count": self._counts[d], "urls": list(self._urls[d])}
            for d in DEFENCES
        }

    def to_state(self) -> dict[str, Any]:
        """The drop counters and listed URLs, JSON-ready (for the crawl checkpoint).

        The budgets are not included: :meth:`replay_links` rebuilds them on resume.
        """
        return {"counts": dict(self._counts), "urls": {d: list(u) for d, u in self._urls.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`to_state` returned (unknown keys and bad values are ignored)."""
        counts = state.get("counts")
        if isinstance(counts, dict):
            for d in DEFENCES:
                v = counts.get(d)
                if isinstance(v, int) and v >= 0:
                    self._counts[d] = v
        urls = state.get("urls")
        if isinstance(urls, dict):
            for d in DEFENCES:
                lst = urls.get(d)
                if isinstance(lst, list):
                    self._urls[d] = [u for u in lst if isinstance(u, str)][:MAX_REPORTED_URLS]

    def replay(self, queued: Iterable[str]) -> None:
        """:meth:`note` every canonical URL of ``queued`` (resume)."""
        for url in queued:
            self.note(url)

    def replay_links(self, links_tsv: str | Path) -> int:
        """Rebuild the budgets of a resumed crawl from its links.tsv (every queued row).

        Every URL the crawl ever queued from a link or a redirect has a links.tsv row with
        decision ``queued``; seeds are noted again when the crawl adds them. Only rows that
        matter are parsed: ones with a query, and all of them when ``max_pages_per_host`` is
        set. Reads the file once, sequentially.

        Returns:
            The number of rows replayed. A missing file replays nothing.

        Raises:
            OSError: the file exists but cannot be read.
        """
        from skitter.export.linkfile import open_links
        from skitter.export.links import parse_row

        path = Path(links_tsv)
        if not path.exists() or (self._max_host is None and self._max_variants is None):
            return 0
        need_all = self._max_host is not None
        n = 0
        with open_links(path) as fh:
            for line in fh:
                if not line.endswith(b"\tqueued\n"):
                    continue
                if not need_all and b"?" not in line:
                    continue
                row = parse_row(line.decode("utf-8", errors="replace"))
                if row is None or row.decision != Decision.QUEUED.value or not row.target:
                    continue
                self.note(row.target)
                n += 1
        return n
