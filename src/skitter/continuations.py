"""Redirect continuations: a 3xx with a Location becomes the next hop's own request.

The continuation carries the chain (``redirects``, ``origin_url``) and is queued like a
link, under the same scope, length and trap limits, and the URL-seen test; its links.tsv row
has kind "redirect". A chain that is not followed ends with a record of its last 3xx, whose
``error_detail`` says why ("redirect to X not followed: ..."). Targets are resolved as a
browser does (:func:`skitter.redirects.location_target`).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from skitter.export.links import LinkRow
from skitter.models import Hop, Lease, Request, Response
from skitter.redirects import location_target
from skitter.rules import Decision
from skitter.urls import canonicalize, split_fragment

if TYPE_CHECKING:
    from skitter.worker import Worker

__all__ = ["follow_redirect"]


async def follow_redirect(
    w: Worker, lease: Lease, resp: Response, attempts: int, not_before: float
) -> None:
    """Carry a 3xx response with a Location on: queue the continuation (the next hop as a
    request of its own, carrying the chain's hops) and ack, or end the chain here with a
    record (unusable Location, too many redirects, a loop, out of scope, too long, a trap,
    already crawled or queued). A cookie-setting self-redirect is followed once."""
    ctx = w.ctx
    c = ctx.components
    req = lease.request
    target = location_target(req.url, resp.header("location"))
    canon = canonicalize(target) if target else None
    hops = (*req.redirects, Hop(req.url, resp.status))
    if canon is None:
        # unusable or non-HTTP Location: the 3xx is the final response
        loc = (resp.header("location") or "").strip()
        await w.finish_response(
            lease,
            resp,
            attempts,
            not_before,
            detail=f"redirect to an unusable or non-http(s) Location: {loc[:200]!r}",
        )
        return
    fragment = split_fragment(target or "")[1]
    if len(hops) > ctx.settings.fetch.max_redirects:
        await w.finish_error(
            lease,
            attempts,
            "too_many_redirects",
            f"more than {ctx.settings.fetch.max_redirects} redirects",
            not_before,
            hops=hops,
            final=req.url,
        )
        return
    visited = [h.url for h in hops]
    force = False
    if canon in visited:
        # a loop; a cookie-setting self-redirect is followed once (RFC 6265 login dances)
        if resp.header_all("set-cookie") and visited.count(canon) == 1:
            force = True
        else:
            await w.finish_error(
                lease,
                attempts,
                "too_many_redirects",
                f"redirect loop back to {canon}",
                not_before,
                hops=hops,
                final=req.url,
            )
            return
    detail = ""
    check_only = req.check_only
    offsite_checked = False
    in_scope = c.scope.in_scope(canon)
    if not in_scope:
        # the mode may follow a redirect anywhere it checks (link checking: as check_only)
        offsite_checked = ctx.policy.check_only_for("scope", canon, "redirect") is not None
        check_only = check_only or offsite_checked
    if not offsite_checked and not in_scope:
        decision = Decision.SCOPE.value
        detail = "out of scope (offsite)"
    elif (
        ctx.settings.scope.max_url_length is not None
        and len(canon) > ctx.settings.scope.max_url_length
    ):
        decision = Decision.URL_LENGTH.value
        detail = f"URL longer than {ctx.settings.scope.max_url_length} characters"
    elif (
        not force
        and not ctx.peers.is_foreign(canon)
        and (trap := ctx.traps.admit(canon)) is not None
    ):
        decision = trap.decision.value
        detail = f"{trap.defence}: {trap.detail}"
    else:
        cont = Request(
            url=canon,
            depth=req.depth,
            referer=req.referer,
            origin_url=req.requested_url,
            redirects=hops,
            priority=req.priority,
            check_only=check_only,
        )
        meta = ctx.peers.continuation_meta(canon, resp, attempts)
        added = await ctx.add([cont], force=force, meta=meta)
        decision = Decision.QUEUED.value if canon in added else Decision.SEEN.value
    row = LinkRow(req.url, canon, fragment, "", "redirect", False, decision)
    if decision == Decision.QUEUED.value:
        c.links.write_rows([row])
        ctx.stats.count_decisions(Counter({decision: 1}))
        await c.frontier.ack(lease, not_before=not_before, status=resp.status)
        return
    # not followed: the chain ends here, with this 3xx as the final response
    if decision == Decision.SEEN.value:
        detail = "already crawled or queued"
    await w.finish_response(
        lease,
        resp,
        attempts,
        not_before,
        extra_rows=[row],
        detail=f"redirect to {canon} not followed: {detail}",
    )
