"""Link decisions of one fetched page: scope → check-only policy → link filter → type focus →
duplicate-host cut → URL-seen test and trap budgets → queue; and the links.tsv rows they make.

Owns what happens to each link of a page the worker (:mod:`skitter.worker`) has extracted:
:func:`decide_links` decides and queues them through the frontier (in document order),
:func:`rows_as` gives the rows of a page whose links are all given one decision, and
:func:`note_inlinks` feeds ``--order inlinks``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from skitter.context import CrawlContext
from skitter.events import call_hook
from skitter.models import Page, Request
from skitter.rules import Decision
from skitter.urls import canonicalize, host_key

__all__ = ["KNOWN_LINKS_MAX", "decide_links", "note_inlinks", "rows_as"]

_VALUE = {d: d.value for d in Decision}

#: Canonical URLs remembered in :attr:`CrawlContext.known_links` before it is emptied (~100
#: bytes each: ~3 MB); a forgotten URL only costs one more frontier call.
KNOWN_LINKS_MAX = 1 << 15


async def decide_links(
    ctx: CrawlContext, req: Request, page: Page
) -> tuple[list[list[Any]], Counter[str]]:
    """Decide every link of ``page`` (document order), queue the new ones; returns the
    links.tsv rows (as their 7 fields, see :func:`format_rows`) and their decision
    counts. Runs for every link: kept lean."""
    c = ctx.components
    decide_page = c.scope.decide_page
    admit = ctx.traps.admit
    # sharded: each queued URL's owner, found once (trap budgets are the owner's)
    owner_of = ctx.peers.owner_of_url
    me = ctx.peers.index
    owners: list[int] | None = [] if owner_of is not None else None
    owner = -1
    policy = ctx.policy
    check = policy.check_only_for if policy.rejudges_links else None
    link_filter = ctx.hooks.link_filter
    focus = c.focus
    type_ok = focus.link_allowed if focus.filters_links else None
    queued, seen_v = Decision.QUEUED, _VALUE[Decision.SEEN]
    child_depth = req.depth + 1
    is_seed_page = req.depth == 0 and not req.redirects
    fields: list[list[Any]] = []
    pending: dict[str, int] = {}
    to_add: list[Request] = []
    refetch: list[Request] = []
    source = req.url
    page_nofollow = page.nofollow
    dups = ctx.dups
    cut = dups.cut_hosts if dups is not None else None
    # URLs put to the frontier before: SEEN without building a request (the frontier's
    # URL-seen test would say so). Not while links are judged again (link checking) or
    # every link counts for the order (in-links: the owner of a host counts each hand-off).
    known: set[str] | None = None
    if check is None and ctx.quality.order != "inlinks":
        known = ctx.known_links
        if len(known) >= KNOWN_LINKS_MAX:
            known.clear()
    links = page.links
    # A link whose URL (fragment cut) is in ``known`` is canonical and was queued before:
    # with no rule that depends on the page (depth and link caps, nofollow, filters, type
    # focus, hosts cut as duplicates), it is SEEN again, without its canonical form and
    # scope worked out once more (~93% of rust-doc's links, ~88% of the benchmark web's).
    s = c.scope.settings
    seen_before: list[str | None] | None = None
    if (
        known
        and link_filter is None
        and type_ok is None
        and not cut
        and s.max_links_per_page is None
        and (s.max_seed_links is None or not is_seed_page)
        and (s.max_depth is None or child_depth <= s.max_depth)
    ):
        follow_nofollow = s.follow_nofollow
        seen_before = []
        to_judge: list[tuple[str | None, bool]] = []
        for link in links:
            url = link.url
            nofollow = link.nofollow or page_nofollow
            if url is not None and (follow_nofollow or not nofollow):
                h = url.find("#")
                bare = url if h < 0 else url[:h]
                if bare in known:
                    seen_before.append(bare)
                    continue
            seen_before.append(None)
            to_judge.append((url, nofollow))
        judged_rest = iter(decide_page(to_judge, depth=child_depth, is_seed_page=is_seed_page))
    else:
        judged_rest = iter(
            decide_page(
                [(link.url, link.nofollow or page_nofollow) for link in links],
                depth=child_depth,
                is_seed_page=is_seed_page,
            )
        )
    for i, link in enumerate(links):
        nofollow = link.nofollow or page_nofollow
        if seen_before is not None and (target := seen_before[i]) is not None:
            fragment = (link.url or "")[len(target) + 1 :]  # "" when it has no "#"
            fields.append([source, target, fragment, link.anchor, link.kind, nofollow, seen_v])
            continue
        decision, canon = next(judged_rest)
        check_only = False
        if check is not None and canon is not None:
            co = check(decision.value, canon, link.kind)
            if co is not None:  # link checking: checked (check_only) or crawled
                decision, check_only = queued, co
        fragment = ""
        url = link.url
        if url is not None:
            h = url.find("#")  # split_fragment
            if h >= 0:
                fragment = url[h + 1 :]
            if (
                check_only
                and fragment
                and canon is not None
                and policy.note_fragment(canon, fragment, link.kind)
            ):
                # checked already without its ids: once more, to read them
                refetch.append(
                    Request(url=canon, depth=child_depth, referer=source, check_only=True)
                )
        if decision is queued and link_filter is not None:
            # a filter that raised (and was logged) keeps the link
            keep = await call_hook(ctx.hooks, "link_filter", source, source, link, default=True)
            if not keep:
                decision = Decision.SCOPE
        if decision is queued and type_ok is not None and canon and not type_ok(canon):
            decision = Decision.TYPE
        dec = _VALUE[decision]  # a dict lookup: faster than the Enum .value property
        if decision is queued and canon is not None and cut and host_key(canon) in cut:
            dec = _VALUE[Decision.TRAP]  # its host serves mostly duplicates
            if dups is not None:
                dups.note_trapped(canon)
        elif decision is queued and canon is not None:
            if canon in pending or canon == source or (known is not None and canon in known):
                dec = seen_v
            elif (owner_of is None or (owner := owner_of(canon)) == me) and (
                trap := admit(canon)
            ) is not None:
                dec = _VALUE[trap.decision]
            else:
                pending[canon] = len(fields)
                to_add.append(
                    Request(url=canon, depth=child_depth, referer=source, check_only=check_only)
                )
                if owners is not None:
                    owners.append(owner)
        if canon is not None:
            target = canon
        elif url is not None:
            target = url.partition("#")[0]
        else:
            target = link.raw
        fields.append([source, target, fragment, link.anchor, link.kind, nofollow, dec])
    if to_add:
        added = await ctx.add(to_add, owners=owners)
        for canon, idx in pending.items():
            if canon not in added:
                fields[idx][6] = seen_v
        if known is not None:
            known.update(pending)
    if refetch:
        await ctx.add(refetch, force=True)
    if ctx.quality.order == "inlinks":
        await note_inlinks(ctx, source, fields)
    return fields, Counter([f[6] for f in fields])


async def note_inlinks(ctx: CrawlContext, source: str, fields: list[list[Any]]) -> None:
    """``--order inlinks``: the queued or seen targets of ``source`` gain a linking host
    (the frontier ignores links from the target's own host, and repeats); targets of
    other processes are ranked by their owners (:meth:`ShardPeers.admit_received`)."""
    src = host_key(source)
    owner_of, me = ctx.peers.owner_of_url, ctx.peers.index
    pairs = [
        (f[1], src)
        for f in fields
        if f[6] in ("queued", "seen") and (owner_of is None or owner_of(f[1]) == me)
    ]
    if pairs:
        await ctx.components.frontier.note_inlinks(pairs)


def rows_as(source: str, page: Page, decision: str) -> tuple[list[list[Any]], Counter[str]]:
    """links.tsv rows (7 fields) of ``page``'s links, all with ``decision`` (a duplicate
    page's links, or page links under ``--sitemaps only``): nothing is queued."""
    fields: list[list[Any]] = []
    for link in page.links:
        nofollow = link.nofollow or page.nofollow
        if link.url is not None:
            target, _, fragment = link.url.partition("#")
            target = canonicalize(target) or target
        else:
            target, fragment = link.raw, ""
        fields.append([source, target, fragment, link.anchor, link.kind, nofollow, decision])
    return fields, Counter({decision: len(fields)} if fields else {})
