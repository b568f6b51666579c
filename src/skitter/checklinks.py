"""Dead-link checking (``skitter check-links``): crawl-side policy, verdicts, the report.

The check runs on the ordinary crawler with ``CrawlSettings.check_links`` on. The crawl side
(:class:`CheckPolicy`, used by :class:`skitter.crawler.Crawler`):

* internal pages (in scope) are crawled as usual: GET, parsed, their links followed;
* every other http(s) link -- another host, ``rel=nofollow``, past ``--max-depth``, in scope
  but not matching ``--include``, and with ``check_resources`` every page resource -- is
  queued as a ``check_only`` request: HEAD first, then GET when HEAD answers >= 400 or fails
  other than at the DNS/connection level (GET bodies read to :data:`CHECK_BODY_BYTES` at
  most, never parsed, never stored); redirects are followed as ``check_only`` too;
* ``--exclude`` / ``--ignore`` matches and unsupported schemes are never fetched;
* a host that fails at the DNS, connection or TLS level fails all its links with that error
  (robots.txt is fetched first, once per host, and its failure is reused; without robots.txt
  the failure is remembered per host for ``robots_retry_s``);
* verdicts of external links from a previous check in the same folder are reused for
  ``--cache-age`` seconds (:func:`collect_cache`, :meth:`CheckPolicy.cached`).

The report side is pure functions over the crawl's outputs: pages.jsonl (one record per URL,
with redirect hops), links.tsv (where each link sits: source, anchor, fragment) and
anchors.jsonl (the fragment targets of each HTML page) -> :func:`build_report` ->
:func:`format_report` (text, json, csv, markdown, html, junit).

Verdicts (one vocabulary, :data:`VERDICTS`):

=========== ==============================================================================
ok          2xx (also after temporary redirects); a 2xx whose body was too large to read
broken      404, 410, other 4xx but those below, 5xx after retries; DNS failure, connection
            refused, TLS error, timeout after retries, protocol error, redirect loop or too
            many redirects, a 3xx without usable Location; ``page#name`` whose page has no
            such ``id`` / ``<a name>`` (error ``missing_fragment``); an unparseable http(s)
            URL (error ``invalid_url``)
unverified  401, 403, 407, 429 (after retries), 451, 999, 1xx, other statuses >= 600;
            robots.txt unreachable -- could not be checked, not proof the target is gone
redirected  ok, reached through a permanent redirect (301, 308) first: a warning naming the
            new target (the URL after the leading run of permanent hops)
excluded    not checked: robots.txt, scope / ``--exclude`` / ``--ignore``, unsupported
            scheme (mailto:, tel:, data:, javascript:, ftp:...), trap and length limits,
            private address
=========== ==============================================================================

``--accept STATUS,...`` makes those final statuses ok (and permanent hops with an accepted
status are not reported as redirected).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from html import escape as html_escape
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from skitter.export.base import LineJournal
from skitter.export.links import LinkRow, read_rows
from skitter.export.pages import read_records
from skitter.links import RESOURCE_KINDS
from skitter.rules import ScopeRule
from skitter.settings import CrawlSettings

__all__ = [
    "ANCHORS_FILE",
    "CACHE_FILE",
    "CHECK_BODY_BYTES",
    "FORMATS",
    "VERDICTS",
    "AnchorsWriter",
    "CheckPolicy",
    "Entry",
    "Outcome",
    "Report",
    "Source",
    "build_report",
    "classify_final",
    "collect_cache",
    "format_report",
    "fragment_ok",
    "host_failure",
    "load_report",
    "read_anchors",
    "status_from_detail",
]

#: GET bodies of check-only requests are read to this many bytes at most (then aborted).
CHECK_BODY_BYTES = 1024 * 1024
#: Fragment targets of every HTML page: one JSON line ``{"url": ..., "ids": [...]}`` each.
ANCHORS_FILE = "anchors.jsonl"
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
    "report.json",
    ANCHORS_FILE,
    CACHE_FILE,
)

VERDICTS = ("ok", "broken", "unverified", "redirected", "excluded")
FORMATS = ("text", "json", "csv", "markdown", "html", "junit")

#: Final statuses that mean "could not verify" rather than "gone".
UNVERIFIED_STATUSES = frozenset({401, 403, 407, 429, 451, 999})
#: Redirect statuses that ask for the link to be updated.
PERMANENT_REDIRECTS = frozenset({301, 308})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Error kinds that fail a whole host at once (robots.txt time or a connection attempt).
HOST_ERROR_KINDS = frozenset({"dns", "connect", "tls", "blocked_address"})
_BROKEN_ERRORS = frozenset(
    {"dns", "connect", "tls", "timeout", "too_many_redirects", "protocol", "invalid_url"}
)
_STATUS_IN_DETAIL = re.compile(r"\(HTTP status (\d{3})\)\s*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
#: Outcomes worth reusing from a previous check (transient failures are checked again).
_CACHEABLE_STATUSES = frozenset({404, 410})


# ---------------------------------------------------------------------------- crawl side


def status_from_detail(detail: str | None) -> int | None:
    """The HTTP status a ``body_too_large`` error detail ends with ("(HTTP status 200)")."""
    m = _STATUS_IN_DETAIL.search(detail or "")
    return int(m.group(1)) if m else None


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


class CheckPolicy:
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


class AnchorsWriter(LineJournal):
    """Appends anchors.jsonl lines: ``{"url": page URL, "ids": [sorted fragment targets]}``.

    One ``os.write`` per page, crash-safe like the other journals (a partial last line is
    cut on open). A page fetched twice (resume) has two lines; readers keep the last.

    Raises:
        OSError: the file cannot be opened or repaired.
    """

    def write(self, url: str, ids: Iterable[str]) -> int:
        """Append the line of one page; returns the bytes written."""
        line = json.dumps({"url": url, "ids": sorted(ids)}, ensure_ascii=False)
        return self._file.write(line.encode("utf-8", "surrogatepass") + b"\n")


def read_anchors(
    path: str | os.PathLike[str], wanted: set[str] | None = None
) -> dict[str, frozenset[str]]:
    """Page URL -> its fragment targets, from an anchors.jsonl file (missing file: empty).

    Args:
        path: the file.
        wanted: keep only these page URLs (None = all).
    """
    out: dict[str, frozenset[str]] = {}
    if not os.path.exists(path):
        return out
    for r in read_records(path):
        url = r.get("url")
        if isinstance(url, str) and (wanted is None or url in wanted):
            out[url] = frozenset(str(i) for i in r.get("ids") or ())
    return out


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
    failures, 403, 429, 5xx...) is checked again. Returns the records (pages.jsonl dicts).
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
    return [r for _, r in sorted(best.values(), key=lambda x: x[1]["url"])]


# ---------------------------------------------------------------------------- verdicts


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verdict of one target URL.

    Attributes:
        verdict: one of :data:`VERDICTS`.
        status: the final HTTP status (for "redirected": the first hop's, 301/308), or None.
        error: the pages.jsonl error kind, "missing_fragment", "invalid_url", or None.
        detail: human-readable detail (error_detail, or why it was excluded).
        target: for "redirected", the URL to link to instead; else None.
        final_url: the URL that gave the final answer (fragment targets are looked up
            there); None if nothing was fetched.
        final_status: the status of that final answer, or None.
    """

    verdict: str
    status: int | None = None
    error: str | None = None
    detail: str | None = None
    target: str | None = None
    final_url: str | None = None
    final_status: int | None = None


