"""Host sharding: one crawl split over N processes, each owning a disjoint set of hosts.

Process ``K`` of ``N`` owns every host whose :func:`shard_of` is ``K`` (a stable hash of the
politeness key, so http and https of a host, and every URL of it, go to one process): only
``K`` fetches that host, keeps its robots.txt, its politeness schedule, its URL-seen test and
its trap budgets. Politeness therefore holds across processes.

A URL discovered by ``K`` for a host of ``J`` is *handed off* through an append-only file,
``shards/K/handoff/to-J.jsonl`` (written only by ``K``, read only by ``J``), one JSON array per
request (:func:`encode_request`), one ``write()`` per batch of whole lines. ``J`` reads complete
lines only and stores how far it has read in its checkpoint, next to its frontier commit, so:

* a kill at any instant loses nothing: ``K`` writes a page's hand-offs before the page's
  links.tsv rows and record (and so before its frontier ack); on resume ``K`` cuts a partial
  last line and replays the links past its checkpoint (duplicates are harmless: ``J``'s
  URL-seen test drops them); ``J`` re-reads from its checkpointed offset;
* the crawl is over when every process is idle and every byte handed off has been read
  (:class:`skitter.processes` checks this twice in a row).

Shared state between the processes is limited to the hand-off files, a control pipe each, and
(with ``--max-pages``) a :class:`PageBudget` in shared memory.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from skitter import compact_json
from skitter.export.base import AppendFile, truncate_partial_line
from skitter.frontier.routing import Meta, Outgoing
from skitter.models import Hop, Request

__all__ = [
    "SHARDS_DIR",
    "Handoff",
    "IpSlots",
    "Meta",
    "Outgoing",
    "PageBudget",
    "ShardLink",
    "decode_line",
    "decode_request",
    "encode_request",
    "shard_dir",
    "shard_of",
    "shard_of_url",
]

#: Sub-folder of the output folder holding one folder per process (``shards/0`` ...).
SHARDS_DIR = "shards"
#: Most bytes read from one hand-off file per poll.
READ_CHUNK_BYTES = 4 * 1024 * 1024


def shard_of(host: str, count: int) -> int:
    """The index (0 .. count-1) of the process that owns ``host`` (a politeness key,
    :func:`skitter.urls.host_key`); CRC-32 of its UTF-8 bytes, the same in every process and
    run (Python's ``hash`` is salted per process)."""
    if count <= 1:
        return 0
    return zlib.crc32(host.encode("utf-8", "surrogatepass")) % count


def shard_of_url(url: str, count: int) -> int:
    """:func:`shard_of` the host key of a canonical URL (:func:`skitter.urls.canonicalize`),
    read off the authority directly (scheme and host are lower-case, the default port is
    dropped in canonical form, so the authority *is* the host key unless it has userinfo).

    Raises:
        ValueError: ``url`` has no host (only on the slow path).
    """
    if count <= 1:
        return 0
    i = url.find("://")
    if i > 0:
        j = url.find("/", i + 3)
        auth = url[i + 3 : j] if j >= 0 else url[i + 3 :]
        if auth and "@" not in auth and "?" not in auth and "#" not in auth:
            return zlib.crc32(auth.encode("utf-8", "surrogatepass")) % count
    from skitter.urls import host_key

    return shard_of(host_key(url), count)


def shard_dir(out_dir: str | os.PathLike[str], index: int) -> Path:
    """``OUT/shards/INDEX``: the folder holding process ``index``'s frontier and journals."""
    return Path(out_dir) / SHARDS_DIR / str(index)


# What a hand-off line may carry beside its request (:data:`Meta`: for a redirect
# continuation, the last 3xx response's pages.jsonl fields, so that its owner can record the
# chain as the sender would have) and an item of :meth:`Handoff.send`'s batches
# (:data:`Outgoing`) are the routing frontier's (:mod:`skitter.frontier.routing`).


def encode_request(req: Request, meta: Meta | None = None) -> bytes:
    """One hand-off line: ``[url, depth, referer, origin_url, priority, check_only, hops]``
    (and ``meta`` as an 8th element when given) as compact JSON (``hops`` =
    ``[[url, status], ...]``), ending in ``\\n``."""
    hops = [[h.url, h.status] for h in req.redirects]
    fields: list[Any] = [
        req.url, req.depth, req.referer, req.origin_url, req.priority, req.check_only, hops
    ]  # fmt: skip
    if meta:
        fields.append(meta)
    return compact_json.encode(fields) + b"\n"


def decode_line(line: bytes) -> tuple[Request, Meta | None] | None:
    """Inverse of :func:`encode_request`: (request, meta or None); None for a line that is
    not one (never raises)."""
    try:
        fields = compact_json.decode(line)
        url, depth, referer, origin_url, priority, check_only, hops = fields[:7]
        meta = fields[7] if len(fields) > 7 and isinstance(fields[7], dict) else None
        req = Request(
            url=str(url),
            depth=int(depth),
            referer=referer,
            origin_url=origin_url,
            redirects=tuple(Hop(str(u), int(s)) for u, s in hops),
            priority=int(priority),
            check_only=bool(check_only),
        )
    except (ValueError, TypeError, KeyError):
        return None
    return req, meta


def decode_request(line: bytes) -> Request | None:
    """The request of a hand-off line (:func:`decode_line`), or None."""
    got = decode_line(line)
    return got[0] if got is not None else None


class Handoff:
    """Process ``index``'s ends of the hand-off files: its outboxes (``to-J.jsonl`` in its own
    folder, one per other process) and its inboxes (``to-INDEX.jsonl`` in the others').

    Args:
        out_dir: the crawl's output folder (holding ``shards/``).
        index, count: this process's index and the number of processes (``count`` >= 2).
    Raises:
        OSError: the hand-off folder cannot be created or an outbox opened.

    Opening an outbox cuts a partial last line left by a crash (its reader never read it: it
    reads complete lines only). Not thread-safe; used from one event loop.
    """

    def __init__(self, out_dir: str | os.PathLike[str], index: int, count: int) -> None:
        if not 0 <= index < count:
            raise ValueError(f"shard index {index} out of range for {count} processes")
        self.index = index
        self.count = count
        self.out_dir = Path(out_dir)
        box = shard_dir(out_dir, index) / "handoff"
        box.mkdir(parents=True, exist_ok=True)
        self._out: dict[int, AppendFile] = {}
        for j in range(count):
            if j != index:
                path = box / f"to-{j}.jsonl"
                truncate_partial_line(path)
                self._out[j] = AppendFile(path)
        self._in_paths = {
            k: shard_dir(out_dir, k) / "handoff" / f"to-{index}.jsonl"
            for k in range(count)
            if k != index
        }
        self._in_fds: dict[int, int] = {}
        # URLs read from the inboxes that this process dropped (trap budgets): kept so a
        # resume rebuilds the budgets from what was admitted only
        dropped = box / "dropped.txt"
        truncate_partial_line(dropped)
        self._dropped_path = dropped
        self._dropped = AppendFile(dropped)
        #: bytes of each inbox already read (a line boundary), by source index
        self.consumed: dict[int, int] = dict.fromkeys(self._in_paths, 0)

    def owner_of_url(self, url: str) -> int:
        """The index of the process owning a canonical URL's host."""
        return shard_of_url(url, self.count)

    def send(self, batches: dict[int, list[Outgoing]]) -> None:
        """Append each destination's requests (each maybe with its :data:`Meta`) to its
        outbox (one ``write()`` per destination).

        Raises:
            OSError: the write failed (nothing partial is left behind).
        """
        for j, items in batches.items():
            if items:
                self._out[j].write(
                    b"".join(
                        encode_request(it) if isinstance(it, Request) else encode_request(*it)
                        for it in items
                    )
                )

    def sent(self) -> list[int]:
        """Bytes written to each outbox, by destination index (0 for this process)."""
        return [self._out[j].offset() if j in self._out else 0 for j in range(self.count)]

    def read_offsets(self) -> list[int]:
        """Bytes read from each inbox, by source index (0 for this process)."""
        return [self.consumed.get(k, 0) for k in range(self.count)]

    def receive(self) -> list[Request]:
        """The requests of :meth:`receive_with_meta`."""
        return [r for r, _ in self.receive_with_meta()]

    def receive_with_meta(self) -> list[tuple[Request, Meta | None]]:
        """Read the complete lines that arrived in the inboxes since the last call.

        Returns:
            (request, meta) pairs, inbox by inbox in source order (undecodable lines are
            skipped).
        Raises:
            OSError: an inbox exists but cannot be read.
        """
        out: list[tuple[Request, Meta | None]] = []
        for k, path in self._in_paths.items():
            fd = self._in_fds.get(k)
            if fd is None:
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                self._in_fds[k] = fd
            off = self.consumed[k]
            while True:
                data = os.pread(fd, READ_CHUNK_BYTES, off)
                end = data.rfind(b"\n")
                if end < 0:
                    break
                for line in data[: end + 1].splitlines():
                    got = decode_line(line)
                    if got is not None:
                        out.append(got)
                off += end + 1
                if len(data) < READ_CHUNK_BYTES:
                    break
            self.consumed[k] = off
        return out

    def note_dropped(self, urls: Iterable[str]) -> None:
        """Journal received URLs that this process did not admit (one ``write()``)."""
        data = "".join(f"{u}\n" for u in urls).encode("utf-8", "surrogateescape")
        if data:
            self._dropped.write(data)

    def _dropped_urls(self) -> set[str]:
        if not self._dropped_path.exists():
            return set()
        with open(self._dropped_path, "rb") as fh:
            return {ln.rstrip(b"\n").decode("utf-8", "surrogateescape") for ln in fh}

    def replay_admitted(self) -> Iterable[Request]:
        """Every request read so far (from byte 0 to :attr:`consumed` of each inbox) that was
        not dropped (:meth:`note_dropped`): for rebuilding the trap budgets on resume. Reads
        the files again; nothing is consumed."""
        dropped = self._dropped_urls()
        for req in self._replay_received():
            if req.url not in dropped:
                yield req

    def replay_dropped(self) -> Iterable[Request]:
        """The requests read so far that were dropped (:meth:`note_dropped`), each URL once,
        in the order read: what a resume that loosened a limit judges again. Reads the files
        again; nothing is consumed."""
        dropped = self._dropped_urls()
        if not dropped:
            return
        for req in self._replay_received():
            if req.url in dropped:
                dropped.discard(req.url)
                yield req

    def _replay_received(self) -> Iterable[Request]:
        for k, path in self._in_paths.items():
            end = self.consumed[k]
            if end <= 0 or not path.exists():
                continue
            with open(path, "rb") as fh:
                pos = 0
                for line in fh:
                    pos += len(line)
                    if pos > end:
                        break
                    req = decode_request(line)
                    if req is not None:
                        yield req

    def to_state(self) -> dict[str, Any]:
        """The read offsets, JSON-ready (``{"consumed": {"K": bytes}}``), for the checkpoint."""
        return {"consumed": {str(k): v for k, v in self.consumed.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`to_state` output (resume); unknown or bad entries are ignored."""
        consumed = state.get("consumed") if isinstance(state, dict) else None
        if not isinstance(consumed, dict):
            return
        for key, value in consumed.items():
            try:
                k = int(key)
            except ValueError:
                continue
            if k in self.consumed and isinstance(value, int) and value >= 0:
                self.consumed[k] = value

    def close(self) -> None:
        """Close the outboxes (synced) and inboxes; idempotent."""
        for f in self._out.values():
            f.close()
        self._dropped.close()
        for fd in self._in_fds.values():
            os.close(fd)
        self._in_fds.clear()


class PageBudget:
    """A ``--max-pages`` budget shared by the processes of one crawl (shared memory + lock).

    Each process publishes its own (2xx records, requests in flight); a process may start a
    request only while the sum over all processes of both is below ``max_pages``, so the crawl
    stops at exactly ``max_pages`` 2xx records when every request succeeds, as a single
    process does. Create it in the parent before the processes start (it is inherited).

    Args:
        ctx: the multiprocessing context the processes are started from.
        count: number of processes. max_pages: the limit (2xx records).
    """

    def __init__(self, ctx: BaseContext, count: int, max_pages: int) -> None:
        self.max_pages = max_pages
        self._lock = ctx.Lock()
        self._slots: Any = ctx.Array("q", 2 * count, lock=False)
        self._index = 0

    def bind(self, index: int) -> None:
        """Select the slots this process writes (call once in the child)."""
        self._index = index

    def _set(self, ok: int, inflight: int) -> None:
        self._slots[2 * self._index] = ok
        self._slots[2 * self._index + 1] = inflight

    def publish(self, ok: int, inflight: int) -> None:
        """Record this process's 2xx records and requests in flight."""
        with self._lock:
            self._set(ok, inflight)

    def reserve(self, ok: int, inflight: int) -> bool:
        """Claim room for one more request: True (and counted as in flight) if the total of
        2xx records and requests in flight over all processes is below ``max_pages``."""
        with self._lock:
            others = (
                sum(self._slots) - self._slots[2 * self._index] - self._slots[2 * self._index + 1]
            )
            if others + ok + inflight + 1 <= self.max_pages:
                self._set(ok, inflight + 1)
                return True
            self._set(ok, inflight)
            return False

    def total_ok(self) -> int:
        """2xx records over all processes (as last published)."""
        with self._lock:
            return sum(self._slots[0::2])


class IpSlots:
    """``--ip-concurrency`` shared by the processes of one crawl: a count of requests in
    flight per IP address (hashed into ``buckets`` counters in shared memory, so two
    addresses rarely share a limit), under one lock. Create it in the parent before the
    processes start (it is inherited).

    Args:
        ctx: the multiprocessing context. limit: requests in flight per address.
        buckets: number of counters.
    """

    def __init__(self, ctx: BaseContext, limit: int, buckets: int = 4096) -> None:
        self.limit = limit
        self._lock = ctx.Lock()
        self._counts: Any = ctx.Array("i", buckets, lock=False)
        self._n = buckets

    def _bucket(self, ip: str) -> int:
        return zlib.crc32(ip.encode("ascii", "replace")) % self._n

    def try_acquire(self, ip: str) -> bool:
        """Take a slot for ``ip`` if fewer than ``limit`` are taken over all processes."""
        b = self._bucket(ip)
        with self._lock:
            if self._counts[b] < self.limit:
                self._counts[b] += 1
                return True
            return False

    def release(self, ip: str) -> None:
        """Give back a slot taken with :meth:`try_acquire`."""
        b = self._bucket(ip)
        with self._lock:
            if self._counts[b] > 0:
                self._counts[b] -= 1


@dataclass(slots=True)
class ShardLink:
    """What a crawler process of a sharded crawl is given by its coordinator.

    Attributes:
        out_dir: the crawl's output folder (the shard's own files are in
            :func:`shard_dir`); its WARC files are written there, prefixed ``skitter-pINDEX``.
        index, count: this process's index and the number of processes.
        conn: the control pipe to the coordinator (receives "stop", "abort", "finish";
            sends status tuples, see :mod:`skitter.processes`).
        budget: the shared ``--max-pages`` budget, or None.
        start: with a budget, the barrier every process passes once it has published its
            resumed 2xx count (so no process leases before the budget is whole).
        ip_slots: the shared ``--ip-concurrency``, or None.
        parse_clients: client ends of the parse lanes to the sibling processes
            (:class:`skitter.parse_lanes.ParseMesh`); none: pages are always parsed here.
        parse_free: the mesh's shared "free to parse" flags (``ParseMesh.free``), or None.
    """

    out_dir: Path
    index: int
    count: int
    conn: Connection
    budget: PageBudget | None = None
    start: Any = None
    ip_slots: IpSlots | None = None
    parse_clients: list[Connection] = field(default_factory=list)
    parse_free: Any = None

    @property
    def warc_prefix(self) -> str:
        """The WARC file prefix of this process (``skitter-p0`` ...)."""
        return f"skitter-p{self.index}"
