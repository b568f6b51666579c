"""The peers of one process of a host-sharded crawl (``--processes N``): the hand-off.

The crawler of process ``K`` owns only the hosts that hash to ``K`` (:mod:`skitter.sharding`).
:class:`ShardPeers` is its :class:`skitter.peers.Peers`:

* URLs for other processes' hosts are handed off: :meth:`ShardPeers.open` wraps the
  process's frontier in a :class:`skitter.frontier.routing.RoutingFrontier` over the hand-off
  files (written before the page's rows and record, so the crawl's durability argument holds);
* handed-off URLs from other processes are read into the frontier by a background task
  (:meth:`ShardPeers.run`); the read offsets are checkpointed with the frontier commit
  (:meth:`ShardPeers.checkpoint_state`), and their trap budgets are spent here, by the owner;
* the run does not end when the frontier is empty: the process reports itself idle (status
  messages to the coordinator, :mod:`skitter.processes`) and ends when the coordinator says
  "finish";
* ``--max-pages`` and ``--ip-concurrency`` are shared (:class:`skitter.sharding.PageBudget`,
  :class:`skitter.sharding.IpSlots`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skitter.export.pages import PageRecord, iso_utc
from skitter.frontier.routing import RoutingFrontier
from skitter.parse_lanes import LaneExecutor
from skitter.peers import LoopControl, Peers
from skitter.sharding import Handoff, Meta, ShardLink
from skitter.stats import NOT_ERRORS
from skitter.urls import host_key

if TYPE_CHECKING:
    from skitter.context import CrawlContext
    from skitter.models import Request, Response
    from skitter.traps import TrapGuard

__all__ = ["ShardPeers", "redirect_meta"]

log = logging.getLogger("skitter")

#: Seconds between the status messages of an idle crawler process (0.25 s while busy): the
#: coordinator ends the crawl on every process's second idle status in a row (a few pipe
#: messages a second: the wait between the last page and the end is about this long).
IDLE_STATUS_EVERY_S = 0.02


def redirect_meta(resp: Response, attempts: int) -> Meta:
    """The pages.jsonl fields of a 3xx response whose chain continues in another process
    (which records the chain if it does not follow it; :meth:`ShardPeers.record_unfollowed`)."""
    return {
        "content_type": resp.content_type,
        "bytes": len(resp.body),
        "sha1": hashlib.sha1(resp.body).hexdigest(),
        "elapsed_s": resp.elapsed_s,
        "attempts": attempts,
        "fetched_at": iso_utc(time.time()),
    }


@dataclass(slots=True)
class _ShardState:
    """A sharded crawler process's view of the hand-off (see :mod:`skitter.sharding`)."""

    handoff: Handoff
    #: inbox offsets whose requests are all in the frontier (what the checkpoint stores)
    consumed_done: list[int]
    idle: bool = False
    #: bumped whenever received requests have been added (idle is re-derived after it)
    gen: int = 0
    #: set when the crawl loop finds the process idle: its status goes out at once
    went_idle: asyncio.Event = field(default_factory=asyncio.Event)
    receiving: int = 0
    finish: bool = False
    status_seq: int = 0
    #: requested URLs recorded past the checkpoint at resume (no second record for them)
    replayed: set[str] = field(default_factory=set)


