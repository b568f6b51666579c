"""The crawl's sitemap phase: read the seeds' sitemaps before the first lease, queue entries.

Run once by the crawl loop (:mod:`skitter.crawler`) after the seeds are queued, when
``--sitemaps`` is not ``off`` or ``--sitemap`` URLs are given (never for link checking). The
roots (:func:`skitter.sitemap_reader.sitemap_roots`) are the ``Sitemap:`` lines of the seed
origins' robots.txt, ``/sitemap.xml`` with ``also``, and the ``--sitemap`` URLs; the walk
(:class:`skitter.sitemap_reader.SitemapReader`) fetches through the worker
(:meth:`skitter.worker.Worker.fetch_aside`: robots.txt, politeness gap, ``--ip-concurrency``,
archived to the WARC like robots.txt, no pages.jsonl record). Entries are decided like links
of a depth-0 page (scope, traps; depth 1) and written to links.tsv with kind ``sitemap``,
source the sitemap URL and the ``lastmod`` as anchor.

Durability: the phase ends with a checkpoint, then ``sitemaps.json`` (the report block) is
written; a resume finding it skips the phase (one damaged by hand counts as missing). A
resume of an interrupted phase reads the sitemaps again: the rows the cut phase already
wrote to links.tsv (counted by the resume's replay) are not written again, their queued
entries are queued again (the URL-seen test drops those the frontier kept), so links.tsv
holds each row once and none is lost.
Ctrl-C/SIGTERM (``interrupted``, set by :meth:`skitter.crawler.Crawler.interrupt`) stops the
phase at once: the robots.txt and sitemap fetches under way are abandoned (read again on
resume), nothing more is queued, and the phase ends unfinished. Entries are decided and
their robots.txt consulted before any of them is queued or written, so an interrupted batch
leaves nothing half done (no budget spent, no row written for it).
With ``--processes``, each process reads the sitemaps of the seeds it owns (those their
robots.txt lists are read by the seed's owner even on another process's host, as an
index's children are) and the ``--sitemap`` URLs of its hosts; entries for other
processes' hosts are handed over like links.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from skitter.errors import StateError
from skitter.export.linkfile import links_file
from skitter.export.links import format_rows, read_rows
from skitter.models import Request
from skitter.rules import Decision
from skitter.sitemap_reader import SitemapReader, sitemap_roots
from skitter.sitemaps import SitemapEntry, SitemapStats
from skitter.state import SITEMAPS_FILE, atomic_write_json, read_json
from skitter.urls import canonicalize, host_key, origin

if TYPE_CHECKING:
    from skitter.context import CrawlContext
    from skitter.worker import Worker

__all__ = ["read_sitemaps"]

log = logging.getLogger("skitter")

#: Entries decided and queued per batch.
BATCH = 1000

T = TypeVar("T")


class _Interrupted(Exception):
    """The crawl was interrupted while the phase waited on the network."""


async def _unless(interrupted: asyncio.Event | None, coro: Coroutine[Any, Any, T]) -> T:
    """``await coro``; once ``interrupted`` is set, cancel it and raise :class:`_Interrupted`
    instead (the fetches of the phase: robots.txt, sitemaps)."""
    if interrupted is None:
        return await coro
    if interrupted.is_set():
        coro.close()
        raise _Interrupted
    task = asyncio.ensure_future(coro)
    waiter = asyncio.ensure_future(interrupted.wait())
    try:
        await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # (this task cancelled)
        task.cancel()
        waiter.cancel()
        raise
    waiter.cancel()
    if not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise _Interrupted
    return task.result()


async def read_sitemaps(
    ctx: CrawlContext,
    worker: Worker,
    checkpoint: Callable[[], Awaitable[None]],
    stopping: Callable[[], bool] = lambda: False,
    interrupted: asyncio.Event | None = None,
) -> None:
    """The sitemap phase (see the module doc); ``checkpoint`` commits the crawl state.

    Sets ``ctx.sitemap_stats`` (the report.json ``sitemaps`` block). Once ``stopping()``
    (a stop requested) no further sitemap is fetched, and once ``interrupted`` is set
    (Ctrl-C) the fetches under way are abandoned too; the phase then ends unfinished (no
    ``sitemaps.json``: a resume reads the sitemaps again).
    """
    q = ctx.quality
    if q.sitemaps == "off" and not q.sitemap_urls:
        return
    marker = ctx.out_dir / SITEMAPS_FILE
    if marker.exists():
        try:
            done = read_json(marker)
        except StateError:
            done = None
        if isinstance(done, dict):
            ctx.sitemap_stats = done
            return
        # damaged by hand (it is written atomically): the phase is safe to run again
        log.warning("%s is damaged: reading the sitemaps again", marker)
    c = ctx.components
    peers = ctx.peers
    # a resume of a cut phase: the sitemap rows it wrote (no page precedes the phase)
    written: dict[tuple[str, str], list[str]] = {}
    links_path = links_file(ctx.out_dir)
    if links_path.exists():
        for row in read_rows(links_path):
            if row.kind == "sitemap":
                written.setdefault((row.source, row.target), []).append(row.decision)
    origins: list[str] = []
    for s in ctx.settings.seeds:
        url = canonicalize(s)
        if url is not None and not peers.is_foreign(url) and origin(url) not in origins:
            origins.append(origin(url))
    # hosts in parallel (--concurrency at once), each host's sitemaps one after the other
    slots = asyncio.Semaphore(max(1, ctx.settings.politeness.concurrency))
    found: dict[str, list[tuple[str, str]]] = {}

    async def robots_of(org: str) -> None:
        async with slots:
            try:
                robots = await _unless(interrupted, c.robots.rules_for(org + "/"))
            except _Interrupted:
                return
        robots_url = robots.final_url or org + "/robots.txt"
        found[org] = [(v, robots_url) for v in robots.rules.sitemaps]

    if q.sitemaps != "off" and not ctx.settings.politeness.ignore_robots:
        await asyncio.gather(*(robots_of(org) for org in origins))
    # sharded: a robots.txt Sitemap line is read by the seed's owner, whatever its host (as
    # an index's children are; no other process sees it), a --sitemap URL by its host's owner
    roots = sitemap_roots(replace(q, sitemap_urls=()), origins, lambda org: found.get(org, []))
    roots += [u for u in q.sitemap_urls if not peers.is_foreign(canonicalize(u) or u)]
    by_host: dict[str, list[str]] = {}
    for r in roots:
        canon = canonicalize(r)
        by_host.setdefault(host_key(canon) if canon else r, []).append(r)

    async def allowed(url: str) -> bool:
        if ctx.settings.politeness.ignore_robots:
            return True
        # (the fetch counts it)
        return (await _unless(interrupted, c.robots.check(url, count=False))).allowed

    async def fetch(url: str) -> Any:
        return await _unless(interrupted, worker.fetch_aside(url, q.max_sitemap_bytes))

    # one reader: the graph (each sitemap read once) and the counters are shared
    reader = SitemapReader(q, fetch, allowed, c.scope.in_scope, stopping=stopping)

    async def walk(host_roots: list[str]) -> None:
        async with slots:
            batch: list[tuple[str, SitemapEntry]] = []
            try:
                async for sm_url, entry in reader.read(host_roots):
                    batch.append((sm_url, entry))
                    if len(batch) >= BATCH:
                        await _queue_entries(ctx, batch, reader.stats, allowed, written)
                        batch = []
                if batch:
                    await _queue_entries(ctx, batch, reader.stats, allowed, written)
            except _Interrupted:
                return  # (the batch cut: nothing of it queued or written)

    await asyncio.gather(*(walk(rs) for rs in by_host.values()))
    ctx.sitemap_stats = {"mode": q.sitemaps, **reader.stats.as_dict()}
    if stopping() or (interrupted is not None and interrupted.is_set()):
        return  # unfinished: the crawl's last checkpoint keeps the rows written so far
    await checkpoint()
    atomic_write_json(marker, ctx.sitemap_stats)


async def _queue_entries(
    ctx: CrawlContext,
    batch: list[tuple[str, SitemapEntry]],
    stats: SitemapStats,
    allowed: Callable[[str], Awaitable[bool]],
    written: dict[tuple[str, str], list[str]],
) -> None:
    """Decide sitemap entries like links of a seed page and queue them (depth 1).

    ``written``: (sitemap URL, target) -> decisions of the rows already in links.tsv from a
    cut run of the phase; each matching entry uses one up, is not written again and, if that
    row was queued, is queued again (no trap budget: the resume replayed its row).

    Raises:
        _Interrupted: from ``allowed``, before anything of the batch is counted or queued.
    """
    c = ctx.components
    is_foreign = ctx.peers.is_foreign
    # first every decision and robots.txt verdict (they may wait on the network: an
    # interruption here leaves nothing of the batch done), then the queueing
    judged: list[tuple[str, SitemapEntry, Decision, str | None]] = []
    disallowed = 0
    for i, (sm_url, entry) in enumerate(batch):
        decision, canon = c.scope.decide(
            entry.url, depth=1, nofollow=False, index=i, is_seed_page=False
        )
        judged.append((sm_url, entry, decision, canon))
        queued = canon if decision is Decision.QUEUED else None
        if queued is not None and not is_foreign(queued) and not await allowed(queued):
            disallowed += 1  # queued anyway: the fetch records it
    stats.robots_disallowed += disallowed
    fields: list[list[Any]] = []
    pending: dict[str, int] = {}
    to_add: list[Request] = []
    again: list[Request] = []
    for sm_url, entry, decision, canon in judged:
        dec = decision.value
        if decision is Decision.SCOPE:
            stats.out_of_scope += 1
        queued = canon if decision is Decision.QUEUED else None
        key = (sm_url, canon if canon is not None else entry.url)
        if written.get(key):
            if written[key].pop(0) == Decision.QUEUED.value and queued is not None:
                again.append(Request(url=queued, depth=1, referer=sm_url))
            continue
        if queued is not None:
            canon = queued
            if canon in pending:
                dec = Decision.SEEN.value
            elif not is_foreign(canon) and (trap := ctx.traps.admit(canon)) is not None:
                dec = trap.decision.value
            else:
                pending[canon] = len(fields)
                to_add.append(Request(url=canon, depth=1, referer=sm_url))
        target = canon if canon is not None else entry.url
        fields.append([sm_url, target, "", entry.lastmod or "", "sitemap", False, dec])
    if again:
        await ctx.add(again)
    if to_add:
        added = await ctx.add(to_add)
        for canon, idx in pending.items():
            if canon not in added:
                fields[idx][6] = Decision.SEEN.value
    c.links.write_text(format_rows(fields))
    ctx.stats.count_decisions(Counter(f[6] for f in fields))