def classify_final(
    status: int | None,
    error: str | None,
    detail: str | None = None,
    accept: frozenset[int] = frozenset(),
) -> tuple[str, int | None, str | None]:
    """Verdict of a final answer (no redirect left to follow).

    Args:
        status: final HTTP status or None.
        error: pages.jsonl error kind or None.
        detail: the error_detail (a ``body_too_large`` detail ending in
            ``"(HTTP status N)"`` is judged by N: a 200 too large to read is alive).
        accept: statuses that count as ok (``--accept``).

    Returns:
        ``(verdict, status, error)`` -- status and error as they go into the report.
    """
    if error is not None:
        if error == "body_too_large":
            big = status_from_detail(detail)
            if big is None:
                return "unverified", None, error
            return classify_final(big, None, None, accept)
        if error == "blocked_address":
            return "excluded", status, error
        if error == "robots_unreachable":
            return "unverified", status, error
        return "broken", status, error
    if status is None:
        return "unverified", None, None
    if status in accept or 200 <= status < 300 or status == 304:
        return "ok", status, None
    if status in UNVERIFIED_STATUSES:
        return "unverified", status, None
    if 300 <= status < 600:
        return "broken", status, None
    return "unverified", status, None


def fragment_ok(fragment: str, ids: frozenset[str] | set[str]) -> bool:
    """Does ``#fragment`` point at something in a page with these fragment targets?

    HTML Standard §7.4.6.3: an element whose id is the fragment, else an ``<a name>``
    equal to it; the fragment is tried as written, then percent-decoded (UTF-8). The empty
    fragment and ``top`` (ASCII case-insensitive) mean the top of the page; a text
    directive (``:~:text=...``) is ignored (only the part before it is checked).
    """
    frag = fragment.split(":~:", 1)[0]
    if not frag or frag.lower() == "top":
        return True
    if frag in ids:
        return True
    if "%" not in frag:
        return False
    try:
        return unquote(frag, errors="strict") in ids
    except UnicodeDecodeError:
        return False


