"""What ``skitter extract`` writes for one archived page: its links.tsv rows and pages.jsonl line.

:class:`LinkDecider` applies the stateless link rules (scope, scheme, URL length, nofollow,
traps; see :mod:`skitter.offline.extract`); :class:`PageWriter` writes one page's rows and line
to a part's files and counts them in a :class:`PartCounts`. Columns: links.tsv as
:mod:`skitter.export.links`, pages.jsonl as :data:`skitter.export.pages.PAGE_KEYS`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import IO, Any

from skitter import urls
from skitter.export.links import format_rows
from skitter.export.pages import PAGE_KEYS
from skitter.links import extract as extract_links
from skitter.offline.payload import HttpPayload
from skitter.rules import Decision, ScopeRule
from skitter.settings import ScopeSettings
from skitter.traps import TrapGuard

__all__ = [
    "MEMO_SIZE",
    "LinkDecider",
    "PageCounts",
    "PageWriter",
    "PartCounts",
    "link_rows",
    "page_line",
    "warc_date_iso",
]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})  # as the crawler's
#: entries a memo of pure decisions keeps before it is cleared
MEMO_SIZE = 1 << 17


def warc_date_iso(value: str) -> str:
    """A ``WARC-Date`` (W3C-ISO8601, WARC 1.1 §5.4) as pages.jsonl writes times
    (``2024-05-01T12:00:00.123Z``); the value as is when it does not parse."""
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError:
        return value
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    dt = dt.astimezone(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _media_type(ct: str | None) -> str | None:
    if not ct:
        return None
    mt = ct.split(";", 1)[0].strip().lower()
    return mt or None


def _is_html(ct: str | None, body: bytes) -> bool:
    if ct is not None:
        return ct in _HTML_TYPES
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<head", b"<body"))


def _json_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


class LinkDecider:
    """The stateless link rules: :class:`~skitter.rules.ScopeRule` then
    :class:`~skitter.traps.TrapGuard`, with the stateful caps and budgets off (an archive has no
    crawl order).

    Args:
        scope: scope and trap settings (``max_depth``, link caps and per-host budgets ignored).
        seeds: canonical seed URLs defining the scope; () = every link in scope (scope is then
            decided at the end, post hoc).

    Raises:
        ConfigError: invalid scope settings (from ``ScopeRule``).
    """

    def __init__(self, scope: ScopeSettings, seeds: tuple[str, ...]) -> None:
        settings = replace(
            scope,
            max_depth=None,
            max_links_per_page=None,
            max_seed_links=None,
            max_query_variants_per_path=None,
            max_pages_per_host=None,
        )
        if not seeds:
            settings = replace(settings, scope="any")  # scope decided at the end (post hoc)
        self.rule = ScopeRule(settings, seeds)
        self.traps = TrapGuard(settings)

        # pages repeat their navigation links: decisions are pure, remember the recent ones
        self._memo: dict[tuple[str | None, bool], tuple[str, str | None]] = {}

    def decide(self, url: str | None, nofollow: bool) -> tuple[str, str | None]:
        """``(decision value, canonical URL or None)`` of a link to ``url`` (None: unparsable)."""
        key = (url, nofollow)
        got = self._memo.get(key)
        if got is not None:
            return got
        decision, canon = self.rule.decide(
            url, depth=1, nofollow=nofollow, index=0, is_seed_page=False
        )
        got = (decision.value, canon)
        if decision is Decision.QUEUED and canon is not None:
            trap = self.traps.admit(canon)
            if trap is not None:
                got = (trap.decision.value, canon)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = got
        return got


def link_rows(
    url: str, p: HttpPayload, decider: LinkDecider, bot_token: str | None
) -> list[list[Any]]:
    """The links.tsv rows of the page at ``url``: a ``redirect`` row for a 3xx with a
    ``Location``, the links of an HTML body (:func:`skitter.links.extract`), else none."""
    rows: list[list[Any]] = []
    status = p.status
    if status is not None and 300 <= status < 400:
        loc = (p.header("location") or "").strip()
        if loc:
            target = urls.join(url, loc)
            dec, canon = decider.decide(target, False)
            frag = target.partition("#")[2] if target else ""
            rows.append([url, canon or loc, frag, "", "redirect", False, dec])
        return rows
    ct = _media_type(p.content_type)
    if not p.body or not _is_html(ct, p.body):
        return rows
    page = extract_links(
        p.body, url, p.content_type, p.headers.get("x-robots-tag", []), bot_token=bot_token
    )
    for link in page.links:
        nofollow = link.nofollow or page.nofollow
        dec, canon = decider.decide(link.url, nofollow)
        if link.url is not None:
            target_nofrag, _, fragment = link.url.partition("#")
        else:
            target_nofrag, fragment = link.raw, ""
        rows.append(
            [
                url,
                canon if canon is not None else target_nofrag,
                fragment,
                link.anchor,
                link.kind,
                nofollow,
                dec,
            ]
        )
    return rows


def page_line(url: str, date: str, p: HttpPayload) -> dict[str, Any]:
    """The pages.jsonl object (keys :data:`~skitter.export.pages.PAGE_KEYS`) of the page at
    ``url`` archived at ``date`` (a ``WARC-Date``)."""
    error = "truncated" if p.truncated else None
    details = []
    if p.truncated:
        details.append(f"WARC-Truncated: {p.truncated}")
    if p.note:
        details.append(p.note)
    obj: dict[str, Any] = {
        "url": url,
        "final_url": url,
        "status": p.status,
        "depth": None,
        "content_type": _media_type(p.content_type),
        "bytes": len(p.body),
        "sha1": hashlib.sha1(p.body).hexdigest() if p.body else None,
        "fetched_at": warc_date_iso(date),
        "elapsed_s": None,
        "attempts": None,
        "redirects": [],
        "error": error,
        "error_detail": "; ".join(details) or None,
    }
    assert tuple(obj) == PAGE_KEYS
    return obj


@dataclass(slots=True)
class PageCounts:
    """What extraction produced, summed over parts into the report.

    Attributes:
        records, pages, links: counts; bytes_read: bytes of the WARC files read.
        decisions, statuses: link rows per decision, pages per HTTP status ("none": no status).
        skipped: damaged parts ``{file, offset, reason}``.
    """

    records: int = 0
    pages: int = 0
    links: int = 0
    bytes_read: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def add(self, other: PageCounts) -> None:
        """Add ``other``'s counts to these."""
        self.records += other.records
        self.pages += other.pages
        self.links += other.links
        self.bytes_read += other.bytes_read
        self.decisions.update(other.decisions)
        self.statuses.update(other.statuses)
        self.skipped.extend(other.skipped)


@dataclass(slots=True)
class PartCounts(PageCounts):
    """The counts of one part (one WARC file, or the revisits), with ``hosts``: a page URL per
    host key (the post-hoc scope without seeds)."""

    hosts: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class PageWriter:
    """Writes each page's links.tsv rows to ``links_f`` and pages.jsonl line to ``pages_f``,
    counting them in ``counts``."""

    decider: LinkDecider
    bot_token: str | None
    links_f: IO[str]
    pages_f: IO[str]
    counts: PartCounts

    def emit(self, url: str, date: str, p: HttpPayload) -> None:
        """Write the page at ``url`` archived at ``date`` (a ``WARC-Date``) with payload ``p``.

        Raises:
            OSError: a write failed (disk full).
        """
        out = self.counts
        rows = link_rows(url, p, self.decider, self.bot_token)
        if rows:
            self.links_f.write(format_rows(rows))
            out.links += len(rows)
            out.decisions.update(r[6] for r in rows)
        self.pages_f.write(_json_line(page_line(url, date, p)))
        out.pages += 1
        out.statuses[str(p.status) if p.status is not None else "none"] += 1
        try:
            hk = urls.host_key(url)
        except ValueError:
            return
        out.hosts.setdefault(hk, url)
