"""The frontier port: where requests wait until their host may be fetched again.

:class:`Frontier` is the protocol every backend implements (memory, sqlite); one contract
suite (``tests/contract/test_frontier_contract.py``) runs over all of them.

Vocabulary:

* **seen**: a canonical URL whose fingerprint (:func:`skitter.urls.fingerprint`) has ever
  been added (or marked done). A seen URL is never enqueued again unless ``force=True``.
* **pending**: enqueued and waiting to be leased. **leased**: handed out, being fetched.
  **done**: acked (or marked done); kept for URL-seen and recrawl metadata.
* **host**: :func:`skitter.urls.host_key` of the URL; the politeness unit. A host is
  *ready* at ``now`` when ``not_before <= now`` and fewer than ``host_concurrency`` of its
  requests are leased.

All times are plain floats in seconds on the caller's clock (the same clock for every call);
the frontier never reads a clock itself.

This module also holds :class:`_CoreFrontier`, the scheduling machinery (hosts, ready heap,
leases, fencing tokens, expiry) shared by the in-process backends; backends supply storage.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from skitter.errors import FrontierError
from skitter.models import Lease, Request
from skitter.urls import fingerprint, host_key

__all__ = ["AddResult", "Frontier", "FrontierCounts"]


@dataclass(frozen=True, slots=True)
class AddResult:
    """What :meth:`Frontier.add` did with a batch.

    Attributes:
        added: requests enqueued (``added + duplicates == len(requests)``).
        duplicates: requests dropped because their URL was already seen (or, with
            ``force=True``, because the same url+origin is already pending or leased), or
            repeated within the batch.
        added_urls: the canonical URLs actually enqueued (never seen before, or re-enqueued
            by ``force=True``).
    """

    added: int
    duplicates: int
    added_urls: frozenset[str]


@dataclass(frozen=True, slots=True)
class FrontierCounts:
    """A snapshot of the frontier's size.

    Attributes:
        pending: requests waiting to be leased (not counting leased ones).
        leased: requests currently leased (including expired leases not yet reclaimed).
        done: requests acked or marked done (URLs kept for URL-seen).
        hosts: hosts with pending or leased work.
    """

    pending: int
    leased: int
    done: int
    hosts: int


@runtime_checkable
class Frontier(Protocol):
    """Queue of requests with URL-seen deduplication, per-host politeness and leases.

    Delivery is at-least-once: a request leaves the frontier only when its lease is acked;
    an expired lease is handed out again. Fencing tokens make a late ack/retry of a lease
    that has been handed out again fail loudly instead of corrupting state.
    """

    async def add(self, requests: Sequence[Request], *, force: bool = False) -> AddResult:
        """Enqueue every request whose URL was never seen; count the rest as duplicates.

        Idempotent: adding the same batch twice enqueues nothing the second time.
        ``force=True`` enqueues even a seen URL (a redirect continuation that loops back
        through a cookie), unless an entry with the same url and
        :attr:`Request.requested_url` is already pending (a leased plain entry does not
        block it; a forced entry that is leased does). All :class:`Request` fields
        round-trip exactly.

        Raises:
            ValueError: a request URL has no host (see :func:`skitter.urls.host_key`).
            FrontierError: the backend failed.
        """
        ...

    async def lease(self, now: float) -> Lease | None:
        """Hand out one pending request of a ready host, or None if nothing is ready at ``now``.

        Within a host: lowest ``(priority, depth)``, then first-in first-out. Across ready
        hosts: the host ready longest (smallest ``not_before``), ties by lower head depth.
        Leases expired at ``now`` (``now > expires_at``) are reclaimed first. The lease
        expires at ``now + lease_ttl_s``; ``attempts`` is the number of retries recorded.
        None means "nothing right now", not "finished" (see :meth:`is_finished`).
        """
        ...

    async def ack(
        self,
        lease: Lease,
        *,
        not_before: float,
        status: int | None = None,
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> None:
        """Mark the leased request done; its host is ready again at ``not_before`` (seconds).

        ``status``/``etag``/``last_modified`` are kept for recrawls (None = unknown).
        The host's ``not_before`` only moves forward (``max(current, not_before)``).

        Raises:
            FrontierError: the lease's token is stale (reclaimed, acked, retried) or unknown.
        """
        ...

    async def retry(self, lease: Lease, *, not_before: float, count_attempt: bool = True) -> None:
        """Put the leased request back as pending with ``attempts + 1``.

        The whole host waits until ``not_before`` (a Retry-After applies to the host).
        ``count_attempt=False`` reschedules without counting an attempt (nothing was sent
        for this URL, e.g. the host's politeness gap after its robots.txt fetch).

        Raises:
            FrontierError: stale or unknown token.
        """
        ...

    async def release(self, lease: Lease, *, not_before: float) -> None:
        """The lease's request to its host has ended (its response is read): the host may be
        leased again from ``not_before`` (seconds; only moves forward) while the lease stays
        outstanding until its ack (the page is still being processed). A host thus has at
        most ``host_concurrency`` requests *being fetched*; an ack or retry after a release
        frees no second slot; an expired released lease is reclaimed as usual. A backend
        may keep the host held until the ack instead (correct, without the overlap).

        Raises:
            FrontierError: stale or unknown token.
        """
        ...

    async def renew(self, lease: Lease, now: float) -> Lease:
        """Extend a lease: the returned lease (same token) expires at ``now + lease_ttl_s``.

        Raises:
            FrontierError: stale or unknown token.
        """
        ...

    async def delay_host(self, host: str, not_before: float) -> None:
        """Make ``host`` (a host key) wait until at least ``not_before`` (seconds)."""
        ...

    async def next_ready_at(self) -> float | None:
        """Earliest time some pending request could be leased; None if nothing is pending.

        Hosts at their concurrency limit do not count; the value may be in the past.
        Expiry of outstanding leases is not taken into account.
        """
        ...

    async def is_finished(self) -> bool:
        """True when nothing is pending and nothing is leased."""
        ...

    async def note_inlinks(self, links: Sequence[tuple[str, str]]) -> int:
        """In-link ranking (``--order inlinks``): raise the priority of linked pending URLs.

        ``links`` holds ``(target, source_host)`` pairs: a canonical target URL and the host
        key (:func:`skitter.urls.host_key`) of a page linking to it. For each pair whose
        target is pending (not leased, not done; its plain entry, not a ``force=True`` one),
        whose ``source_host`` differs from the target's host key, and which this source host
        has not linked to before: the target's ``priority`` goes down by 1, so within its
        host it is leased before URLs linked from fewer distinct other hosts (lease order
        stays lowest ``(priority, depth)``, then FIFO). Pairs for unknown, leased or done
        URLs are ignored (and not remembered). Repeating a pair changes nothing. The new
        priority is durable like an ``add`` and is the one the lease's request carries.

        Returns:
            The number of priority changes made.

        Raises:
            FrontierError: the backend failed.
        """
        ...

    async def mark_done(self, urls: Sequence[str]) -> None:
        """Resume reconciliation: record these canonical URLs as done.

        A pending URL becomes done; a leased one becomes done and its lease is revoked
        (acking it later raises FrontierError); an unknown one is inserted as done (so it
        counts as seen); a done one is left alone.
        """
        ...

    async def counts(self) -> FrontierCounts:
        """Current pending / leased / done / active-host counts."""
        ...

    async def flush(self) -> None:
        """Make every operation so far durable (see the backend for what that means)."""
        ...

    async def aclose(self) -> None:
        """Flush and release resources; the frontier must not be used afterwards."""
        ...


# ----------------------------------------------------------------------------------------
# Shared scheduling machinery for in-process backends (private).
# ----------------------------------------------------------------------------------------

#: (priority, depth, seq, fp): a pending request's position in its host's queue.
Entry = tuple[int, int, int, int]


def forced_key(request: Request) -> int:
    """Storage key of a ``force=True`` entry: one per (url, requested_url) pair.

    Distinct from ``fingerprint(url)`` (the URL-seen key), so a forced re-enqueue never
    disturbs the URL's own entry.
    """
    return fingerprint(f"{request.url} {request.requested_url}")


#: Initial ``not_before`` of a host never fetched (any clock at or after 0 finds it ready).
_NEVER = 0.0


class _Queue(Protocol):
    """The available (pending, not leased) entries of one host, smallest first."""

    def head(self) -> Entry | None:
        """The smallest entry, or None if the host has none available."""
        ...

    def pop(self) -> Entry:
        """Remove and return the smallest entry (only after ``head()`` returned one)."""
        ...

    def push(self, entry: Entry) -> None:
        """An entry becomes available (new, retried or reclaimed)."""
        ...

    def discard(self, entry: Entry) -> None:
        """An available entry is no longer available (marked done)."""
        ...


class _Host:
    """In-memory state of one host."""

    __slots__ = (
        "heap_key",
        "hid",
        "inflight",
        "name",
        "not_before",
        "pending",
        "queue",
        "version",
    )

    def __init__(self, name: str, hid: int, not_before: float, queue: _Queue) -> None:
        self.name = name
        self.hid = hid  # creation order; sqlite: hosts.id
        self.not_before = not_before
        self.inflight = 0
        self.pending = 0  # available entries (pending, not leased)
        self.queue = queue
        self.version = 0
        self.heap_key: tuple[float, int] | None = None  # key of the valid ready-heap entry


class _LeaseRec:
    """An outstanding lease (``released``: its fetch ended, its host slot is free)."""

    __slots__ = ("attempts", "entry", "expires_at", "host", "released")

    def __init__(self, entry: Entry, host: _Host, expires_at: float, attempts: int) -> None:
        self.entry = entry
        self.host = host
        self.expires_at = expires_at
        self.attempts = attempts
        self.released = False


class _HostKeys:
    """:func:`skitter.urls.host_key` memoised on the URL's ``scheme://authority/`` prefix.

    The authority ends at the first ``/`` after ``//`` at the latest, so every URL sharing
    that prefix has the same host key. Bounded: the memo is cleared past ``limit`` entries.
    """

    __slots__ = ("_memo", "limit")

    def __init__(self, limit: int = 100_000) -> None:
        self._memo: dict[str, str] = {}
        self.limit = limit

    def __call__(self, url: str) -> str:
        start = url.find("//")
        end = url.find("/", start + 2) if start >= 0 else -1
        if end < 0:
            return host_key(url)
        prefix = url[: end + 1]
        key = self._memo.get(prefix)
        if key is None:
            key = host_key(url)
            if len(self._memo) >= self.limit:
                self._memo.clear()
            self._memo[prefix] = key
        return key


class _CoreFrontier:
    """Hosts, the ready heap, leases and their expiry; storage is left to subclasses.

    Subclasses implement ``_make_queue``, ``_new_hid``, ``_load``, ``_store_done``,
    ``_store_attempts``, ``_host_changed`` and the storage side of ``add``/``mark_done``.
    """

    def __init__(self, host_concurrency: int, lease_ttl_s: float) -> None:
        if host_concurrency < 1:
            raise ValueError(f"host_concurrency must be >= 1, got {host_concurrency}")
        if not lease_ttl_s > 0:
            raise ValueError(f"lease_ttl_s must be > 0, got {lease_ttl_s}")
        self.host_concurrency = host_concurrency
        self.lease_ttl_s = float(lease_ttl_s)
        self._hosts: dict[str, _Host] = {}
        # (not_before, head depth, host id, version, host name); stale entries skipped.
        self._ready: list[tuple[float, int, int, int, str]] = []
        self._leases: dict[int, _LeaseRec] = {}
        self._leased_fps: dict[int, int] = {}  # fp -> token
        self._expiry: list[tuple[float, int]] = []  # (expires_at, token); stale skipped
        self._next_token = 1
        self._pending = 0
        self._done = 0
        self._closed = False
        self._host_key = _HostKeys()

    # -- hooks ------------------------------------------------------------------------

    def _make_queue(self, hid: int) -> _Queue:
        raise NotImplementedError

    def _new_hid(self, name: str, not_before: float) -> int:
        """Allocate (and persist) an id for a new host."""
        raise NotImplementedError

    def _load(self, fp: int) -> tuple[Request, int]:
        """The stored request with fingerprint key ``fp`` and its recorded attempts."""
        raise NotImplementedError

    def _store_done(
        self, fp: int, status: int | None, etag: str | None, last_modified: str | None
    ) -> None:
        raise NotImplementedError

    def _store_attempts(self, fp: int, attempts: int) -> None:
        raise NotImplementedError

    def _host_changed(self, host: _Host) -> None:
        """``host.not_before`` changed (persist it)."""

    # -- hosts and the ready heap -------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise FrontierError("frontier is closed")

    def _host(self, name: str) -> _Host:
        h = self._hosts.get(name)
        if h is None:
            hid = self._new_hid(name, _NEVER)
            h = _Host(name, hid, _NEVER, self._make_queue(hid))
            self._hosts[name] = h
        return h

    def _touch(self, h: _Host) -> None:
        """Re-file ``h`` in the ready heap after its head, not_before or in-flight changed."""
        key: tuple[float, int] | None = None
        if h.pending > 0 and h.inflight < self.host_concurrency:
            head = h.queue.head()
            if head is not None:
                key = (h.not_before, head[1])
        if key == h.heap_key:
            return
        h.version += 1
        h.heap_key = key
        if key is not None:
            heapq.heappush(self._ready, (key[0], key[1], h.hid, h.version, h.name))
            if len(self._ready) > 4 * len(self._hosts) + 1024:
                self._rebuild_ready()

    def _rebuild_ready(self) -> None:
        self._ready = [
            (h.heap_key[0], h.heap_key[1], h.hid, h.version, h.name)
            for h in self._hosts.values()
            if h.heap_key is not None
        ]
        heapq.heapify(self._ready)

    def _top(self) -> tuple[float, _Host] | None:
        """The valid top of the ready heap (stale entries dropped), without popping it."""
        ready = self._ready
        while ready:
            nb, _, _, version, name = ready[0]
            h = self._hosts[name]
            if version == h.version:
                return nb, h
            heapq.heappop(ready)
        return None

    # -- leases ---------------------------------------------------------------------------

    def _reclaim(self, now: float) -> None:
        """Return every lease expired at ``now`` to its host's queue."""
        exp = self._expiry
        while exp and exp[0][0] < now:
            expires_at, token = heapq.heappop(exp)
            rec = self._leases.get(token)
            if rec is None or rec.expires_at != expires_at:
                continue
            self._release(token, rec)
            h = rec.host
            h.queue.push(rec.entry)
            h.pending += 1
            self._pending += 1
            self._touch(h)

    def _push_expiry(self, expires_at: float, token: int) -> None:
        exp = self._expiry
        heapq.heappush(exp, (expires_at, token))
        if len(exp) > 2 * len(self._leases) + 1024:  # mostly acked/renewed leases: drop them
            self._expiry = [(r.expires_at, t) for t, r in self._leases.items()]
            heapq.heapify(self._expiry)

    def _release(self, token: int, rec: _LeaseRec) -> None:
        del self._leases[token]
        del self._leased_fps[rec.entry[3]]
        if not rec.released:
            rec.host.inflight -= 1

    def _lease(self, now: float) -> Lease | None:
        self._check_open()
        self._reclaim(now)
        top = self._top()
        if top is None or top[0] > now:
            return None
        heapq.heappop(self._ready)
        h = top[1]
        h.heap_key = None
        if h.queue.head() is None:
            raise FrontierError(f"host {h.name} is ready but has no pending entry")
        entry = h.queue.pop()
        h.pending -= 1
        self._pending -= 1
        h.inflight += 1
        token = self._next_token
        self._next_token += 1
        expires_at = now + self.lease_ttl_s
        request, attempts = self._load(entry[3])
        self._leases[token] = _LeaseRec(entry, h, expires_at, attempts)
        self._leased_fps[entry[3]] = token
        self._push_expiry(expires_at, token)
        self._touch(h)
        return Lease(request, h.name, token, expires_at, attempts)

    def _rec(self, lease: Lease) -> _LeaseRec:
        rec = self._leases.get(lease.token)
        if rec is None or rec.host.name != lease.host:
            raise FrontierError(
                f"stale or unknown lease token {lease.token} for {lease.request.url}"
            )
        return rec

    def _delay(self, h: _Host, not_before: float) -> None:
        if not_before > h.not_before:
            h.not_before = not_before
            self._host_changed(h)

    def _ack(
        self,
        lease: Lease,
        not_before: float,
        status: int | None,
        etag: str | None,
        last_modified: str | None,
    ) -> None:
        self._check_open()
        rec = self._rec(lease)
        self._release(lease.token, rec)
        self._store_done(rec.entry[3], status, etag, last_modified)
        self._done += 1
        self._delay(rec.host, not_before)
        self._touch(rec.host)

    def _retry(self, lease: Lease, not_before: float, count_attempt: bool = True) -> None:
        self._check_open()
        rec = self._rec(lease)
        self._release(lease.token, rec)
        if count_attempt:
            self._store_attempts(rec.entry[3], rec.attempts + 1)
        h = rec.host
        h.queue.push(rec.entry)
        h.pending += 1
        self._pending += 1
        self._delay(h, not_before)
        self._touch(h)

    async def release(self, lease: Lease, *, not_before: float) -> None:
        """See :meth:`Frontier.release` (the host's slot is freed in memory; the lease stays).

        Raises:
            FrontierError: stale or unknown token.
        """
        self._check_open()
        rec = self._rec(lease)
        if rec.released:
            return
        rec.released = True
        rec.host.inflight -= 1
        self._delay(rec.host, not_before)
        self._touch(rec.host)

    def _renew(self, lease: Lease, now: float) -> Lease:
        self._check_open()
        rec = self._rec(lease)
        rec.expires_at = now + self.lease_ttl_s
        self._push_expiry(rec.expires_at, lease.token)
        return replace(lease, expires_at=rec.expires_at)

    def _delay_host(self, name: str, not_before: float) -> None:
        self._check_open()
        h = self._host(name)
        self._delay(h, not_before)
        self._touch(h)

    def _next_ready_at(self) -> float | None:
        self._check_open()
        top = self._top()
        return None if top is None else top[0]

    def _counts(self) -> FrontierCounts:
        active = sum(1 for h in self._hosts.values() if h.pending or h.inflight)
        return FrontierCounts(self._pending, len(self._leases), self._done, active)

    def _reprioritised(self, h: _Host, old: Entry, new: Entry) -> None:
        """An available entry of ``h`` moved from ``old`` to ``new`` in the host's order."""
        h.queue.discard(old)
        h.queue.push(new)
        self._touch(h)

    def _enqueued(self, h: _Host, entry: Entry) -> None:
        """A stored entry became pending (new or re-enqueued); caller touches ``h``."""
        h.queue.push(entry)
        h.pending += 1
        self._pending += 1

    def _finish(self, h: _Host, entry: Entry) -> None:
        """Make the entry of a pending or leased URL done in memory (caller stores it)."""
        fp = entry[3]
        token = self._leased_fps.get(fp)
        if token is not None:
            self._release(token, self._leases[token])
        else:
            h.queue.discard(entry)
            h.pending -= 1
            self._pending -= 1
        self._done += 1
        self._touch(h)
