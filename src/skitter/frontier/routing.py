"""A frontier that routes: this process's hosts queue locally, other processes' hosts go to
their owners.

:class:`RoutingFrontier` wraps the local frontier of one process of a host-sharded crawl
(``--processes N``, :mod:`skitter.sharding`) behind the :class:`~skitter.frontier.base.Frontier`
protocol. :meth:`RoutingFrontier.add` splits a batch by owner: requests for hosts this process
owns go to the local frontier, the others are handed to a :class:`Router` (the hand-off files,
:class:`skitter.sharding.Handoff`) *before* the local add, in one write per destination, so
the crawl's durability order holds (hand-offs, then the page's rows, record and ack). Every
other operation (lease, ack, retry, counts...) is the local frontier's. The crawl loop and the
worker therefore queue through one ``frontier.add`` whatever the mode; a frontier shared by
every worker (Redis) needs no routing at all.

A redirect continuation handed to another process carries the fields of its last 3xx
response (:data:`Meta`), which :class:`Frontier` cannot: :func:`add_routed` passes them to a
routing frontier and drops them for any other (on one process there is nobody to pass them
to).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from skitter.frontier.base import AddResult, Frontier
from skitter.frontier.forwarding import ForwardingFrontier
from skitter.models import Request

__all__ = ["Meta", "Outgoing", "Router", "RoutingFrontier", "add_routed"]

#: The pages.jsonl fields of the last 3xx response of a redirect chain continuing elsewhere
#: (content_type, bytes, sha1, elapsed_s, attempts, fetched_at).
Meta = dict[str, Any]
#: One handed-off request, with its meta if it has one.
Outgoing = Request | tuple[Request, Meta]


class Router(Protocol):
    """Where requests for other processes' hosts go (:class:`skitter.sharding.Handoff`).

    Attributes:
        index: this process's index.
    """

    index: int

    def owner_of_url(self, url: str) -> int:
        """The index of the process owning a canonical URL's host."""
        ...

    def send(self, batches: dict[int, list[Outgoing]]) -> None:
        """Hand each destination's requests to it (durably written when this returns).

        Raises:
            OSError: the write failed.
        """


class RoutingFrontier(ForwardingFrontier):
    """The local frontier of process ``router.index``, routing other processes' hosts away.

    Args:
        local: this process's frontier (memory or sqlite).
        router: where other hosts' requests go.

    :meth:`add`'s :class:`AddResult` counts a handed-off request as added (the owner's
    URL-seen test decides there) and lists its URL in ``added_urls``; only local requests can
    be duplicates. With one process owning every host, it is exactly the local frontier.

    Every other call is the local frontier's (:class:`ForwardingFrontier`, ``inner`` =
    ``local``): :meth:`delay_host` (hosts leased here are ours); :meth:`is_finished` says
    whether the local frontier is (whether the crawl is: the peers say,
    :meth:`skitter.peers.Peers.dry`); :meth:`mark_done` reconciles this process's own journal;
    :meth:`note_inlinks` ignores a target another process owns (its owner counts the link when
    it admits the handed-over request, :class:`skitter.shard_peers.ShardPeers`); :meth:`flush`
    flushes the local frontier (hand-offs are durable when :meth:`add` returns);
    :meth:`aclose` closes the local frontier (the router is closed by its owner).
    """

    def __init__(self, local: Frontier, router: Router) -> None:
        super().__init__(local)
        self.local = local
        self.router = router

    async def add(
        self,
        requests: Sequence[Request],
        *,
        force: bool = False,
        meta: Meta | None = None,
        owners: Sequence[int] | None = None,
    ) -> AddResult:
        """Queue ``requests``: this process's hosts locally, the others handed to their owners
        (each with ``meta`` if given) before the local add. ``owners``: each request's owner
        if the caller knows it already (same length as ``requests``).

        Raises:
            ValueError: a request URL has no host.
            OSError: a hand-off write failed (nothing was added locally then).
            FrontierError: the local backend failed.
        """
        router = self.router
        me = router.index
        if owners is None:
            owners = [router.owner_of_url(r.url) for r in requests]
        local: list[Request] = []
        away: dict[int, list[Outgoing]] = {}
        handed: set[str] = set()
        n_away = 0
        for r, j in zip(requests, owners, strict=True):
            if j == me:
                local.append(r)
            else:
                away.setdefault(j, []).append((r, meta) if meta else r)
                handed.add(r.url)
                n_away += 1
        if not away:
            return await self.local.add(local, force=force)
        router.send(away)
        if not local:
            return AddResult(n_away, 0, frozenset(handed))
        res = await self.local.add(local, force=force)
        return AddResult(res.added + n_away, res.duplicates, frozenset(handed | res.added_urls))


async def add_routed(
    frontier: Frontier,
    requests: Sequence[Request],
    *,
    force: bool = False,
    meta: Meta | None = None,
    owners: Sequence[int] | None = None,
) -> AddResult:
    """``frontier.add(requests, force=force)``, passing ``meta`` and ``owners`` on if the
    frontier routes (:class:`RoutingFrontier`); any other frontier holds every host, so they
    mean nothing to it."""
    if isinstance(frontier, RoutingFrontier):
        return await frontier.add(requests, force=force, meta=meta, owners=owners)
    return await frontier.add(requests, force=force)