class ShardPeers(Peers):
    """Process ``link.index`` of ``link.count``'s peers (see module doc).

    Args:
        link: what the coordinator gives the process (:class:`skitter.sharding.ShardLink`).
    """

    def __init__(self, link: ShardLink) -> None:
        self.link = link
        self.index = link.index
        self.warc_dir: Path | None = link.out_dir
        self.warc_prefix = link.warc_prefix
        self.ip_slots = link.ip_slots
        # the other processes' cores, when they idle: they parse this one's pages
        self.parse_lanes = (
            LaneExecutor(link.parse_clients, link.parse_free, link.index)
            if link.parse_clients
            else None
        )
        self._sh: _ShardState | None = None
        self._ctx: CrawlContext | None = None
        self._loop: LoopControl | None = None

    @property
    def state(self) -> _ShardState:
        """The hand-off state; raises RuntimeError before :meth:`open`."""
        if self._sh is None:
            raise RuntimeError("ShardPeers.open() was not called")
        return self._sh

    @property
    def ctx(self) -> CrawlContext:
        """The crawl's shared state; raises RuntimeError before :meth:`open`."""
        if self._ctx is None:
            raise RuntimeError("ShardPeers.open() was not called")
        return self._ctx

    def open(self, ctx: CrawlContext, loop: LoopControl) -> None:
        """Open the hand-off files (after the frontier's lock is held, before any repair).

        Raises:
            OSError: a hand-off file cannot be created or opened.
        """
        link = self.link
        h = Handoff(link.out_dir, link.index, link.count)
        self._sh = _ShardState(h, h.read_offsets())
        self.owner_of_url = h.owner_of_url
        # queueing routes other processes' hosts to them (through the hand-off files)
        ctx.components.frontier = RoutingFrontier(ctx.components.frontier, h)
        self._ctx = ctx
        self._loop = loop

    def close(self) -> None:
        """Close the hand-off files (idempotent)."""
        if self._sh is not None:
            self._sh.handoff.close()

    # ------------------------------------------------------------------ routing

    def is_foreign(self, canonical_url: str) -> bool:
        """True if another process owns ``canonical_url``'s host (its trap budgets are kept
        there)."""
        h = self.state.handoff
        return h.owner_of_url(canonical_url) != h.index

    def continuation_meta(self, canonical_url: str, resp: Response, attempts: int) -> Meta | None:
        """:func:`redirect_meta` of ``resp`` if the continuation goes to another process."""
        return redirect_meta(resp, attempts) if self.is_foreign(canonical_url) else None

    # ------------------------------------------------------------------ budget and end

    async def start(self, ok: int) -> None:
        """Publish the resumed 2xx count and wait (up to 60 s) until every process has."""
        link = self.link
        if link.budget is None:
            return
        # every process publishes its resumed 2xx count before any of them leases
        link.budget.publish(ok, 0)
        if link.start is not None:
            try:
                await asyncio.to_thread(link.start.wait, 60.0)
            except threading.BrokenBarrierError:
                log.warning("not every crawler process started; going on")

    def total_ok(self, ok: int) -> int:
        """2xx records over every process (as last published), with a budget."""
        budget = self.link.budget
        return budget.total_ok() if budget is not None else ok

    def reserve(self, ok: int, inflight: int, max_pages: int) -> bool:
        """Claim room for one more request in the shared budget."""
        budget = self.link.budget
        if budget is None:
            return ok + inflight < max_pages
        return budget.reserve(ok, inflight)

    def publish(self, ok: int, inflight: int) -> None:
        """Publish this process's 2xx records and requests in flight to the budget."""
        if self.link.budget is not None:
            self.link.budget.publish(ok, inflight)

    def leased(self) -> None:
        """Not idle any more."""
        self.state.idle = False

    def mark(self) -> int:
        """The count of received batches added so far."""
        return self.state.gen

    def dry(self, mark: int, inflight: Collection[Any]) -> bool:
        """Idle (nothing received since ``mark``, nothing in flight) until the coordinator
        says every process is: True once it has ("finish")."""
        sh = self.state
        # idle until the coordinator says every process is (sharding)
        if mark == sh.gen and not sh.receiving and not inflight:
            if not sh.idle:
                sh.went_idle.set()
            sh.idle = True
        return sh.finish and sh.idle

    # ------------------------------------------------------------------ durability

    def checkpoint_state(self) -> dict[str, Any]:
        """``{"handoff": {"consumed": {"K": bytes}}}``: the inbox offsets whose requests
        are all in the frontier."""
        done = self.state.consumed_done
        return {"handoff": {"consumed": {str(k): v for k, v in enumerate(done) if v}}}

    def resume(self, checkpoint: dict[str, Any]) -> None:
        """Read the inboxes on from the checkpointed offsets."""
        sh = self.state
        sh.handoff.load_state(checkpoint.get("handoff") or {})
        sh.consumed_done = sh.handoff.read_offsets()

    def resumed(self, traps: TrapGuard, recorded: Collection[str]) -> None:
        """Spend the trap budgets of what other processes handed over (their links.tsv
        rows say "queued" for this process's hosts) and remember the URLs recorded past
        the checkpoint (no second record of a chain for them)."""
        sh = self.state
        traps.replay(r.url for r in sh.handoff.replay_admitted())
        sh.replayed = set(recorded)

    def dropped(self) -> list[Request]:
        """The handed-over requests this process dropped (see :meth:`Peers.dropped`)."""
        return list(self.state.handoff.replay_dropped())

    # ------------------------------------------------------------------ the hand-off task

    async def run(self) -> None:
        """Obey the coordinator, take in handed-off requests, report status (a background
        task for the crawl's duration)."""
        sh = self.state
        loop = self._loop
        assert loop is not None
        last_status = 0.0
        last_idle: bool | None = None
        while True:
            if not self._obey():
                return
            items = sh.handoff.receive_with_meta()
            if items:
                sh.idle = False
                sh.receiving += 1
                try:
                    await self.admit_received(items)
                finally:
                    sh.receiving -= 1
                sh.gen += 1
                sh.consumed_done = sh.handoff.read_offsets()
                loop.wake()
            now = time.monotonic()
            idle = sh.idle and not loop.inflight and not sh.receiving
            if idle != last_idle or now - last_status >= (IDLE_STATUS_EVERY_S if idle else 0.25):
                last_status, last_idle = now, idle
                queued = (await self.ctx.components.frontier.counts()).pending
                self._send_status(idle, queued)
            if not sh.went_idle.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(sh.went_idle.wait(), 0.02 if idle else 0.05)
            sh.went_idle.clear()

    async def listen(self) -> None:
        """Obey the coordinator (a Ctrl-C: stop, abort) while the crawl has not started
        leasing (the sitemap phase), until cancelled: :meth:`run` then takes over."""
        while self._obey():
            await asyncio.sleep(0.02)

    def _obey(self) -> bool:
        """Carry out the coordinator's messages waiting in the pipe ("stop": interrupt,
        "abort", "finish"); False once the coordinator is gone (the crawl aborted)."""
        sh = self.state
        loop = self._loop
        assert loop is not None
        try:
            while self.link.conn.poll():
                msg = self.link.conn.recv()
                if msg == "stop":
                    loop.interrupt()
                elif msg == "abort":
                    loop.abort()
                elif msg == "finish":
                    sh.finish = True
                    loop.wake()
        except (EOFError, OSError):
            log.error("the coordinating process is gone: stopping")
            loop.abort()
            return False
        return True

    def _send_status(self, idle: bool, queued: int = 0) -> None:
        """One status message to the coordinator: ``("status", seq, idle, sent bytes per
        destination, read bytes per source, counters)``; idle and the offsets describe one
        instant."""
        sh = self.state
        loop = self._loop
        assert loop is not None
        sh.status_seq += 1
        s = self.ctx.stats
        counters = {
            "records": s.records,
            "ok": s.ok,
            "errors": sum(n for k, n in s.by_error.items() if k not in NOT_ERRORS),
            "robots_disallowed": s.robots_disallowed,
            "inflight": loop.inflight,
            "queued": queued,
            "hosts": len(s.by_host),
        }
        with contextlib.suppress(OSError):
            self.link.conn.send(
                (
                    "status",
                    sh.status_seq,
                    idle,
                    sh.handoff.sent(),
                    list(sh.consumed_done),
                    counters,
                )
            )

    async def admit_received(self, items: Sequence[tuple[Request, Meta | None]]) -> None:
        """Queue requests handed off by other processes (with their meta): this process owns
        their hosts, so their trap budgets are spent here; a redirect continuation that is
        not queued ends its chain with a record here (its origin belongs to the sender)."""
        sh = self.state
        ctx = self.ctx
        keep: list[Request] = []
        metas: list[Meta | None] = []
        dropped: list[str] = []
        for r, meta in items:
            trap = ctx.traps.admit(r.url)
            if trap is not None:
                dropped.append(r.url)
                if r.redirects:
                    self.record_unfollowed(r, f"{trap.defence}: {trap.detail}", meta)
                continue
            keep.append(r)
            metas.append(meta)
        # journaled before anything else: a resume spends the budgets of admitted ones only
        sh.handoff.note_dropped(dropped)
        if not keep:
            return
        added = (await ctx.components.frontier.add(keep)).added_urls
        if ctx.quality.order == "inlinks":  # each handed-over link counts for the ranking
            await ctx.components.frontier.note_inlinks(
                [(r.url, host_key(r.referer)) for r in keep if r.referer and not r.redirects]
            )
        # the frontier enqueues the first request of a URL in a batch: every other one
        # ending a redirect chain (two chains to one target, read together) is recorded
        followed: set[str] = set()
        for r, meta in zip(keep, metas, strict=True):
            if r.url in added and r.url not in followed:
                followed.add(r.url)
            elif r.redirects:
                self.record_unfollowed(r, "already crawled or queued", meta)

    def record_unfollowed(self, req: Request, why: str, meta: Meta | None = None) -> None:
        """The record of a handed-off redirect chain whose last target is not fetched; the
        last 3xx response's fields come from the sender's ``meta`` (:func:`redirect_meta`),
        as the sender would have recorded them."""
        if req.requested_url in self.state.replayed:
            return  # recorded before the crash this resume recovers from
        last = req.redirects[-1]
        m = meta or {}
        rec = PageRecord(
            url=req.requested_url,
            final_url=last.url,
            status=last.status,
            depth=req.depth,
            content_type=m.get("content_type"),
            bytes=int(m.get("bytes") or 0),
            sha1=m.get("sha1"),
            fetched_at=str(m.get("fetched_at") or iso_utc(time.time())),
            elapsed_s=float(m.get("elapsed_s") or 0.0),
            attempts=int(m.get("attempts") or 1),
            redirects=list(req.redirects[:-1]),
            error=None,
            error_detail=f"redirect to {req.url} not followed: {why}",
        )
        self.ctx.write_record(rec, host_key(req.requested_url))
