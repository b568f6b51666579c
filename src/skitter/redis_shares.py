"""What the workers of a Redis crawl share besides the frontier: the ``--max-pages`` budget
(reserved per worker; a dead worker's reservations come back) and the ``--ip-concurrency``
slots per address. Keys (hash tag ``{CRAWL}``, one cluster slot):

* ``{CRAWL}:pages``   pages taken so far (recorded + reserved);
* ``{CRAWL}:resv``    hash: worker id -> pages it has reserved (leases in flight);
* ``{CRAWL}:workers`` sorted set: worker id -> last heartbeat (server seconds; written by
  :func:`skitter.distributed.heartbeat`);
* ``{CRAWL}:applied`` hash: ``WORKER:SHARD`` -> the count of the shard's ``acks`` hash
  (``{CRAWL:SHARD}:acks``: worker -> its 2xx acks, written by the ack's own script) already
  spent from ``resv``;
* ``{CRAWL}:ip:ADDR`` sorted set: request slots held on ADDR -> expiry.

Exact budget across kills: a 2xx ack counts itself in its shard (same script, same slot),
so a page acked is never lost between the ack and its spend. :func:`spend_pages` applies
the difference between that count and ``applied`` (a spend sent twice, or late, counts
once); a dead worker's reservations are returned by :func:`take_pages` only after its
counts in every shard are applied (acked-but-unspent pages stay counted).

Every function runs one Lua script or command; Redis errors propagate (``redis.exceptions``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "acquire_ip",
    "confirm_page",
    "give_back_pages",
    "release_ip",
    "spend_pages",
    "take_pages",
]


def crawl_key(crawl_id: str, name: str) -> str:
    """``{CRAWL}:name``, a crawl-wide key."""
    return f"{{{crawl_id}}}:{name}"


def acks_key(crawl_id: str, shard: int) -> str:
    """``{CRAWL:SHARD}:acks``, a shard's count of 2xx acks per worker (the ack script's)."""
    return f"{{{crawl_id}:{shard}}}:acks"


_TAKE = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local dead = now - tonumber(ARGV[4])
local resv = redis.call('HGETALL', KEYS[2])
local outstanding, gone = 0, {}
for i = 1, #resv, 2 do
  local w, k = resv[i], tonumber(resv[i + 1])
  local beat = redis.call('ZSCORE', KEYS[3], w)
  if w ~= ARGV[3] and (not beat or tonumber(beat) < dead) then
    gone[#gone + 1] = w  -- silent past its leases' life: settled first (settle_dead)
  else
    outstanding = outstanding + k
  end
end
if #gone > 0 then return gone end
local max = tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = math.min(tonumber(ARGV[2]), max - cur)
if n <= 0 then
  if outstanding > 0 then return 0 end
  return -1
end
redis.call('INCRBY', KEYS[1], n)
redis.call('HINCRBY', KEYS[2], ARGV[3], n)
return n
"""

# apply(w, shard, n): spend the pages of w's count n in shard not yet applied (once each);
# returns how many of them found no reservation of w left (returned as a dead worker's:
# they are counted again). KEYS: pages, resv, workers, applied.
_APPLY = r"""
local function apply(w, shard, n)
  local f = w .. ':' .. shard
  local seen = tonumber(redis.call('HGET', KEYS[4], f) or '0')
  if n <= seen then return 0 end
  redis.call('HSET', KEYS[4], f, n)
  local d = n - seen
  local r = tonumber(redis.call('HGET', KEYS[2], w) or '0')
  local take = math.min(r, d)
  if take >= r then redis.call('HDEL', KEYS[2], w)
  else redis.call('HINCRBY', KEYS[2], w, -take) end
  if d > take then redis.call('INCRBY', KEYS[1], d - take) end
  return d - take
end
"""

_SPEND = (
    _APPLY
    + r"""
return apply(ARGV[1], ARGV[2], tonumber(ARGV[3]))
"""
)

_SETTLE_DEAD = (
    _APPLY
    + r"""
local t = redis.call('TIME')
local beat = redis.call('ZSCORE', KEYS[3], ARGV[1])
if beat and tonumber(beat) >= tonumber(t[1]) - tonumber(ARGV[2]) then return 0 end
for i = 3, #ARGV, 2 do apply(ARGV[1], ARGV[i], tonumber(ARGV[i + 1])) end
local r = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
redis.call('HDEL', KEYS[2], ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
redis.call('SET', KEYS[1], math.max(cur - r, 0))
return r
"""
)


def _budget_keys(crawl_id: str) -> list[str]:
    return [crawl_key(crawl_id, k) for k in ("pages", "resv", "workers", "applied")]


