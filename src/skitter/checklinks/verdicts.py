"""Link-check verdicts: one vocabulary (:data:`VERDICTS`) for ``check-links`` and for
``crawl``'s report.json, and the grouping of a crawl's outputs into a :class:`Report`.

Pure functions over pages.jsonl records and links.tsv rows (see :mod:`skitter.checklinks`
for the verdict table): :func:`classify_final` judges a final answer, :func:`record_verdict`
one pages.jsonl record, :func:`build_report` / :func:`load_report` every link target.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from skitter.checklinks.anchors import ANCHORS_FILE, read_anchors, read_cut_pages
from skitter.export.linkfile import links_file
from skitter.export.links import LinkRow, read_rows
from skitter.export.pages import read_records
from skitter.redirects import NO_LOCATION, REDIRECT_STATUSES
from skitter.urls import canonicalize

__all__ = [
    "PERMANENT_REDIRECTS",
    "UNVERIFIED_STATUSES",
    "VERDICTS",
    "Entry",
    "Outcome",
    "Report",
    "Source",
    "build_report",
    "classify_final",
    "fragment_ok",
    "load_report",
    "record_verdict",
    "status_from_detail",
]

VERDICTS = ("ok", "broken", "unverified", "redirected", "excluded")

#: Final statuses that mean "could not verify" rather than "gone".
UNVERIFIED_STATUSES = frozenset({401, 403, 407, 429, 451, 999})
#: Redirect statuses that ask for the link to be updated.
PERMANENT_REDIRECTS = frozenset({301, 308})
_REDIRECTS = REDIRECT_STATUSES
_BROKEN_ERRORS = frozenset(
    {"dns", "connect", "tls", "timeout", "too_many_redirects", "protocol", "invalid_url"}
)
_STATUS_IN_DETAIL = re.compile(r"\(HTTP status (\d{3})\)\s*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def status_from_detail(detail: str | None) -> int | None:
    """The HTTP status a ``body_too_large`` error detail ends with ("(HTTP status 200)")."""
    m = _STATUS_IN_DETAIL.search(detail or "")
    return int(m.group(1)) if m else None


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


def record_verdict(
    status: int | None, error: str | None, detail: str | None, first_hop_status: int | None
) -> str:
    """The verdict of one record in the link checker's vocabulary (one vocabulary for
    ``crawl``'s report.json and ``check-links``): a permanent first redirect is
    "redirected", else :func:`classify_final` of the final answer."""
    if first_hop_status in PERMANENT_REDIRECTS:
        return "redirected"
    if status in REDIRECT_STATUSES and error is None and detail != NO_LOCATION:
        # a redirect the crawl did not follow (offsite, already crawled...): the link
        # works; its target has a record (or a links.tsv decision) of its own
        return "redirected" if status in PERMANENT_REDIRECTS else "ok"
    return classify_final(status, error, detail)[0]


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
    #: start URLs that got no HTTP response of their own (robots.txt refused them, DNS...)
    seeds_unanswered: tuple[str, ...] = ()
    #: True when start URLs were given and none of them got an HTTP response (exit 4)
    no_seed_answered: bool = False

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
    cut_pages: Iterable[str] = (),
    seeds: Iterable[str] = (),
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
        cut_pages: pages whose ids come from their first ``--max-body`` bytes only: a
            fragment not found there is ``unverified`` (error ``fragment_unverified``).
        seeds: the canonical start URLs: each is a target even without a record (a start
            URL refused by robots.txt is ``excluded``, reason "robots.txt").

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
    cut = set(cut_pages)
    by_target: dict[str, list[LinkRow]] = defaultdict(list)
    for row in link_rows:
        by_target[row.target].append(row)
    for r in recs:
        if r.get("depth") == 0:
            by_target.setdefault(r["url"], [])
    seed_list = list(dict.fromkeys(seeds))
    for seed in seed_list:
        by_target.setdefault(seed, [])
    answered = {
        r["url"] for r in recs if isinstance(r.get("status"), int) and isinstance(r.get("url"), str)
    }

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
        elif decisions & {"queued", "seen"} or (not decisions and target in disallowed):
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
                if outcome.final_url in cut:
                    unsure = Outcome(
                        "unverified",
                        outcome.final_status,
                        "fragment_unverified",
                        f"no id or name {row.fragment!r} in the first part of "
                        f"{outcome.final_url} read (--max-body)",
                        final_url=outcome.final_url,
                    )
                    add(f"{target}#{row.fragment}", unsure, row)
                    continue
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
        seeds_unanswered=tuple(u for u in seed_list if u not in answered),
        no_seed_answered=bool(seed_list) and not any(u in answered for u in seed_list),
    )


def load_report(
    out_dir: str | os.PathLike[str],
    *,
    accept: Iterable[int] = (),
    check_fragments: bool = True,
) -> Report:
    """:func:`build_report` over the files of a finished check in ``out_dir``.

    Reads pages.jsonl, links.tsv, anchors.jsonl (when ``check_fragments``), report.json
    (robots.txt refusals) and state.json (the start URLs). Raises OSError if pages.jsonl or
    links.tsv cannot be read.
    """
    d = Path(out_dir)
    records = list(read_records(d / "pages.jsonl"))
    rows = list(read_rows(links_file(d)))
    anchors: dict[str, frozenset[str]] | None = None
    cut: set[str] = set()
    if check_fragments:
        anchors = read_anchors(d / ANCHORS_FILE)
        cut = read_cut_pages(d / ANCHORS_FILE)
    disallowed: list[str] = []
    rp = d / "report.json"
    if rp.exists():
        try:
            robots = json.loads(rp.read_text(encoding="utf-8")).get("robots") or {}
        except ValueError:
            robots = {}
        for info in robots.values():
            disallowed.extend(info.get("disallowed_urls") or ())
    seeds: list[str] = []
    sp = d / "state.json"
    if sp.exists():
        try:
            stored = json.loads(sp.read_text(encoding="utf-8")).get("settings") or {}
        except ValueError:
            stored = {}
        raw_seeds = stored.get("seeds") or ()
        seeds = [u for u in (canonicalize(str(x)) for x in raw_seeds) if u is not None]
    return build_report(
        records,
        rows,
        anchors,
        accept=accept,
        robots_disallowed=disallowed,
        cut_pages=cut,
        seeds=seeds,
    )
