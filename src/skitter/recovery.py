"""Resume reconciliation: bring the frontier up to date with the journals after a crash.

Every few seconds the crawl loop commits the frontier and writes ``checkpoint.json`` with the
journal offsets and the counters as they were just before that commit. On resume, the
pages.jsonl records past the checkpoint are counted and marked done in the frontier, and the
links.tsv rows past it are counted and their queued links re-added (both idempotent); a
trailing block of rows whose page has no record (the kill came between them) is cut. So no
URL is lost and no recorded URL is fetched again; only requests in flight at the kill are
repeated. The trap budgets are rebuilt from links.tsv (and by the peers, from what they
handed over).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from skitter.checklinks.verdicts import record_verdict
from skitter.context import CrawlContext
from skitter.earlier_captures import EarlierCaptures
from skitter.errors import StateError
from skitter.export.linkfile import cut_tail, iter_lines, links_file
from skitter.export.links import LinkRow, parse_row
from skitter.export.pages import read_records
from skitter.models import Request
from skitter.rules import Decision
from skitter.state import CHECKPOINT_FILE, PAGES_FILE, read_json
from skitter.stats import Stats
from skitter.urls import host_key

__all__ = ["reconcile"]

log = logging.getLogger("skitter")


async def reconcile(ctx: CrawlContext) -> dict[str, Any]:
    """Bring the frontier up to date with the journals after a crash (see module doc).

    Sets ``ctx.stats`` (and the trap budgets, the peers' state) to the checkpoint's, then
    counts and replays the records and links.tsv rows past it. Returns the checkpoint read
    (``{}`` if none), for the crawler's own counters.

    Raises:
        StateError: a journal is shorter than its checkpoint, or checkpoint.json is damaged.
    """
    c = ctx.components
    cp_path = ctx.out_dir / CHECKPOINT_FILE
    cp: dict[str, Any] = read_json(cp_path) if cp_path.exists() else {}
    pages_off = int(cp.get("pages_offset", 0))
    links_off = int(cp.get("links_offset", 0))
    ctx.stats = Stats.from_state(cp.get("stats", {}))
    ctx.traps.load_state(cp.get("traps") or {})
    # robots.txt decisions of the earlier sessions: report.json covers the whole crawl
    c.robots.load_state(cp.get("robots") or {})
    ctx.robots_notes.load_state(cp.get("robots_notes") or {})
    if ctx.dups is not None:
        ctx.dups.load_state(cp.get("duplicates") or {})
    ctx.peers.resume(cp)
    pages_path = ctx.out_dir / PAGES_FILE
    links_path = links_file(ctx.out_dir)
    recorded: dict[str, int] = {}  # final_url / url -> depth
    done_urls: list[str] = []
    if pages_path.exists():
        size = pages_path.stat().st_size
        if pages_off > size:
            raise StateError(f"{pages_path} is shorter than its checkpoint; state is damaged")
        with open(pages_path, "rb") as fh:
            fh.seek(pages_off)
            for line in fh:
                if not line.endswith(b"\n"):
                    break
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                depth = int(r.get("depth") or 0)
                recorded[r["final_url"]] = depth
                recorded[r["url"]] = depth
                done_urls.append(r["url"])
                done_urls.append(r["final_url"])
                done_urls.extend(h["url"] for h in r.get("redirects") or ())
                hops = r.get("redirects") or ()
                _tally_robots(ctx, r)
                ctx.stats.count_record(
                    host_key(r["url"]),
                    depth,
                    r.get("status"),
                    r.get("error"),
                    int(r.get("bytes") or 0),
                    record_verdict(
                        r.get("status"),
                        r.get("error"),
                        r.get("error_detail"),
                        hops[0]["status"] if hops else None,
                    ),
                )
    if pages_path.exists():  # the duplicate index and the recrawl counts: from every record
        if ctx.dups is not None and ctx.dups.enabled:
            ctx.dups.rebuild(read_records(pages_path), host_key)
            if c.warc is not None:  # revisits of the earlier sessions' captures
                ctx.dups.earlier = EarlierCaptures(c.warc.directory, c.warc.prefix)
        if ctx.recrawl is not None:
            for r in read_records(pages_path):
                ctx.recrawl.note(r["url"], r.get("status"), r.get("sha1"))
    if done_urls:
        await c.frontier.mark_done(sorted(set(done_urls)))
    readd: list[Request] = []
    if links_path.exists():
        readd = _reconcile_links(ctx, links_path, links_off, recorded)
    if links_path.exists() and _depth_raised(cp, ctx.settings.scope.max_depth):
        readd += _requeue_depth_cut(ctx, links_path, pages_path)
    if readd:
        await ctx.add(readd)
    # the trap budgets (distinct queued URLs per path / host) are rebuilt from links.tsv
    ctx.traps.replay_links(links_path)
    # ... and by the peers (sharded: from what other processes handed over)
    ctx.peers.resumed(ctx.traps, recorded)
    await c.frontier.flush()
    log.info(
        "resume: %d records and %d queued links replayed past the checkpoint",
        len(set(done_urls)),
        len(readd),
    )
    return cp


_NOT_FETCHED = "(robots.txt and page not fetched)"


def _depth_raised(cp: dict[str, Any], now: int | None) -> bool:
    """Was ``--max-depth`` raised (or lifted) since the checkpoint's session?"""
    if "max_depth" not in cp:
        return False  # a checkpoint of an older Skitter: the limit is unknown
    before = cp["max_depth"]
    return isinstance(before, int) and (now is None or now > before)


def _requeue_depth_cut(ctx: CrawlContext, links: Path, pages: Path) -> list[Request]:
    """``--max-depth`` raised on resume: the links the old limit left out (links.tsv decision
    ``depth``, kept as written) whose page is now within the limit, as requests (their trap
    budgets spent as if they were found now; hosts cut as duplicates and unwanted file types
    left out). The URL-seen test drops those queued meanwhile."""
    max_depth = ctx.settings.scope.max_depth
    depth_of: dict[str, int] = {}
    for r in read_records(pages):
        page_depth = int(r.get("depth") or 0)
        for key in ("url", "final_url"):
            if isinstance(r.get(key), str):
                depth_of.setdefault(r[key], page_depth)
    cut = ctx.dups.cut_hosts if ctx.dups is not None else set()
    focus = ctx.components.focus
    owner_of = ctx.peers.owner_of_url
    out: list[Request] = []
    wanted: set[str] = set()
    for unit, line in iter_lines(links, 0):
        if unit == 0 and line.startswith(b"source\t"):
            continue
        row = parse_row(line.decode("utf-8", errors="replace"))
        if row is None or row.decision != Decision.DEPTH.value or row.target in wanted:
            continue
        d = depth_of.get(row.source)
        if d is None or (max_depth is not None and d + 1 > max_depth):
            continue
        if host_key(row.target) in cut or (
            focus.filters_links and not focus.link_allowed(row.target)
        ):
            continue
        if (owner_of is None or owner_of(row.target) == ctx.peers.index) and ctx.traps.admit(
            row.target
        ) is not None:
            continue
        wanted.add(row.target)
        out.append(Request(url=row.target, depth=d + 1, referer=row.source))
    log.info("resume: --max-depth raised: %d links left out by the old limit queued", len(out))
    return out


def _tally_robots(ctx: CrawlContext, r: dict[str, Any]) -> None:
    """Count the robots.txt verdict of a record past the checkpoint, as the worker did when it
    wrote it (:meth:`skitter.robots_cache.RobotsCache.tally`): its last hop was allowed if
    it was fetched, refused if robots.txt was unreachable or the redirect target is
    disallowed. (Earlier hops of a chain cut by the kill are not counted again.)"""
    if ctx.settings.politeness.ignore_robots:
        return
    detail = r.get("error_detail") or ""
    robots = ctx.components.robots
    if r.get("error") == "robots_unreachable" or detail.endswith(_NOT_FETCHED):
        robots.tally(r["url"], False)
    elif detail.startswith("redirect target ") and detail.endswith("disallowed by robots.txt"):
        robots.tally(detail.split(" ")[2], False)
    else:
        robots.tally(r["final_url"], True)


def _reconcile_links(
    ctx: CrawlContext, path: Path, offset: int, recorded: dict[str, int]
) -> list[Request]:
    """Replay links.tsv rows past ``offset``; cut a trailing block whose page has no record."""
    lines: list[tuple[int, bytes]] = []  # (unit offset: line or zstd frame, raw line)
    rows: list[tuple[int, LinkRow]] = []  # (index in lines, row)
    for unit, line in iter_lines(path, offset):
        lines.append((unit, line))
        if unit == 0 and line.startswith(b"source\t"):
            continue
        row = parse_row(line.decode("utf-8", errors="replace"))
        if row is not None:
            rows.append((len(lines) - 1, row))
    # rows of the page being written at the kill (no record) can only be the last block
    # (sitemap rows have no page record: the sitemap phase is read again if it was cut)
    if rows and rows[-1][1].source not in recorded and rows[-1][1].kind != "sitemap":
        src = rows[-1][1].source
        cut = len(rows)
        while cut > 0 and rows[cut - 1][1].source == src:
            cut -= 1
        cut_tail(path, lines, rows[cut][0])
        rows = rows[:cut]
    readd: list[Request] = []
    decisions: Counter[str] = Counter()
    for _, row in rows:
        decisions[row.decision] += 1
        if row.decision == Decision.QUEUED.value and row.kind != "redirect":
            depth = recorded.get(row.source)
            if depth is not None:
                readd.append(
                    Request(
                        url=row.target,
                        depth=depth + 1,
                        referer=row.source,
                        check_only=_replay_check_only(ctx, row, depth + 1),
                    )
                )
    ctx.stats.count_decisions(decisions)
    return readd


def _replay_check_only(ctx: CrawlContext, row: LinkRow, depth: int) -> bool:
    """Was this queued links.tsv row a check_only request? (decided again, for resume)"""
    policy = ctx.policy
    if not policy.rejudges_links:
        return False
    decision, canon = ctx.components.scope.decide(
        row.target, depth=depth, nofollow=row.nofollow, index=0, is_seed_page=False
    )
    if canon is None:
        return False
    return bool(policy.check_only_for(decision.value, canon, row.kind))
