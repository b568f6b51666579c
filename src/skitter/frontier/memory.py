"""In-memory frontier: everything in Python structures, nothing survives the process.

For tests, small crawls and as the reference behaviour of the contract suite. Memory grows
with every URL ever seen (the seen set is exact: a dict keyed by fingerprint).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from skitter.frontier.base import (
    AddResult,
    Entry,
    FrontierCounts,
    _CoreFrontier,
    _Queue,
    forced_key,
)
from skitter.models import Lease, Request
from skitter.urls import fingerprint, host_key

__all__ = ["MemoryFrontier"]

_PENDING = 0  # pending or leased (leases live in the scheduler)
_DONE = 2


class _Row:
    __slots__ = ("attempts", "etag", "host", "last_modified", "request", "seq", "state", "status")

    def __init__(self, request: Request, host: str, state: int, seq: int) -> None:
        self.request = request
        self.host = host
        self.state = state
        self.seq = seq
        self.attempts = 0
        self.status: int | None = None
        self.etag: str | None = None
        self.last_modified: str | None = None

    def entry(self, fp: int) -> Entry:
        return (self.request.priority, self.request.depth, self.seq, fp)


class _HeapQueue:
    """A host's available entries: a binary heap with lazy removal."""

    __slots__ = ("heap", "removed")

    def __init__(self) -> None:
        self.heap: list[Entry] = []
        self.removed: set[Entry] = set()

    def head(self) -> Entry | None:
        heap, removed = self.heap, self.removed
        while heap and removed and heap[0] in removed:
            removed.discard(heapq.heappop(heap))
        return heap[0] if heap else None

    def pop(self) -> Entry:
        self.head()
        return heapq.heappop(self.heap)

    def push(self, entry: Entry) -> None:
        if entry in self.removed:  # its stale copy is still in the heap: revive it
            self.removed.discard(entry)
        else:
            heapq.heappush(self.heap, entry)

    def discard(self, entry: Entry) -> None:
        self.removed.add(entry)


