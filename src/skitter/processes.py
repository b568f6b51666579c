"""One crawl run by N host-sharded crawler processes (``skitter crawl --processes N``).

A coordinating process (this module, no event loop) starts N crawler processes. Process ``K``
owns the hosts that hash to ``K`` (:mod:`skitter.sharding`) and keeps its own frontier and
journals in ``OUT/shards/K/``; URLs for other processes' hosts are handed to them in batches
through append-only files. The coordinator:

* merges the processes' ``pages.jsonl`` and ``links.tsv`` into ``OUT/pages.jsonl`` and
  ``OUT/links.tsv`` as the crawl goes (:class:`skitter.shard_merge.Merger`: nothing twice, nothing
  lost, even after a crash);
* decides when the crawl is over: every process idle (nothing pending, leased or in flight)
  and every byte handed off read by its owner, in two consecutive rounds of status reports;
* writes back (``fdatasync``) what the processes append to their journals and WARC files
  as the crawl goes, so that closing them at the end has little left to sync;
* turns Ctrl-C/SIGTERM into a clean stop of every process (a second one aborts the requests
  in flight), stops the others if one dies, and writes ``OUT/report.json`` (the shards'
  counters, robots and trap sections merged).

Before forking, it also lays the parse lanes between the processes
(:class:`skitter.parse_lanes.ParseMesh`): a process whose one busy host keeps its core busy
sends pages to be parsed to the others, whose cores idle (no helper process: each would count
a crawler's resident set once more). The coordinator itself imports none of the crawler's
modules (event loop, HTTP client, parser, WARC writer, SQLite): a short-lived launcher
imports them and forks the crawler processes, which share them and are adopted by the
coordinator (:mod:`skitter.process_launch`); the coordinator stays small (rust-doc, 2
processes: 29 MiB resident, 58 MiB when it imported them itself).

WARC files are written by each process into ``OUT/`` as ``skitter-pK-*.warc.gz``. ``--resume``
restarts the same N processes on their shards (N is fixed for the life of a crawl).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, NamedTuple

from skitter.errors import OutputError, SkitterError, StateError
from skitter.export.linkfile import links_name
from skitter.folder_lock import check_free, lock_folder
from skitter.logs import set_process_index
from skitter.merge import merged_report, merged_stats
from skitter.parse_lanes import ParseMesh, serve
from skitter.process_launch import Child, adopted, launch, subreaper
from skitter.runtime import tune_gc
from skitter.settings import CrawlSettings
from skitter.shard_cleanup import SHARD_JOURNALS, seal_finished
from skitter.shard_merge import MERGE_FILE, Merger
from skitter.sharding import SHARDS_DIR, IpSlots, PageBudget, ShardLink, shard_dir
from skitter.state import (
    FRONTIER_FILE,
    REPORT_FILE,
    STATE_FILE,
    atomic_write_json,
    prepare_new_out_dir,
    save_state,
)
from skitter.stats import StatsSnapshot

__all__ = ["MERGE_FILE", "ProcessesOutcome", "default_processes", "run_processes"]

log = logging.getLogger("skitter")

MERGE_EVERY_S = 0.5
REPORT_EVERY_S = 30.0
#: Seconds between two write-backs of the crawler processes' big files (:func:`_write_back`).
WRITE_BACK_EVERY_S = 1.0


def default_processes() -> int:
    """The number of CPU cores this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(slots=True)
class ProcessesOutcome:
    """How a sharded crawl ended.

    Attributes:
        snapshot: the merged counters (as in report.json ``totals``).
        stop_reason: "done", "max_pages", "max_time" or "interrupted" (also when a
            process failed: see ``error``).
        finished: every process ran dry and the coordinator ended the crawl.
        interrupted: stopped by a signal before the end (resume with ``--resume``).
        error: a one-line description when a process failed, else None.
        exit_code: a failing process's exit code (2 = bad state or settings), else 0.
    """

    snapshot: StatsSnapshot
    stop_reason: str
    finished: bool
    interrupted: bool
    error: str | None = None
    exit_code: int = 0


