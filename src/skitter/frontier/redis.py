"""A :class:`~skitter.frontier.base.Frontier` kept in Redis, shared by many workers.

The crawl's keys are split into ``shards`` logical shards (``crc32(host) mod shards``);
every key of a shard carries the hash tag ``{CRAWL:s}``, so each per-host operation (add =
URL-seen test + enqueue, lease, renew, ack, retry with its not_before, delay) is ONE
atomic Lua script on one slot (:mod:`skitter.frontier.redis_lua` lists the keys). It runs
unchanged on one Redis or a Redis Cluster.

* **URL-seen** is exact by default: each URL's 64-bit fingerprint
  (:func:`skitter.urls.fingerprint`) is appended, as 8 bytes, to one of ``buckets`` strings
  of its shard (about 8-9 bytes per URL once buckets hold tens of entries; see bench/ for
  measured figures); or, opt-in, a Bloom filter per shard (:mod:`.redis_seen`).
* **Leases** carry a fencing token unique for the crawl's whole life (server ``TIME`` in
  microseconds, times 1024, plus the shard), and expire; an expired lease is handed out
  again and the late ack/retry/renew of the old one raises :class:`FrontierError`.
* **Time**: with ``clock=None`` times are the caller's (the contract suite's fake clock).
  With a ``clock`` (production), every stored time is on the Redis server's clock: each
  script converts the caller's times with ``skew = server TIME - clock()`` measured in that
  very call, so workers whose clocks disagree still agree on every host's not_before.
* **Outages**: a lost connection is retried with backoff (0.1 s doubling to 5 s) for up to
  ``redis_wait_s`` seconds, with a line through ``warn``; then :class:`FrontierError`.

Errors: :class:`FrontierError` for Redis failures and stale tokens; :class:`ValueError` for a
URL without a host.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import redis.exceptions as rexc

from skitter.errors import FrontierError
from skitter.frontier import redis_lua as lua
from skitter.frontier.base import AddResult, FrontierCounts, _HostKeys, forced_key
from skitter.frontier.redis_codec import _fp16, _pd, decode_member, encode_request
from skitter.frontier.redis_seen import DEFAULT_CAPACITY, SeenSpec
from skitter.models import Lease, Request
from skitter.urls import fingerprint, host_key

__all__ = ["RedisFrontier", "shard_prefix"]

T = TypeVar("T")

#: Token space per microsecond: the shard number lives in the low 10 bits.
MAX_SHARDS = 1024

#: Errors after which a call is tried again (the server is down, restarting or loading).
RETRYABLE = (rexc.ConnectionError, rexc.TimeoutError, rexc.BusyLoadingError, OSError)


def shard_prefix(crawl_id: str, shard: int) -> str:
    """``{CRAWL:s}:``, the prefix (and cluster hash tag) of every key of one shard."""
    return f"{{{crawl_id}:{shard}}}:"


class RedisFrontier:
    """The frontier of crawl ``crawl_id`` in Redis (see the module docstring).

    Use :meth:`open`. Args of :meth:`open`:
        client: a ``redis.asyncio.Redis`` or ``RedisCluster`` with ``decode_responses=True``.
        crawl_id: key prefix of the crawl (letters, digits, ``-_.``).
        host_concurrency: requests of one host leased at once (>= 1).
        lease_ttl_s: seconds a lease lasts unless renewed (> 0).
        shards: logical shards (1..1024); fixed at the crawl's creation (stored in Redis).
        buckets: URL-seen strings per shard (>= 1); fixed at creation too.
        seen_rate: None = exact URL-seen test; else a Bloom filter of that false-positive
            rate (:mod:`skitter.frontier.redis_seen`) sized for ``seen_capacity`` URLs;
            fixed at creation too (a joining worker gets the crawl's).
        clock: None = times are the caller's; else the caller's clock (seconds), and stored
            times are the Redis server's.
        redis_wait_s: seconds to keep retrying while Redis is unreachable.
        order: ``exact`` = lease the host that sorts first by (not_before, head depth, host)
            over every shard (one pipelined read of 2 x shards commands per lease);
            ``rotate`` = try the shards in turn, one script each, exact order within a
            shard (what workers use: one script per lease while work is plentiful).
        warn: receives one line when Redis becomes unreachable.
        own_client: close ``client`` in :meth:`aclose`.
    """

    def __init__(
        self,
        client: Any,
        crawl_id: str,
        *,
        host_concurrency: int,
        lease_ttl_s: float,
        shards: int,
        buckets: int,
        clock: Callable[[], float] | None,
        redis_wait_s: float,
        warn: Callable[[str], None] | None,
        own_client: bool,
        order: str = "exact",
    ) -> None:
        self._r = client
        self.crawl_id = crawl_id
        self.host_concurrency = host_concurrency
        self.lease_ttl_s = float(lease_ttl_s)
        self.shards = shards
        self.buckets = buckets
        self.seen = SeenSpec()
        self._clock = clock
        self._mode = "c" if clock is None else "s"
        self.redis_wait_s = redis_wait_s
        self._warn = warn
        self._own = own_client
        if order not in ("exact", "rotate"):
            raise ValueError(f"order must be exact or rotate, got {order!r}")
        self.order = order
        self._next_shard = zlib.crc32(str(id(self)).encode()) % shards
        self._closed = False
        self._skew = 0.0
        self._prefixes = [shard_prefix(crawl_id, s) for s in range(shards)]
        self._host_key = _HostKeys()
        names = "add lease reclaim ack release retry renew delay mark_done note_inlinks"
        self._scripts = {n: client.register_script(getattr(lua, n.upper())) for n in names.split()}

    @classmethod
    async def open(
        cls,
        client: Any,
        crawl_id: str,
        *,
        host_concurrency: int = 1,
        lease_ttl_s: float = 300.0,
        shards: int = 16,
        buckets: int = 1024,
        seen_rate: float | None = None,
        seen_capacity: int = DEFAULT_CAPACITY,
        clock: Callable[[], float] | None = None,
        redis_wait_s: float = 300.0,
        warn: Callable[[str], None] | None = None,
        own_client: bool = False,
        order: str = "exact",
    ) -> RedisFrontier:
        """Open (creating when new) the frontier of ``crawl_id``; see the class docstring.

        The shard and bucket counts and the URL-seen test of an existing crawl win over the
        arguments.

        Raises:
            ValueError: a bad argument.
            FrontierError: Redis failed or stayed unreachable ``redis_wait_s`` seconds.
        """
        if host_concurrency < 1:
            raise ValueError(f"host_concurrency must be >= 1, got {host_concurrency}")
        if not lease_ttl_s > 0:
            raise ValueError(f"lease_ttl_s must be > 0, got {lease_ttl_s}")
        if not 1 <= shards <= MAX_SHARDS or buckets < 1:
            raise ValueError(f"shards must be 1..{MAX_SHARDS} and buckets >= 1")
        spec = SeenSpec.for_rate(seen_rate, seen_capacity, shards)
        meta = f"{{{crawl_id}}}:frontier"
        f = cls(
            client,
            crawl_id,
            host_concurrency=host_concurrency,
            lease_ttl_s=lease_ttl_s,
            shards=shards,
            buckets=buckets,
            clock=clock,
            redis_wait_s=redis_wait_s,
            warn=warn,
            own_client=own_client,
            order=order,
        )

        async def layout() -> list[Any]:
            await client.hsetnx(meta, "shards", shards)
            await client.hsetnx(meta, "buckets", buckets)
            await client.hsetnx(meta, "seen", spec.encode())
            got: list[Any] = await client.hmget(meta, ["shards", "buckets", "seen"])
            return got

        got = await f.call(layout)
        if int(got[0]) != shards or int(got[1]) != buckets:
            f = cls(
                client,
                crawl_id,
                host_concurrency=host_concurrency,
                lease_ttl_s=lease_ttl_s,
                shards=int(got[0]),
                buckets=int(got[1]),
                clock=clock,
                redis_wait_s=redis_wait_s,
                warn=warn,
                own_client=own_client,
                order=order,
            )
        try:
            f.seen = SeenSpec.decode(got[2] or "exact")
        except ValueError as e:
            raise FrontierError(f"the crawl's URL-seen setting in Redis is damaged: {e}") from e
        if f.seen.bloom:  # allocated once, at full length (grown by SETBIT: over-allocated)
            presize = client.register_script(lua.BLOOM_PRESIZE)

            async def allocate() -> None:
                for sp in f._prefixes:
                    await presize(keys=[sp + "bloom"], args=[f.seen.bits - 1])

            await f.call(allocate)
        if clock is not None:
            await f._sync_skew()
        return f

    # -- plumbing -------------------------------------------------------------------------

    async def _sync_skew(self) -> None:
        sec, usec = await self.call(self._r.time)
        self._skew = sec + usec / 1e6 - self._now()

    def _now(self) -> float:
        return self._clock() if self._clock is not None else 0.0

    def _check_open(self) -> None:
        if self._closed:
            raise FrontierError("frontier is closed")

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn`` (one or more Redis calls), retrying while Redis is unreachable.

        Raises:
            FrontierError: Redis refused the password, answered an error, or stayed
                unreachable ``redis_wait_s`` seconds.
        """
        deadline: float | None = None
        pause = 0.1
        while True:
            try:
                return await fn()
            except rexc.AuthenticationError as e:
                raise FrontierError(f"Redis refused the password: {e}") from e
            except RETRYABLE as e:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # redis-py may turn a cancellation into a connection error: keep it one
                    raise asyncio.CancelledError from e
                t = time.monotonic()
                if deadline is None:
                    deadline = t + self.redis_wait_s
                    if self._warn is not None:
                        self._warn(
                            f"Redis unreachable ({e}); retrying for up to {self.redis_wait_s:g} s"
                        )
                if t >= deadline:
                    raise FrontierError(
                        f"Redis unreachable for {self.redis_wait_s:g} s: {e}"
                    ) from e
                await asyncio.sleep(min(pause, max(deadline - t, 0.0)))
                pause = min(pause * 2, 5.0)
            except rexc.RedisError as e:
                raise FrontierError(f"Redis error: {e}") from e

    async def _script(
        self, name: str, shard: int, args: Sequence[Any], *, repeat_flag: bool = False
    ) -> list[Any]:
        """Run script ``name`` on ``shard`` with ARGV = the shard args + ``args`` (+ ``0``
        on the first try, ``1`` on the next ones, with ``repeat_flag``)."""
        sp = self._prefixes[shard]
        script = self._scripts[name]
        tries = 0

        async def run() -> list[Any]:
            nonlocal tries
            full = [sp, self._mode, repr(self._now()), self.host_concurrency, *args]
            if repeat_flag:
                full.append("1" if tries else "0")
            tries += 1
            out: list[Any] = await script(keys=[sp + "n"], args=full)
            return out

        out = await self.call(run)
        if self._mode == "s":
            self._skew = float(out[0])
        return out

    def _shard(self, host: str) -> int:
        return zlib.crc32(host.encode("utf-8", "surrogatepass")) % self.shards

    def _split_token(self, lease: Lease) -> tuple[int, str]:
        shard = lease.token % MAX_SHARDS
        if shard >= self.shards or lease.token < 0:
            raise FrontierError(
                f"stale or unknown lease token {lease.token} for {lease.request.url}"
            )
        return shard, str(lease.token // MAX_SHARDS)

    def _stale(self, lease: Lease) -> FrontierError:
        return FrontierError(f"stale or unknown lease token {lease.token} for {lease.request.url}")

    # -- the Frontier protocol ------------------------------------------------------------

    async def add(self, requests: Sequence[Request], *, force: bool = False) -> AddResult:
        """See :meth:`skitter.frontier.base.Frontier.add` (one script per shard touched).

        Raises:
            ValueError: a request URL has no host; nothing of the batch is added.
            FrontierError: Redis failed.
        """
        self._check_open()
        per_shard: dict[int, list[Any]] = {}
        index: dict[int, list[int]] = {}
        for i, req in enumerate(requests):
            host = self._host_key(req.url)
            fp = fingerprint(req.url)
            s = self._shard(host)
            seen, bucket = self.seen.args(fp, self.buckets)
            per_shard.setdefault(s, []).extend(
                (
                    seen,
                    _fp16(fp),
                    bucket,
                    host,
                    _pd(req),
                    encode_request(req),
                    _fp16(forced_key(req)) if force else "",
                    req.requested_url if force else "",
                )
            )
            index.setdefault(s, []).append(i)
        added: list[str] = []
        for s, args in per_shard.items():
            out = await self._script("add", s, ["1" if force else "0", *args])
            for j in out[1:]:
                added.append(requests[index[s][int(j)]].url)
        return AddResult(len(added), len(requests) - len(added), frozenset(added))

    async def lease(self, now: float) -> Lease | None:
        """See :meth:`skitter.frontier.base.Frontier.lease`.

        Reads every shard's earliest ready host and lease expiry (one pipelined round
        trip), reclaims expired leases, then leases from the shard whose ready host sorts
        first by (not_before, head depth, host).
        """
        self._check_open()
        if self.order == "rotate":
            return await self._lease_rotating(now)

        async def peek() -> list[Any]:
            pipe = self._r.pipeline(transaction=False)
            for sp in self._prefixes:
                pipe.zrange(sp + "ready", 0, 0, withscores=True)
                pipe.zrange(sp + "leases", 0, 0, withscores=True)
            res: list[Any] = await pipe.execute()
            return res

        res = await self.call(peek)
        now_s = now + self._skew if self._mode == "s" else now
        heads: list[tuple[float, str, int]] = []
        for s in range(self.shards):
            ready, leases = res[2 * s], res[2 * s + 1]
            if leases and leases[0][1] < now_s:
                await self._script("reclaim", s, [repr(now)])
                ready = await self.call(self._head_reader(s))
            if ready and ready[0][1] <= now_s:
                heads.append((ready[0][1], ready[0][0], s))
        heads.sort()
        for _, _, s in heads:
            lease = await self._lease_shard(s, now)
            if lease is not None:
                return lease
        return None

    def _head_reader(self, s: int) -> Callable[[], Awaitable[Any]]:
        key = self._prefixes[s] + "ready"

        async def read() -> Any:
            return await self._r.zrange(key, 0, 0, withscores=True)

        return read

    async def _lease_shard(self, s: int, now: float) -> Lease | None:
        out = await self._script("lease", s, [repr(now), repr(self.lease_ttl_s)])
        if len(out) == 1:
            return None
        _, tok, host, member, exp = out
        request, attempts = decode_member(member)
        return Lease(request, host, int(tok) * MAX_SHARDS + s, float(exp), attempts)

    async def _lease_rotating(self, now: float) -> Lease | None:
        """One lease script per shard, starting after the shard that served last."""
        for i in range(self.shards):
            s = (self._next_shard + i) % self.shards
            lease = await self._lease_shard(s, now)
            if lease is not None:
                self._next_shard = (s + 1) % self.shards
                return lease
        return None

    async def ack(
        self,
        lease: Lease,
        *,
        not_before: float,
        status: int | None = None,
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> None:
        """See :meth:`skitter.frontier.base.Frontier.ack`. ``status``, ``etag`` and
        ``last_modified`` are not kept in Redis (pages.jsonl has them).

        Raises:
            FrontierError: stale or unknown token; Redis failed.
        """
        await self._ack(lease, not_before, "")

    async def ack_spending(
        self, lease: Lease, *, not_before: float, worker_id: int
    ) -> tuple[int, int]:
        """:meth:`ack` of a 2xx page that spends one page of worker ``worker_id``'s
        ``--max-pages`` reservation: the same script counts it in the shard's ``acks`` hash
        (the budget's outbox, see :mod:`skitter.frontier.redis_lua`). Returns (shard, the
        worker's count there) for :func:`skitter.redis_shares.spend_pages`.

        Raises:
            FrontierError: stale or unknown token; Redis failed.
        """
        return await self._ack(lease, not_before, str(worker_id))

    async def _ack(self, lease: Lease, not_before: float, spender: str) -> tuple[int, int]:
        self._check_open()
        s, tok = self._split_token(lease)
        args = [tok, lease.host, repr(not_before), spender]
        out = await self._script("ack", s, args, repeat_flag=True)
        if int(out[1]) == 0:
            raise self._stale(lease)
        return s, int(out[2])

    async def retry(self, lease: Lease, *, not_before: float, count_attempt: bool = True) -> None:
        """See :meth:`skitter.frontier.base.Frontier.retry`.

        Raises:
            FrontierError: stale or unknown token; Redis failed.
        """
        self._check_open()
        s, tok = self._split_token(lease)
        args = [tok, lease.host, repr(not_before), "1" if count_attempt else "0"]
        out = await self._script("retry", s, args, repeat_flag=True)
        if int(out[1]) == 0:
            raise self._stale(lease)

    async def release(self, lease: Lease, *, not_before: float) -> None:
        """See :meth:`Frontier.release` (FrontierError: stale token, Redis failed)."""
        s, tok = self._split_token(lease)
        if not int((await self._script("release", s, [tok, lease.host, repr(not_before)]))[1]):
            raise self._stale(lease)

    async def renew(self, lease: Lease, now: float) -> Lease:
        """See :meth:`skitter.frontier.base.Frontier.renew`.

        Raises:
            FrontierError: stale or unknown token; Redis failed.
        """
        self._check_open()
        s, tok = self._split_token(lease)
        out = await self._script("renew", s, [tok, lease.host, repr(now), repr(self.lease_ttl_s)])
        if not out[1]:
            raise self._stale(lease)
        return replace(lease, expires_at=float(out[1]))

    async def delay_host(self, host: str, not_before: float) -> None:
        """See :meth:`skitter.frontier.base.Frontier.delay_host`."""
        self._check_open()
        await self._script("delay", self._shard(host), [host, repr(not_before)])

    async def next_ready_at(self) -> float | None:
        """See :meth:`skitter.frontier.base.Frontier.next_ready_at` (caller's clock)."""
        self._check_open()

        async def peek() -> list[Any]:
            pipe = self._r.pipeline(transaction=False)
            for sp in self._prefixes:
                pipe.zrange(sp + "ready", 0, 0, withscores=True)
            res: list[Any] = await pipe.execute()
            return res

        heads = [r[0][1] for r in await self.call(peek) if r]
        if not heads:
            return None
        best = float(min(heads))
        return best - self._skew if self._mode == "s" else best

    async def _totals(self) -> tuple[int, int, int, int]:
        async def read() -> list[Any]:
            pipe = self._r.pipeline(transaction=False)
            for sp in self._prefixes:
                pipe.hmget(sp + "n", ["pending", "leased", "done"])
                pipe.scard(sp + "active")
            res: list[Any] = await pipe.execute()
            return res

        res = await self.call(read)
        pending = leased = done = hosts = 0
        for s in range(self.shards):
            p, le, d = (int(x or 0) for x in res[2 * s])
            pending, leased, done = pending + p, leased + le, done + d
            hosts += int(res[2 * s + 1])
        return pending, leased, done, hosts

    async def is_finished(self) -> bool:
        """See :meth:`skitter.frontier.base.Frontier.is_finished`.

        The shards are read one after another while other workers go on, so a URL added
        to an already-read shard by an ack of a not-yet-read one could be missed: the crawl
        counts as finished only when two consecutive scans find every shard empty with
        the same ``done`` total (nothing acked in between).
        """
        self._check_open()
        pending, leased, done, _ = await self._totals()
        if pending or leased:
            return False
        pending, leased, done2, _ = await self._totals()
        return pending == 0 and leased == 0 and done2 == done

    async def note_inlinks(self, links: Sequence[tuple[str, str]]) -> int:
        """See :meth:`skitter.frontier.base.Frontier.note_inlinks` (one script per shard).

        Cost: finding a pending URL reads its host's whole queue in Redis (O(queue)), so
        ``--order inlinks`` suits hosts of up to some thousands of queued URLs.
        """
        self._check_open()
        per_shard: dict[int, list[str]] = {}
        for target, source_host in links:
            try:
                host = self._host_key(target)
            except ValueError:
                continue  # not a URL the frontier could hold: unknown, ignored
            per_shard.setdefault(self._shard(host), []).extend(
                (_fp16(fingerprint(target)), host, source_host)
            )
        changed = 0
        for s, args in per_shard.items():
            out = await self._script("note_inlinks", s, args)
            changed += int(out[1])
        return changed

    async def mark_done(self, urls: Sequence[str]) -> None:
        """See :meth:`skitter.frontier.base.Frontier.mark_done`.

        Raises:
            ValueError: a URL has no host.
        """
        self._check_open()
        per_shard: dict[int, list[Any]] = {}
        seen: set[str] = set()
        for url in urls:
            if url in seen:
                continue
            seen.add(url)
            host = host_key(url)
            fp = fingerprint(url)
            seen_arg, bucket = self.seen.args(fp, self.buckets)
            per_shard.setdefault(self._shard(host), []).extend((seen_arg, _fp16(fp), bucket, host))
        for s, args in per_shard.items():
            await self._script("mark_done", s, args)

    async def counts(self) -> FrontierCounts:
        """See :meth:`skitter.frontier.base.Frontier.counts` (summed over shards)."""
        self._check_open()
        return FrontierCounts(*await self._totals())

    async def flush(self) -> None:
        """Nothing to do: each script's writes reach the AOF as the server's
        ``appendfsync`` says (``always``: before the reply)."""

    async def aclose(self) -> None:
        """Stop using the frontier (closing the client if it was handed over); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._own:
            await self._r.aclose()
