"""Resume reconciliation: bring the frontier up to date with the journals after a crash.

Every few seconds the crawl loop commits the frontier and writes ``checkpoint.json`` with the
journal offsets and the counters as they were just before that commit. On resume, the
pages.jsonl records past the checkpoint are counted and marked done in the frontier, and the
links.tsv rows past it are counted and their queued links re-added (both idempotent); a
trailing block of rows whose page has no record (the kill came between them) is cut. So no
URL is lost and no recorded URL is fetched again; only requests in flight at the kill are
repeated. The trap budgets are rebuilt from links.tsv and requeued.txt (and by the peers,
from what they handed over).

A resume that loosens a limit on what is queued (``--max-depth``, ``--max-links-per-page``,
``--max-seed-links``, ``--max-pages-per-host``, the trap limits: raised or lifted since the
checkpoint's session, :func:`skitter.state.loosened_limits`) judges again what the old
limits left out, and queues what passes now (:func:`_requeue_left_out`).
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
from skitter.export.base import AppendFile, truncate_partial_line
from skitter.export.linkfile import cut_tail, iter_lines, links_file
from skitter.export.links import LinkRow, parse_row
from skitter.export.pages import read_records
from skitter.models import Request
from skitter.rules import Decision
from skitter.state import (
    CHECKPOINT_FILE,
    PAGES_FILE,
    REQUEUED_FILE,
    RESUME_LIMITS,
    limits_in_checkpoint,
    loosened_limits,
    read_json,
    resume_limits,
)
from skitter.stats import Stats
from skitter.urls import canonicalize, host_key

__all__ = ["read_requeued", "reconcile"]

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
    if readd:
        await ctx.add(readd)
    # the trap budgets (distinct queued URLs per path / host) are rebuilt from links.tsv
    ctx.traps.replay_links(links_path)
    # ... from what earlier resumes queued (their links.tsv rows keep the old decision)
    ctx.traps.replay(read_requeued(ctx.out_dir))
    # ... and by the peers (sharded: from what other processes handed over)
    ctx.peers.resumed(ctx.traps, recorded)
    before = limits_in_checkpoint(cp)
    loosened = loosened_limits(before, resume_limits(ctx.settings.scope))
    # limits not in the checkpoint (none yet, or an older Skitter's) may have been others:
    # judged again too (with unchanged limits nothing passes that did not then)
    unknown = [n.replace("_", "-") for n in RESUME_LIMITS if n not in before]
    if loosened or (unknown and links_path.exists()):
        requeued = _requeue_left_out(ctx, links_path, pages_path, loosened or unknown)
        if requeued:
            await ctx.add(requeued)
    await c.frontier.flush()
    log.info(
        "resume: %d records and %d queued links replayed past the checkpoint",
        len(set(done_urls)),
        len(readd),
    )
    return cp


_NOT_FETCHED = "(robots.txt and page not fetched)"


#: links.tsv decisions of links a limit left out (judged again when one is loosened)
_LEFT_OUT = frozenset({Decision.DEPTH.value, Decision.LIMIT.value, Decision.TRAP.value})


def _requeue_left_out(
    ctx: CrawlContext, links: Path, pages: Path, loosened: list[str]
) -> list[Request]:
    """Limits loosened on resume (``loosened``: their flag names, :func:`loosened_limits`):
    the links the old limits left out, judged again as if found now, as requests to queue.

    Judged again: the links.tsv rows with decision ``depth``, ``limit`` or ``trap`` (kept as
    written) of recorded pages, in file order (each with its position on its page, for
    ``--max-links-per-page``), and of sitemaps (but those cut at ``limit`` while a link cap
    is set: the cap met them by their place in a batch, which links.tsv does not keep), and
    (sharded) the URLs other processes handed over that this one dropped. Each goes through
    the scope rule (depth, link caps), the check-only policy, the type focus, the hosts cut
    as duplicates and the trap budgets, which it spends (the budgets are rebuilt first,
    seeds included: the first ones left out get the room, as if the limit had been so from
    the start). The URLs this process admits are journaled in
    ``requeued.txt`` before they are queued (their budgets on later resumes). The
    URL-seen test drops those queued meanwhile.

    Raises:
        OSError: requeued.txt cannot be written.
    """
    pages_of: dict[str, tuple[int, bool]] = {}  # URL -> (depth, a seed page)
    for r in read_records(pages) if pages.exists() else []:
        depth = int(r.get("depth") or 0)
        seed = depth == 0 and not r.get("redirects")
        for key in ("url", "final_url"):
            if isinstance(r.get(key), str):
                pages_of.setdefault(r[key], (depth, seed))
    c = ctx.components
    decide = c.scope.decide
    check = ctx.policy.check_only_for if ctx.policy.rejudges_links else None
    cut = ctx.dups.cut_hosts if ctx.dups is not None else set()
    focus = c.focus
    owner_of, me = ctx.peers.owner_of_url, ctx.peers.index
    for seed_url in ctx.settings.seeds:  # noted when the crawl adds them: count them now
        canon = canonicalize(seed_url)
        if canon is not None and not ctx.peers.is_foreign(canon):
            ctx.traps.note(canon)
    out: list[Request] = []
    mine: list[str] = []
    wanted: set[str] = set()

    def take(url: str, depth: int, referer: str | None, check_only: bool) -> None:
        if url in wanted or host_key(url) in cut:
            return
        if focus.filters_links and not focus.link_allowed(url):
            return
        owned = owner_of is None or owner_of(url) == me  # (others: judged by their owner)
        if owned and ctx.traps.admit(url) is not None:
            return
        wanted.add(url)
        out.append(Request(url=url, depth=depth, referer=referer, check_only=check_only))
        if owned:
            mine.append(url)

    # sitemap entries met the link cap by their place in a batch (not in links.tsv)
    capped = ctx.settings.scope.max_links_per_page is not None
    source, index = None, 0
    for unit, line in iter_lines(links, 0) if links.exists() else []:
        if unit == 0 and line.startswith(b"source\t"):
            continue
        row = parse_row(line.decode("utf-8", errors="replace"))
        if row is None:
            continue
        if row.source != source:  # a page's rows are one block, in document order
            source, index = row.source, 0
        else:
            index += 1
        if row.decision not in _LEFT_OUT or not row.target:
            continue
        if row.kind == "sitemap":  # an entry of a sitemap: decided as a link of depth 1
            if row.decision == Decision.LIMIT.value and capped:
                continue  # (the link cap or the per-host cap: which one is not known)
            depth, seed, position = 0, False, 0
        elif (page := pages_of.get(row.source)) is None:
            continue
        else:
            (depth, seed), position = page, index
        if row.kind == "redirect":  # a redirect target: no link rules (scope is fixed)
            take(row.target, depth, row.source, False)
            continue
        decision, canon = decide(
            row.target, depth=depth + 1, nofollow=row.nofollow, index=position, is_seed_page=seed
        )
        check_only = False
        if check is not None and canon is not None:
            co = check(decision.value, canon, row.kind)
            if co is not None:  # link checking: checked (check_only) or crawled
                decision, check_only = Decision.QUEUED, co
        if decision is Decision.QUEUED and canon is not None:
            take(canon, depth + 1, row.source, check_only)
    for req in ctx.peers.dropped():
        take(req.url, req.depth, req.referer, req.check_only)
    if mine:
        _journal_requeued(ctx.out_dir, mine)
    log.info(
        "resume: %s loosened (or unknown): %d links the old limits left out queued",
        ", ".join(f"--{name}" for name in loosened),
        len(out),
    )
    return out


def read_requeued(out_dir: Path) -> list[str]:
    """The URLs journaled in ``out_dir/requeued.txt`` (complete lines; none if missing).

    Raises:
        OSError: the file exists but cannot be read.
    """
    try:
        data = (out_dir / REQUEUED_FILE).read_bytes()
    except FileNotFoundError:
        return []
    end = data.rfind(b"\n")
    return [u.decode("utf-8", "surrogateescape") for u in data[: end + 1].split(b"\n") if u]


def _journal_requeued(out_dir: Path, urls: list[str]) -> None:
    """Append ``urls`` to requeued.txt (one write, synced: before the frontier has them)."""
    path = out_dir / REQUEUED_FILE
    truncate_partial_line(path)  # (a line cut by a crash)
    with AppendFile(path) as fh:
        fh.write("".join(f"{u}\n" for u in urls).encode("utf-8", "surrogateescape"))


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