# ---------------------------------------------------------------------- crawler processes


def _worker_settings(settings: CrawlSettings, index: int, count: int) -> CrawlSettings:
    """Process ``index``'s settings: its shard folder and its share of the global
    concurrency (the per-IP limit is shared: :class:`skitter.sharding.IpSlots`). A shard
    that a killed run never got to create starts new."""
    from skitter.autotune import share_memory

    p = settings.politeness
    sdir = shard_dir(settings.out_dir, index)
    resume = settings.resume
    if resume and not (sdir / STATE_FILE).exists():
        # killed before this process saved its state: nothing was crawled here yet
        shutil.rmtree(sdir, ignore_errors=True)
        resume = False
    return replace(
        settings,
        out_dir=str(sdir),
        processes=1,
        quiet=True,
        resume=resume,
        # the total stays --concurrency (the first ones take the remainder; at least 1 each)
        politeness=replace(
            p, concurrency=max(1, p.concurrency // count + (index < p.concurrency % count))
        ),
        focus=share_memory(settings.focus, count),  # --max-memory: for all of them
    )


async def _worker_crawl(settings: CrawlSettings, link: ShardLink) -> dict[str, Any]:
    from skitter.crawler import Crawler
    from skitter.events import CrawlHooks
    from skitter.shard_peers import ShardPeers
    from skitter.status.host_journal import HostJournal

    # host delays, backoffs and robots states for the coordinator's status page
    journal = HostJournal(settings.out_dir, settings.politeness.delay_s)
    hooks = CrawlHooks(observer=journal)
    async with Crawler(settings, peers=ShardPeers(link), hooks=hooks) as crawler:
        await crawler.run()
        return {"stop_reason": crawler.stop_reason, "finished": crawler.finished}


def _worker_main(
    settings: CrawlSettings,
    index: int,
    count: int,
    conn: Connection,
    budget: PageBudget | None,
    start: Any,
    ip_slots: IpSlots,
    mesh: ParseMesh,
    coordinator: int,
    others: list[Connection],
    launcher_fd: int,
) -> None:
    """Body of crawler process ``index`` (started by the launcher,
    :mod:`skitter.process_launch`): crawl its shard, then send ``("done", {...})`` or
    ``("error", message, exit_code)`` and exit. Meanwhile it parses the pages its siblings send
    when they are host-bound (:mod:`skitter.parse_lanes`). ``others``: the pipe ends of the
    coordinator and of the other processes, inherited and closed here."""
    for end in others:
        end.close()
    _die_with_parent(coordinator, launcher_fd)
    parse_clients, parse_servers = mesh.bind(index)
    tune_gc()  # what the fork inherited is long-lived: keep it out of every collection
    # the coordinator handles signals and tells each process what to do
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if budget is not None:
        budget.bind(index)
    link = ShardLink(Path(settings.out_dir), index, count, conn, budget, start, ip_slots)
    link.parse_clients, link.parse_free = parse_clients, mesh.free
    set_process_index(index)  # log lines say pK
    serve(parse_servers)
    import asyncio

    code = 0
    try:
        # (uvloop was measured: 3-5% more CPU per page than asyncio's loop here)
        result = asyncio.run(_worker_crawl(_worker_settings(settings, index, count), link))
        conn.send(("done", result))
    except (OutputError, OSError) as exc:  # an output could not be written: exit 1, one line
        code = 1
        err = exc if isinstance(exc, OutputError) else OutputError.from_os_error(exc)
        with contextlib.suppress(OSError):
            conn.send(("error", str(err), code))
    except SkitterError as exc:
        code = 2
        with contextlib.suppress(OSError):
            conn.send(("error", str(exc), code))
    except BaseException as exc:  # an internal error: say so, keep the traceback in the log
        code = 1
        log.exception("crawler process %d failed", index)
        with contextlib.suppress(OSError):
            conn.send(("error", f"internal error: {type(exc).__name__}: {exc}", code))
    finally:
        conn.close()
    sys.exit(code)


def _die_with_parent(coordinator: int, launcher_fd: int) -> None:
    """Have the kernel SIGKILL this process when the coordinator dies (Linux
    ``PR_SET_PDEATHSIG``), as if the whole crawl had been killed: its state is crash-safe, and
    a resume must not find a leftover process holding a shard. (Once adopted by the
    coordinator: see :func:`skitter.process_launch.adopted`.)"""
    if not adopted(coordinator, launcher_fd):  # the coordinator died meanwhile
        os._exit(1)
    parent = coordinator
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _wait_for_shard_locks(out_dir: Path, count: int, timeout_s: float = 10.0) -> None:
    """Wait (up to ``timeout_s`` seconds) until no process holds a shard's frontier, e.g. a
    process of a killed run still being torn down by the kernel.

    Raises:
        StateError: a shard's frontier is still locked after ``timeout_s``.
    """
    import sqlite3

    for k in range(count):
        path = shard_dir(out_dir, k) / FRONTIER_FILE
        if not path.exists():
            continue
        try:
            db = sqlite3.connect(path, timeout=timeout_s)
            try:
                db.execute("BEGIN IMMEDIATE")
                db.rollback()
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise StateError(f"{path} is in use by another process ({exc})") from None


# ---------------------------------------------------------------------- coordination


class _Status(NamedTuple):
    """A crawler process's status message (see ``ShardPeers._send_status``)."""

    kind: str  # "status"
    seq: int
    idle: bool
    #: bytes written to each outbox / read from each inbox, by process index
    sent: list[int]
    read: list[int]
    counters: dict[str, int]


@dataclass(slots=True)
class _Worker:
    index: int
    process: Child
    conn: Connection
    status: _Status | None = None
    result: dict[str, Any] | None = None
    error: tuple[str, int] | None = None
    exited: bool = False
    #: its end of the pipe was closed (the process is ending): wait on its sentinel alone
    hung_up: bool = False


def _quiescent(workers: list[_Worker]) -> tuple[tuple[int, ...], tuple[Any, ...]] | None:
    """(status seqs, offsets) if every process reports idle and every byte handed off has
    been read by its owner; else None."""
    sts = [w.status for w in workers if w.status is not None and w.status.idle]
    if len(sts) < len(workers):
        return None
    n = len(sts)
    for k in range(n):
        for j in range(n):
            if j != k and sts[k].sent[j] != sts[j].read[k]:
                return None
    return tuple(s.seq for s in sts), tuple((tuple(s.sent), tuple(s.read)) for s in sts)


def _write_back(out_dir: Path, count: int) -> None:
    """Have the disk write what the crawler processes appended to their shard journals and WARC
    files (``fdatasync`` on a read-only descriptor: the file's dirty pages, whoever wrote
    them), so that the syncs of their end (closing the files) find little left: a crawl of a
    few seconds otherwise writes everything at its end. Durability does not depend on it.
    Errors are ignored (a file being rotated or removed)."""
    names = (*SHARD_JOURNALS, links_name("zstd"))
    paths = [p for k in range(count) for p in (shard_dir(out_dir, k) / n for n in names)]
    paths += out_dir.glob("skitter-p*.warc.gz")
    for path in paths:
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)


