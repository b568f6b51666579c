"""The peers port: the other processes of one crawl, as the crawl loop sees them.

A crawler either runs alone (:class:`Alone`, the default: every URL is its own) or as one of
the host-sharded processes of ``--processes N`` (:class:`skitter.shard_peers.ShardPeers`).
The loop, the worker and resume reconciliation call these hooks at fixed points and have no
branch of their own for sharding:

* ownership: :attr:`Peers.owner_of_url` / :meth:`Peers.is_foreign` say who owns a URL's
  host (its trap budgets are spent there); queueing itself is the frontier's (sharded, a
  :class:`skitter.frontier.routing.RoutingFrontier` hands other hosts to their owners), with
  :meth:`Peers.continuation_meta` for what a redirect continuation carries there;
* the page budget: :meth:`Peers.total_ok`, :meth:`Peers.reserve`, :meth:`Peers.publish`
  (``--max-pages`` over every process);
* the end: :meth:`Peers.mark` and :meth:`Peers.dry` (alone, an empty frontier ends the
  crawl; sharded, the coordinator says when);
* durability: :meth:`Peers.checkpoint_state`, :meth:`Peers.resume`, :meth:`Peers.resumed`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from skitter.sharding import Meta

if TYPE_CHECKING:
    from skitter.context import CrawlContext
    from skitter.models import Request, Response
    from skitter.parse_lanes import LaneExecutor
    from skitter.traps import TrapGuard

__all__ = ["Alone", "LoopControl", "Meta", "Peers", "SharedSlots"]


class LoopControl(Protocol):
    """What peers may do to the crawl loop (implemented by :class:`skitter.crawler.Crawler`)."""

    def request_stop(self, reason: str = "interrupted") -> None:
        """Stop leasing; requests in flight finish."""

    def interrupt(self) -> None:
        """Stop leasing and abandon the fetches in flight (pages fetched are recorded)."""

    def abort(self) -> None:
        """Cancel the requests in flight."""

    def wake(self) -> None:
        """Make the loop look at the frontier again now."""

    @property
    def inflight(self) -> int:
        """Requests in flight."""
        ...


class SharedSlots(Protocol):
    """``--ip-concurrency`` counted over every process (:class:`skitter.sharding.IpSlots`)
    or every worker of a Redis crawl (:class:`skitter.redis_peers.RedisIpSlots`, whose
    methods return awaitables)."""

    def try_acquire(self, ip: str) -> bool | Awaitable[bool]:
        """Take a slot for ``ip`` if one is free."""
        ...

    def release(self, ip: str) -> Awaitable[None] | None:
        """Give back a slot."""


class Peers:
    """The port, implemented as a crawler alone (no other process; every hook trivial).

    Attributes:
        index: this process's index among its peers (0 alone).
        owner_of_url: canonical URL -> index of the process owning its host; None alone
            (every URL is this process's: the worker skips the call per link).
        warc_dir: folder of this process's WARC files (None: the output folder).
        warc_prefix: their file name prefix.
        ip_slots: ``--ip-concurrency`` shared with the peers, or None.
        parse_lanes: the executor that sends this process's pages to be parsed by the peer
            processes while its host-bound loop keeps fetching
            (:class:`skitter.parse_lanes.LaneExecutor`, used by
            :class:`skitter.parse_stage.ParseStage`), or None (alone).
    """

    index: int = 0
    owner_of_url: Callable[[str], int] | None = None
    warc_dir: Path | None = None
    warc_prefix: str = "skitter"
    ip_slots: SharedSlots | None = None
    parse_lanes: LaneExecutor | None = None

    def open(self, ctx: CrawlContext, loop: LoopControl) -> None:
        """Attach to a crawl whose components are built (before any resume repair)."""

    def close(self) -> None:
        """Release what :meth:`open` took; idempotent."""

    def is_foreign(self, canonical_url: str) -> bool:
        """True if another process owns the URL's host."""
        return False

    def continuation_meta(self, canonical_url: str, resp: Response, attempts: int) -> Meta | None:
        """What a redirect continuation to ``canonical_url`` carries to its owner, if foreign."""
        return None

    async def start(self, ok: int) -> None:
        """Called once before the first lease with this process's resumed 2xx count."""

    async def run(self) -> None:
        """A background task for the crawl's duration (cancelled at its end), or returns."""

    async def listen(self) -> None:
        """A background task while the crawl has not started leasing (the sitemap phase;
        cancelled at its end): obey a stop asked meanwhile (Ctrl-C), or returns."""

    def total_ok(self, ok: int) -> int:
        """2xx records over every process (``ok``: this process's)."""
        return ok

    def reserve(self, ok: int, inflight: int, max_pages: int) -> bool:
        """Room for one more request under ``max_pages`` 2xx records?"""
        return ok + inflight < max_pages

    def publish(self, ok: int, inflight: int) -> None:
        """This process's 2xx records and requests in flight changed (or nothing to lease)."""

    def leased(self) -> None:
        """A request was leased."""

    def mark(self) -> int:
        """A token taken before asking the frontier whether it is finished."""
        return 0

    def dry(self, mark: int, inflight: Collection[Any]) -> bool:
        """The frontier is finished (asked after :meth:`mark`): does the crawl end?"""
        return True

    def checkpoint_state(self) -> dict[str, Any]:
        """Entries for checkpoint.json, captured with the journal offsets."""
        return {}

    def resume(self, checkpoint: dict[str, Any]) -> None:
        """Restore :meth:`checkpoint_state` from a checkpoint (resume)."""

    def resumed(self, traps: TrapGuard, recorded: Collection[str]) -> None:
        """The journals are replayed (``recorded``: URLs with a record past the checkpoint)."""

    def dropped(self) -> list[Request]:
        """The requests other processes handed over that this one dropped (trap budgets), in
        the order received: judged again by a resume that loosened a limit."""
        return []


class Alone(Peers):
    """A crawler with no peers (the default)."""