class MemoryFrontier(_CoreFrontier):
    """A :class:`~skitter.frontier.base.Frontier` held entirely in memory.

    Args:
        host_concurrency: requests of one host leased at once (>= 1).
        lease_ttl_s: seconds a lease lasts before :meth:`lease` may hand it out again (> 0).

    Raises:
        ValueError: on a bad argument.
    """

    def __init__(self, host_concurrency: int = 1, lease_ttl_s: float = 300.0) -> None:
        super().__init__(host_concurrency, lease_ttl_s)
        self._rows: dict[int, _Row] = {}
        self._inlinks: dict[int, set[str]] = {}  # fp of a pending URL -> linking hosts
        self._seq = 0
        self._next_hid = 0

    # -- storage hooks ------------------------------------------------------------------

    def _make_queue(self, hid: int) -> _Queue:
        return _HeapQueue()

    def _new_hid(self, name: str, not_before: float) -> int:
        self._next_hid += 1
        return self._next_hid

    def _load(self, fp: int) -> tuple[Request, int]:
        row = self._rows[fp]
        return row.request, row.attempts

    def _store_done(
        self, fp: int, status: int | None, etag: str | None, last_modified: str | None
    ) -> None:
        row = self._rows[fp]
        row.state = _DONE
        self._inlinks.pop(fp, None)
        row.status, row.etag, row.last_modified = status, etag, last_modified

    def _store_attempts(self, fp: int, attempts: int) -> None:
        self._rows[fp].attempts = attempts

    # -- the Frontier protocol ----------------------------------------------------------

    def _enqueue_row(self, fp: int, row: _Row, touched: set[str]) -> None:
        h = self._host(row.host)
        self._enqueued(h, row.entry(fp))
        touched.add(row.host)

    async def add(self, requests: Sequence[Request], *, force: bool = False) -> AddResult:
        """See :meth:`skitter.frontier.base.Frontier.add`.

        Raises:
            ValueError: a request URL has no host; nothing after it is added.
        """
        self._check_open()
        rows = self._rows
        added: list[str] = []
        touched: set[str] = set()
        try:
            for req in requests:
                fp = fingerprint(req.url)
                old = rows.get(fp)
                if old is None:
                    self._seq += 1
                    row = _Row(req, self._host_key(req.url), _PENDING, self._seq)
                    rows[fp] = row
                    self._enqueue_row(fp, row, touched)
                    added.append(req.url)
                    continue
                if not force or (  # the same url + requested url already waits
                    old.state == _PENDING
                    and fp not in self._leased_fps
                    and old.request.requested_url == req.requested_url
                ):
                    continue
                ffp = forced_key(req)
                frow = rows.get(ffp)
                if frow is not None and frow.state == _PENDING:  # pending or leased
                    continue
                self._seq += 1
                if frow is None:
                    frow = rows[ffp] = _Row(req, old.host, _PENDING, self._seq)
                else:  # done: enqueue again with the new request
                    frow.request, frow.state, frow.seq, frow.attempts = (
                        req,
                        _PENDING,
                        self._seq,
                        0,
                    )
                    self._done -= 1
                self._enqueue_row(ffp, frow, touched)
                added.append(req.url)
        finally:
            for name in touched:
                self._touch(self._hosts[name])
        return AddResult(len(added), len(requests) - len(added), frozenset(added))

    async def lease(self, now: float) -> Lease | None:
        """See :meth:`skitter.frontier.base.Frontier.lease`."""
        return self._lease(now)

    async def ack(
        self,
        lease: Lease,
        *,
        not_before: float,
        status: int | None = None,
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> None:
        """See :meth:`skitter.frontier.base.Frontier.ack`."""
        self._ack(lease, not_before, status, etag, last_modified)

    async def retry(self, lease: Lease, *, not_before: float, count_attempt: bool = True) -> None:
        """See :meth:`skitter.frontier.base.Frontier.retry`."""
        self._retry(lease, not_before, count_attempt)

    async def renew(self, lease: Lease, now: float) -> Lease:
        """See :meth:`skitter.frontier.base.Frontier.renew`."""
        return self._renew(lease, now)

    async def delay_host(self, host: str, not_before: float) -> None:
        """See :meth:`skitter.frontier.base.Frontier.delay_host`."""
        self._delay_host(host, not_before)

    async def next_ready_at(self) -> float | None:
        """See :meth:`skitter.frontier.base.Frontier.next_ready_at`."""
        return self._next_ready_at()

    async def is_finished(self) -> bool:
        """See :meth:`skitter.frontier.base.Frontier.is_finished`."""
        return self._pending == 0 and not self._leases

    async def note_inlinks(self, links: Sequence[tuple[str, str]]) -> int:
        """See :meth:`skitter.frontier.base.Frontier.note_inlinks`."""
        self._check_open()
        changed = 0
        for url, source in links:
            fp = fingerprint(url)
            row = self._rows.get(fp)
            if (
                row is None
                or row.state != _PENDING
                or fp in self._leased_fps
                or row.host == source
                or row.request.url != url
            ):
                continue
            hosts = self._inlinks.setdefault(fp, set())
            if source in hosts:
                continue
            hosts.add(source)
            old = row.entry(fp)
            row.request = row.request._replace(priority=row.request.priority - 1)
            self._reprioritised(self._hosts[row.host], old, row.entry(fp))
            changed += 1
        return changed

    async def mark_done(self, urls: Sequence[str]) -> None:
        """See :meth:`skitter.frontier.base.Frontier.mark_done`.

        Raises:
            ValueError: an unknown URL has no host.
        """
        self._check_open()
        for url in urls:
            fp = fingerprint(url)
            row = self._rows.get(fp)
            if row is None:
                name = self._host(host_key(url)).name  # hosts are created as sqlite does
                self._seq += 1
                self._rows[fp] = _Row(Request(url), name, _DONE, self._seq)
                self._done += 1
            elif row.state == _PENDING:
                self._finish(self._hosts[row.host], row.entry(fp))
                row.state = _DONE
                self._inlinks.pop(fp, None)

    async def counts(self) -> FrontierCounts:
        """See :meth:`skitter.frontier.base.Frontier.counts`."""
        return self._counts()

    async def flush(self) -> None:
        """Nothing to do: a memory frontier is never durable."""

    async def aclose(self) -> None:
        """Drop the frontier's contents; later calls raise FrontierError."""
        self._closed = True
        self._rows.clear()