def run_processes(
    settings: CrawlSettings,
    *,
    on_status: Callable[[dict[str, int]], None] | None = None,
) -> ProcessesOutcome:
    """Run the crawl of ``settings`` as ``settings.processes`` processes (see module doc).

    Call from the main thread (signal handlers are installed for the run's duration).

    Args:
        settings: the crawl (``resume`` continues the one in ``out_dir``).
        on_status: called about twice a second with the summed counters (records, ok,
            errors, robots_disallowed, inflight, hosts), e.g. for a progress display.
    Returns:
        How the crawl ended (see :class:`ProcessesOutcome`).
    Raises:
        StateError: unusable output folder, or one in use by another process (naming its
            pid; nothing in the folder is changed).
        OSError: the merged files cannot be written.
    """
    count = settings.processes
    out_dir = Path(settings.out_dir)
    if settings.resume:
        if settings.frontier == "memory":
            raise StateError("a crawl with --frontier memory keeps no state and cannot resume")
        if not (out_dir / SHARDS_DIR).is_dir():
            raise StateError(f"{out_dir} holds no sharded crawl (shards/ missing)")
    else:
        check_free(out_dir)  # a crawl running there: named, nothing created
        prepare_new_out_dir(out_dir)
    # the folder's lock for the coordinator's life, before any repair (shared with the CLI's
    # lock when called from it: re-entrant; the crawler processes drop their copies)
    lock = lock_folder(out_dir)
    try:
        if not settings.resume:
            save_state(out_dir, settings)  # first: a crawl killed from here on can be resumed
            (out_dir / SHARDS_DIR).mkdir(exist_ok=True)
        if settings.resume and settings.frontier == "sqlite":
            _wait_for_shard_locks(out_dir, count)
        merger = Merger(out_dir, count, settings.resume, settings.links_compress)
        try:
            return _coordinate(settings, merger, on_status)
        finally:
            merger.close()
    finally:
        lock.release()