# ---------------------------------------------------------------------------- report


@dataclass(frozen=True, slots=True)
class Source:
    """Where a link sits: the page, the anchor text, how often that pair occurs."""

    url: str
    anchor: str
    count: int


@dataclass(frozen=True, slots=True)
class Entry:
    """One reported target (a URL, or ``URL#fragment`` when the fragment is broken)."""

    url: str
    outcome: Outcome
    sources: tuple[Source, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON contract form: url, status, error, [target], sources."""
        d: dict[str, Any] = {
            "url": self.url,
            "status": self.outcome.status,
            "error": self.outcome.error,
        }
        if self.outcome.verdict == "redirected":
            d["target"] = self.outcome.target
        d["sources"] = [{"url": s.url, "anchor": s.anchor, "count": s.count} for s in self.sources]
        return d


@dataclass(frozen=True, slots=True)
class Report:
    """A link-check report.

    Attributes:
        summary: ``{"checked", "ok", "broken", "unverified", "redirected", "excluded"}``
            counts of distinct targets; checked = ok + broken + unverified + redirected.
        broken / unverified / redirected: entries sorted by URL.
        excluded_reasons: {reason: distinct targets} ("skipped: unsupported scheme",
            "robots.txt", "scope / --exclude / --ignore", ...).
    """

    summary: dict[str, int]
    broken: tuple[Entry, ...] = ()
    unverified: tuple[Entry, ...] = ()
    redirected: tuple[Entry, ...] = ()
    excluded_reasons: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The stable JSON document (see :func:`format_report`)."""
        return {
            "summary": dict(self.summary),
            "broken": [e.to_json() for e in self.broken],
            "unverified": [e.to_json() for e in self.unverified],
            "redirected": [e.to_json() for e in self.redirected],
        }


class _Chains:
    """Resolves a URL to its redirect hops and final answer over the whole pages.jsonl."""

    def __init__(self, records: Iterable[Mapping[str, Any]], rows: Iterable[LinkRow]) -> None:
        self.by_url: dict[str, Mapping[str, Any]] = {}
        self.via: dict[str, tuple[Mapping[str, Any], int]] = {}
        for r in records:
            self.by_url[r["url"]] = r
            hops = r.get("redirects") or []
            for i, h in enumerate(hops):
                self.via.setdefault(h["url"], (r, i))
            self.via.setdefault(r["final_url"], (r, len(hops)))
        # a 3xx at source -> (Location target, what the crawler did with it)
        self.next: dict[str, tuple[str, str]] = {
            row.source: (row.target, row.decision) for row in rows if row.kind == "redirect"
        }

    def known(self, url: str) -> bool:
        return url in self.by_url or url in self.via

    def resolve(self, url: str, accept: frozenset[int]) -> Outcome:
        hops: list[tuple[str, int]] = []
        seen: set[str] = set()
        cur = url
        while True:
            if cur in self.by_url:
                rec, start = self.by_url[cur], 0
            elif cur in self.via:
                rec, start = self.via[cur]
            else:
                return Outcome("excluded", detail="not checked (robots.txt or not reached)")
            rec_hops = [(h["url"], int(h["status"])) for h in rec.get("redirects") or []]
            hops.extend(rec_hops[start:])
            final_url: str = rec["final_url"]
            status, error = rec.get("status"), rec.get("error")
            detail = rec.get("error_detail")
            seen.update(u for u, _ in rec_hops[start:])
            seen.add(final_url)
            if error is None and status in _REDIRECTS and final_url in self.next:
                target, decision = self.next[final_url]
                if decision == "seen":  # the chain goes on in another record
                    if target in seen:
                        return Outcome(
                            "broken", None, "too_many_redirects", f"redirect loop back to {target}"
                        )
                    hops.append((final_url, int(status)))
                    cur = target
                    continue
                if decision == "queued":  # queued, then refused by the target's robots.txt
                    return Outcome("excluded", status, None, detail or "robots.txt")
                return Outcome("excluded", status, None, detail or f"redirect target {decision}")
            break
        verdict, fstatus, ferror = classify_final(status, error, detail, accept)
        if verdict != "ok":
            return Outcome(verdict, fstatus, ferror, detail, None, final_url, fstatus)
        lead = 0
        while lead < len(hops) and hops[lead][1] in PERMANENT_REDIRECTS - accept:
            lead += 1
        if lead:
            target = hops[lead][0] if lead < len(hops) else final_url
            return Outcome("redirected", hops[0][1], None, detail, target, final_url, fstatus)
        return Outcome("ok", fstatus, None, detail, None, final_url, fstatus)


def _scheme_outcome(raw: str) -> Outcome:
    m = _SCHEME.match(raw.strip())
    scheme = m.group(0)[:-1].lower() if m else ""
    if scheme in ("", "http", "https"):
        return Outcome("broken", None, "invalid_url", f"not a valid URL: {raw[:200]!r}")
    return Outcome("excluded", detail="skipped: unsupported scheme")


_EXCLUDED_REASONS = {
    "scope": "scope / --exclude / --ignore",
    "url_length": "URL too long",
    "limit": "link or host limit",
    "trap": "crawler trap",
    "nofollow": "nofollow",
    "depth": "max depth",
}


def build_report(
    records: Iterable[Mapping[str, Any]],
    rows: Iterable[LinkRow],
    anchors: Mapping[str, frozenset[str]] | None = None,
    *,
    accept: Iterable[int] = (),
    robots_disallowed: Iterable[str] = (),
) -> Report:
    """Group the links by target and give each target its verdict.

    Args:
        records: pages.jsonl objects (in file order; a later record of a URL wins).
        rows: links.tsv rows; "redirect" rows only chain redirects, the others are links.
        anchors: page URL -> fragment targets (anchors.jsonl); None = fragments are not
            checked. A fragment is checked when its target's final answer is an ok (or
            redirected) page listed here.
        accept: statuses that count as ok.
        robots_disallowed: URLs known to be refused by robots.txt (report.json), to name
            the reason of targets without a record.

    Returns:
        The :class:`Report`. Targets: every link target (canonical URL without fragment; the
        raw href for unparseable or non-http(s) links) and every seed (depth-0 record). A
        target whose page is fine but lacks the fragment becomes its own ``URL#fragment``
        entry (broken, ``missing_fragment``); every other fragment merges into its URL.
        Sources: per entry, each (source page, anchor text) with its occurrence count,
        sorted by page then anchor.
    """
    acc = frozenset(accept)
    recs = list(records)
    link_rows: list[LinkRow] = []
    redirect_rows: list[LinkRow] = []
    for row in rows:
        (redirect_rows if row.kind == "redirect" else link_rows).append(row)
    chains = _Chains(recs, redirect_rows)
    disallowed = set(robots_disallowed)
    by_target: dict[str, list[LinkRow]] = defaultdict(list)
    for row in link_rows:
        by_target[row.target].append(row)
    for r in recs:
        if r.get("depth") == 0:
            by_target.setdefault(r["url"], [])

    entries: dict[str, tuple[Outcome, Counter[tuple[str, str]]]] = {}

    def add(key: str, outcome: Outcome, row: LinkRow | None) -> None:
        if key not in entries:
            entries[key] = (outcome, Counter())
        if row is not None:
            entries[key][1][(row.source, row.anchor)] += 1

    for target, trows in by_target.items():
        decisions = {r.decision for r in trows}
        if chains.known(target):
            outcome = chains.resolve(target, acc)
        elif decisions & {"queued", "seen"}:
            reason = "robots.txt" if target in disallowed else "not checked"
            outcome = Outcome("excluded", detail=reason)
        elif "scheme" in decisions:
            outcome = _scheme_outcome(target)
        else:
            dec = sorted(decisions)[0] if decisions else "scope"
            outcome = Outcome("excluded", detail=_EXCLUDED_REASONS.get(dec, dec))
        ids = None
        if anchors is not None and outcome.verdict in ("ok", "redirected") and outcome.final_url:
            ids = anchors.get(outcome.final_url)
        if not trows:
            add(target, outcome, None)
        for row in trows:
            if ids is not None and row.fragment and not fragment_ok(row.fragment, ids):
                missing = Outcome(
                    "broken",
                    outcome.final_status,
                    "missing_fragment",
                    f"no element with id or name {row.fragment!r} in {outcome.final_url}",
                    final_url=outcome.final_url,
                )
                add(f"{target}#{row.fragment}", missing, row)
            else:
                add(target, outcome, row)

    lists: dict[str, list[Entry]] = {v: [] for v in VERDICTS}
    reasons: Counter[str] = Counter()
    for key in sorted(entries):
        outcome, counts = entries[key]
        sources = tuple(Source(src, anchor, n) for (src, anchor), n in sorted(counts.items()))
        lists[outcome.verdict].append(Entry(key, outcome, sources))
        if outcome.verdict == "excluded":
            reasons[outcome.detail or "excluded"] += 1
    summary = {v: len(lists[v]) for v in VERDICTS}
    checked = sum(summary[v] for v in ("ok", "broken", "unverified", "redirected"))
    return Report(
        summary={"checked": checked, **summary},
        broken=tuple(lists["broken"]),
        unverified=tuple(lists["unverified"]),
        redirected=tuple(lists["redirected"]),
        excluded_reasons=dict(sorted(reasons.items())),
    )


def load_report(
    out_dir: str | os.PathLike[str],
    *,
    accept: Iterable[int] = (),
    check_fragments: bool = True,
) -> Report:
    """:func:`build_report` over the files of a finished check in ``out_dir``.

    Reads pages.jsonl, links.tsv, anchors.jsonl (when ``check_fragments``) and report.json
    (robots.txt refusals). Raises OSError if pages.jsonl or
    links.tsv cannot be read.
    """
    d = Path(out_dir)
    records = list(read_records(d / "pages.jsonl"))
    rows = list(read_rows(d / "links.tsv"))
    anchors: dict[str, frozenset[str]] | None = None
    if check_fragments:
        anchors = read_anchors(d / ANCHORS_FILE)
    disallowed: list[str] = []
    rp = d / "report.json"
    if rp.exists():
        try:
            robots = json.loads(rp.read_text(encoding="utf-8")).get("robots") or {}
        except ValueError:
            robots = {}
        for info in robots.values():
            disallowed.extend(info.get("disallowed_urls") or ())
    return build_report(records, rows, anchors, accept=accept, robots_disallowed=disallowed)


# ---------------------------------------------------------------------------- formats

_TITLES = {
    "broken": "Broken links",
    "unverified": "Unverified links (could not be checked; not proof that they are gone)",
    "redirected": "Permanently redirected links (update them)",
}


def _what(e: Entry) -> str:
    o = e.outcome
    if o.error == "missing_fragment":
        return f"missing fragment (page answered HTTP {o.status})"
    parts = []
    if o.status is not None:
        parts.append(f"HTTP {o.status}")
    if o.error is not None:
        parts.append(o.error)
    if o.verdict == "redirected":
        parts.append(f"-> {o.target}")
    text = ", ".join(parts) or "no answer"
    if o.error is not None and o.detail:
        text += f" ({o.detail})"
    return text


def _summary_line(r: Report) -> str:
    s = r.summary
    line = (
        f"{s['checked']} checked: {s['ok']} ok, {s['broken']} broken, "
        f"{s['unverified']} unverified, {s['redirected']} redirected; {s['excluded']} excluded"
    )
    if r.excluded_reasons:
        line += " (" + ", ".join(f"{k} {v}" for k, v in r.excluded_reasons.items()) + ")"
    return line


def _sections(r: Report) -> Iterator[tuple[str, str, tuple[Entry, ...]]]:
    for name in ("broken", "unverified", "redirected"):
        yield name, _TITLES[name], getattr(r, name)


def _text(r: Report) -> str:
    out: list[str] = []
    for _, title, entries in _sections(r):
        if not entries:
            continue
        out.append(f"{title}: {len(entries)}")
        for e in entries:
            out.append(f"  {e.url}")
            out.append(f"    {_what(e)}")
            for s in e.sources:
                anchor = f' "{s.anchor}"' if s.anchor else ""
                times = f" ({s.count} times)" if s.count > 1 else ""
                out.append(f"    on {s.url}{anchor}{times}")
            if not e.sources:
                out.append("    (a start URL)")
        out.append("")
    out.append(_summary_line(r))
    return "\n".join(out) + "\n"


def _csv(r: Report) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["verdict", "url", "status", "error", "target", "source", "anchor", "count"])
    for name, _, entries in _sections(r):
        for e in entries:
            o = e.outcome
            head = [
                name,
                e.url,
                "" if o.status is None else o.status,
                o.error or "",
                o.target or "",
            ]
            if not e.sources:
                w.writerow([*head, "", "", ""])
            for s in e.sources:
                w.writerow([*head, s.url, s.anchor, s.count])
    return buf.getvalue()