async def take_pages(
    client: Any,
    crawl_id: str,
    max_pages: int,
    worker_id: int,
    dead_after_s: float,
    n: int = 1,
    shards: int = 1,
) -> int:
    """Reserve up to ``n`` pages of the crawl-wide ``--max-pages`` budget for worker
    ``worker_id``: how many were reserved, or 0 when none is left now but some are reserved
    by workers (they may come back), or -1 when the budget is spent for good.

    The reservations of a worker whose heartbeat is older than ``dead_after_s`` seconds
    (server clock; its leases have expired: killed) are first settled by
    :func:`settle_dead` over the crawl's ``shards`` shards (its acked pages stay spent, the
    rest comes back). A reservation ends with :func:`spend_pages` (a 2xx page acked) or
    :func:`give_back_pages`.
    """
    script = client.register_script(_TAKE)
    args = [max_pages, n, worker_id, repr(dead_after_s)]
    for _ in range(4):  # each round settles every dead worker seen; a 4th is very unlikely
        got = await script(keys=_budget_keys(crawl_id), args=args)
        if not isinstance(got, list):
            return int(got)
        for w in got:
            await settle_dead(client, crawl_id, int(w), dead_after_s, shards)
    return 0  # workers keep dying under us: none reserved now (the caller polls again)


async def settle_dead(
    client: Any, crawl_id: str, worker_id: int, dead_after_s: float, shards: int
) -> int:
    """Settle the reservations of worker ``worker_id``, silent for ``dead_after_s``
    seconds: its 2xx acks counted in each of the ``shards`` shards and not yet spent are
    spent (idempotently), then its other reservations return to the budget. How many
    returned (0 as well when the worker beat again meanwhile: nothing is done).

    One read per shard, then one script on the budget's slot (Redis Cluster: no script
    touches two slots); a settle cut short by a kill is simply done again."""
    pipe = client.pipeline(transaction=False)
    for s in range(shards):
        pipe.hget(acks_key(crawl_id, s), str(worker_id))
    counts = await pipe.execute()
    args: list[Any] = [worker_id, repr(dead_after_s)]
    for s, c in enumerate(counts):
        if c is not None:
            args += [s, int(c)]
    script = client.register_script(_SETTLE_DEAD)
    return int(await script(keys=_budget_keys(crawl_id), args=args))


async def spend_pages(client: Any, crawl_id: str, worker_id: int, shard: int, count: int) -> None:
    """Spend the pages of worker ``worker_id`` acked (2xx) in ``shard`` up to its count
    ``count`` there (:meth:`RedisFrontier.ack_spending`), each from its reservation, once:
    a spend sent twice, late, or already applied by :func:`settle_dead` changes nothing.
    A page whose reservation was returned (the worker was thought dead) is counted again."""
    script = client.register_script(_SPEND)
    await script(keys=_budget_keys(crawl_id), args=[worker_id, shard, count])


_SETTLE = r"""
local r = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if r > 0 then
  if r == 1 then redis.call('HDEL', KEYS[2], ARGV[1])
  else redis.call('HINCRBY', KEYS[2], ARGV[1], -1) end
  if ARGV[2] == 'back' then
    local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
    if cur > 0 then redis.call('DECR', KEYS[1]) end
  end
elseif ARGV[2] == 'page' then
  redis.call('INCR', KEYS[1])  -- its reservation was returned (thought dead): count it
end
return 0
"""


async def give_back_pages(client: Any, crawl_id: str, worker_id: int) -> None:
    """Return one page reserved by ``worker_id`` to the budget (never below 0; nothing if
    its reservations were already returned as those of a dead worker)."""
    script = client.register_script(_SETTLE)
    await script(keys=_budget_keys(crawl_id), args=[worker_id, "back"])


async def confirm_page(client: Any, crawl_id: str, worker_id: int) -> None:
    """A page reserved by ``worker_id`` was recorded (2xx): its reservation is spent. A
    worker thought dead (frozen) whose reservations were returned counts it again."""
    script = client.register_script(_SETTLE)
    await script(keys=_budget_keys(crawl_id), args=[worker_id, "page"])


_ACQUIRE_IP = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%.17g', now))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], string.format('%.17g', now + tonumber(ARGV[2])), ARGV[3])
return 1
"""


async def acquire_ip(
    client: Any, crawl_id: str, addr: str, limit: int, holder: str, ttl_s: float
) -> bool:
    """Take one of ``limit`` crawl-wide request slots on address ``addr`` for ``holder``
    (unique per request); a slot not released is freed ``ttl_s`` seconds later (a dead
    worker's slots come back). False when all are held."""
    script = client.register_script(_ACQUIRE_IP)
    got = await script(keys=[crawl_key(crawl_id, f"ip:{addr}")], args=[limit, ttl_s, holder])
    return int(got) == 1


async def release_ip(client: Any, crawl_id: str, addr: str, holder: str) -> None:
    """Give back ``holder``'s slot on ``addr``."""
    await client.zrem(crawl_key(crawl_id, f"ip:{addr}"), holder)