def _coordinate(
    settings: CrawlSettings,
    merger: Merger,
    on_status: Callable[[dict[str, int]], None] | None,
) -> ProcessesOutcome:
    count = settings.processes
    ctx = multiprocessing.get_context("fork")
    budget = PageBudget(ctx, count, settings.max_pages) if settings.max_pages is not None else None
    start = ctx.Barrier(count) if budget is not None else None
    ip_slots = IpSlots(ctx, settings.politeness.ip_concurrency)
    mesh = ParseMesh.make(ctx, count)  # the crawlers parse each other's pages: no helpers
    ends = [ctx.Pipe(duplex=True) for _ in range(count)]  # (coordinator's end, crawler's end)
    coordinator = os.getpid()

    def args(k: int) -> tuple[Any, ...]:
        others = [e for pair in ends for e in pair if e is not ends[k][1]]
        return (settings, k, count, ends[k][1], budget, start, ip_slots, mesh, coordinator,
                others)  # fmt: skip

    with subreaper():
        try:
            children = launch(ctx, count, _preload_crawler, _worker_main, args)
        finally:
            mesh.close()  # the crawlers hold their ends: a crawler's death closes its lanes
            for _, child_end in ends:
                child_end.close()
        if len(children) < count:  # the launcher failed (out of memory, processes...)
            for c in children:
                c.kill()
                c.join()
            for parent_end, _ in ends:
                parent_end.close()
            raise OSError(f"could not start the {count} crawler processes")
        workers = [_Worker(k, c, ends[k][0]) for k, c in enumerate(children)]
        return _watch(settings, merger, on_status, workers, start)


def _preload_crawler() -> None:
    """Import the crawler processes' modules (in the launcher, before it forks them): their
    code and objects are then shared by every crawler process (copy-on-write) rather than
    built by each one, and the library pages touched only by the imports stay out of their
    resident sets."""
    import skitter.build  # (the crawler imports it when it starts: robots, CDXJ, protego)
    import skitter.crawler
    import skitter.events
    import skitter.shard_peers
    import skitter.status.host_journal  # noqa: F401