def _md(text: str) -> str:
    return (
        text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("`", "\\`") or " "
    )


def _markdown(r: Report) -> str:
    out = ["# Link check report", "", f"**{_summary_line(r)}**", ""]
    for _, title, entries in _sections(r):
        if not entries:
            continue
        out += [f"## {title}: {len(entries)}", ""]
        out += ["| Link | Result | Found on | Anchor text | Count |", "|---|---|---|---|---|"]
        for e in entries:
            first = True
            for s in e.sources or (Source("", "", 0),):
                link, what = (_md(e.url), _md(_what(e))) if first else ("", "")
                count = str(s.count) if s.count else ""
                out.append(f"| {link} | {what} | {_md(s.url)} | {_md(s.anchor)} | {count} |")
                first = False
        out.append("")
    return "\n".join(out)


def _html(r: Report) -> str:
    h = html_escape
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8"><title>Link check report</title>',
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}"
        ".broken{color:#b00}.unverified{color:#a60}.redirected{color:#06a}</style>",
        "</head><body>",
        "<h1>Link check report</h1>",
        f"<p>{h(_summary_line(r))}</p>",
    ]
    for name, title, entries in _sections(r):
        if not entries:
            continue
        out.append(f'<h2 class="{name}">{h(title)}: {len(entries)}</h2>')
        out.append(
            "<table><tr><th>Link</th><th>Result</th><th>Found on</th>"
            "<th>Anchor text</th><th>Count</th></tr>"
        )
        for e in entries:
            srcs = e.sources or (Source("", "", 0),)
            span = f' rowspan="{len(srcs)}"' if len(srcs) > 1 else ""
            for i, s in enumerate(srcs):
                cells = ""
                if i == 0:
                    cells = (
                        f'<td{span}><a href="{h(e.url)}">{h(e.url)}</a></td>'
                        f"<td{span}>{h(_what(e))}</td>"
                    )
                src = f'<a href="{h(s.url)}">{h(s.url)}</a>' if s.url else "(a start URL)"
                count = str(s.count) if s.count else ""
                out.append(f"<tr>{cells}<td>{src}</td><td>{h(s.anchor)}</td><td>{count}</td></tr>")
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _junit(r: Report) -> str:
    entries = [(n, e) for n, _, es in _sections(r) for e in es]
    suites = ET.Element("testsuites", name="skitter check-links")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="check-links",
        tests=str(len(entries)),
        failures=str(len(r.broken)),
        errors="0",
        skipped=str(len(r.unverified)),
    )
    props = ET.SubElement(suite, "properties")
    for k, v in r.summary.items():
        ET.SubElement(props, "property", name=k, value=str(v))
    for name, e in entries:
        case = ET.SubElement(suite, "testcase", classname=name, name=e.url)
        found = "\n".join(
            f"on {s.url}" + (f' "{s.anchor}"' if s.anchor else "") + f" ({s.count}x)"
            for s in e.sources
        )
        if name == "broken":
            fail = ET.SubElement(case, "failure", type="broken", message=_what(e))
            fail.text = found
        elif name == "unverified":
            ET.SubElement(case, "skipped", message=_what(e))
            ET.SubElement(case, "system-out").text = found
        else:
            ET.SubElement(case, "system-out").text = f"{_what(e)}\n{found}"
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