def _watch(
    settings: CrawlSettings,
    merger: Merger,
    on_status: Callable[[dict[str, int]], None] | None,
    workers: list[_Worker],
    start: Any,
) -> ProcessesOutcome:
    count = settings.processes
    out_dir = Path(settings.out_dir)
    signals = 0

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            print("stopping: recording the pages fetched (Ctrl-C again to abort)", file=sys.stderr)
        for w in workers:
            if not w.exited:
                with contextlib.suppress(OSError):
                    w.conn.send("stop" if signals == 1 else "abort")

    tune_gc()  # the coordinator too: merging and the end's report make many short-lived objects
    old_handlers = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    last_merge = last_report = last_progress = last_write_back = 0.0
    candidate: tuple[tuple[int, ...], tuple[Any, ...]] | None = None
    finish_sent = False
    failure: tuple[str, int] | None = None
    try:
        while not all(w.exited for w in workers):
            ready = wait(
                [w.conn for w in workers if not w.exited and not w.hung_up]
                + [w.process.sentinel for w in workers if not w.exited],
                timeout=0.1,
            )
            for w in workers:
                if w.exited:
                    continue
                if w.conn in ready:
                    _drain(w)
                if w.process.sentinel in ready or not w.process.is_alive():
                    _drain(w)
                    w.process.join()
                    w.exited = True
                    if start is not None:
                        start.abort()  # no process waits for one that is gone
                    if w.result is None and failure is None:
                        failure = w.error or (
                            f"crawler process {w.index} died (exit code {w.process.exitcode})",
                            1,
                        )
                        for other in workers:
                            if not other.exited:
                                with contextlib.suppress(OSError):
                                    other.conn.send("stop")
            if not finish_sent and all(not w.exited for w in workers):
                q = _quiescent(workers)
                if q is None:
                    candidate = None
                elif candidate is None:
                    candidate = q
                elif q[1] == candidate[1] and all(
                    a > b for a, b in zip(q[0], candidate[0], strict=True)
                ):
                    for w in workers:
                        with contextlib.suppress(OSError):
                            w.conn.send("finish")
                    finish_sent = True
                elif q[1] != candidate[1]:
                    candidate = q
            now = time.monotonic()
            if now - last_merge >= MERGE_EVERY_S:
                last_merge = now
                merger.step()
            if now - last_write_back >= WRITE_BACK_EVERY_S and not finish_sent:
                last_write_back = now
                _write_back(out_dir, count)
            if on_status is not None and now - last_progress >= 0.5:
                last_progress = now
                on_status(_sum_counters(workers, now - started))
            if now - last_report >= REPORT_EVERY_S:
                last_report = now
                atomic_write_json(
                    out_dir / REPORT_FILE, merged_report(out_dir, settings, "", False)
                )
    finally:
        for s, h in old_handlers.items():
            signal.signal(s, h)
        for w in workers:
            if not w.exited:  # only after an exception here: do not leave orphans
                w.process.kill()
                w.process.join()
            w.conn.close()
    merger.step()
    reasons = [w.result.get("stop_reason", "") for w in workers if w.result is not None]
    finished = (
        failure is None and finish_sent and all(w.result and w.result["finished"] for w in workers)
    )
    if finished and failure is None:
        stop_reason = "done"
    elif failure is not None or "interrupted" in reasons or signals:
        stop_reason = "interrupted"  # a failed process too: the crawl is resumable
    elif "max_pages" in reasons:
        stop_reason = "max_pages"
    elif "max_time" in reasons:
        stop_reason = "max_time"
    else:
        stop_reason = reasons[0] if reasons else "interrupted"
    report = merged_report(out_dir, settings, stop_reason, finished)
    if finished:  # the merged files become the only copy (skitter.shard_cleanup)
        seal_finished(out_dir, count, merger, report)
    else:
        atomic_write_json(out_dir / REPORT_FILE, report)
    stats = merged_stats(out_dir, count)
    return ProcessesOutcome(
        snapshot=stats.snapshot(0.0),
        stop_reason=stop_reason,
        finished=finished,
        interrupted=bool(signals) or (failure is None and stop_reason == "interrupted"),
        error=failure[0] if failure else None,
        exit_code=failure[1] if failure else 0,
    )


def _drain(w: _Worker) -> None:
    """Read every message waiting on ``w``'s pipe."""
    try:
        while w.conn.poll():
            msg = w.conn.recv()
            kind = msg[0]
            if kind == "status":
                w.status = _Status(*msg)
            elif kind == "done":
                w.result = msg[1]
            elif kind == "error":
                w.error = (msg[1], int(msg[2]))
    except (EOFError, OSError):
        w.hung_up = True  # (else the closed pipe would wake every wait at once: a busy loop)


def _sum_counters(workers: list[_Worker], elapsed_s: float) -> dict[str, int]:
    total: dict[str, int] = {}
    for w in workers:
        for k, v in (w.status.counters if w.status is not None else {}).items():
            total[k] = total.get(k, 0) + int(v)
    total["elapsed_ms"] = int(elapsed_s * 1000)
    return total