def format_report(report: Report, fmt: str = "text") -> str:
    """Render the report.

    Formats (:data:`FORMATS`):

    * ``text``: human-readable, one block per target with its result and sources, then the
      summary line;
    * ``json``: the stable contract ``{"summary": {"checked", "ok", "broken", "unverified",
      "redirected", "excluded"}, "broken": [...], "unverified": [...], "redirected": [...]}``,
      each entry ``{"url", "status" (int or null), "error" (kind or null), "target"
      (redirected only), "sources": [{"url", "anchor", "count"}]}``; indented, UTF-8;
    * ``csv``: header ``verdict,url,status,error,target,source,anchor,count``, one row per
      source (a start URL without sources has one row with empty source fields);
    * ``markdown``: summary and one table per non-empty section;
    * ``html``: a standalone page with the same tables (everything escaped);
    * ``junit``: JUnit XML, one testcase per reported target: broken = failure,
      unverified = skipped, redirected = passed with the new target in system-out.

    Raises:
        ValueError: unknown format.
    """
    if fmt == "json":
        return json.dumps(report.to_json(), ensure_ascii=False, indent=2) + "\n"
    if fmt == "text":
        return _text(report)
    if fmt == "csv":
        return _csv(report)
    if fmt == "markdown":
        return _markdown(report)
    if fmt == "html":
        return _html(report)
    if fmt == "junit":
        return _junit(report)
    raise ValueError(f"unknown report format {fmt!r} (use one of {', '.join(FORMATS)})")
