"""What the workers of a Redis crawl share besides the frontier: the ``--max-pages`` budget
(reserved per worker; a dead worker's reservations come back) and the ``--ip-concurrency``
slots per address. Keys (hash tag ``{CRAWL}``, one cluster slot):

* ``{CRAWL}:pages``   pages taken so far (recorded + reserved);
* ``{CRAWL}:resv``    hash: worker id -> pages it has reserved (leases in flight);
* ``{CRAWL}:workers`` sorted set: worker id -> last heartbeat (server seconds; written by
  :func:`skitter.distributed.heartbeat`);
* ``{CRAWL}:ip:ADDR`` sorted set: request slots held on ADDR -> expiry.

Every function runs one Lua script or command; Redis errors propagate (``redis.exceptions``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["acquire_ip", "confirm_page", "give_back_pages", "release_ip", "take_pages"]


def crawl_key(crawl_id: str, name: str) -> str:
    """``{CRAWL}:name``, a crawl-wide key."""
    return f"{{{crawl_id}}}:{name}"


_TAKE = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local dead = now - tonumber(ARGV[4])
local resv = redis.call('HGETALL', KEYS[2])
local outstanding = 0
for i = 1, #resv, 2 do
  local w, k = resv[i], tonumber(resv[i + 1])
  local beat = redis.call('ZSCORE', KEYS[3], w)
  if w ~= ARGV[3] and (not beat or tonumber(beat) < dead) then
    -- a worker silent past its leases' life: its reservations come back
    redis.call('HDEL', KEYS[2], w)
    local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
    redis.call('SET', KEYS[1], math.max(cur - k, 0))
  else
    outstanding = outstanding + k
  end
end
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


def _budget_keys(crawl_id: str) -> list[str]:
    return [crawl_key(crawl_id, k) for k in ("pages", "resv", "workers")]


async def take_pages(
    client: Any, crawl_id: str, max_pages: int, worker_id: int, dead_after_s: float, n: int = 1
) -> int:
    """Reserve up to ``n`` pages of the crawl-wide ``--max-pages`` budget for worker
    ``worker_id``: how many were reserved, or 0 when none is left now but some are reserved
    by workers (they may come back), or -1 when the budget is spent for good.

    The reservations of a worker whose heartbeat is older than ``dead_after_s`` seconds
    (server clock; its leases have expired: killed) are first returned to the budget.
    A reservation ends with :func:`confirm_page` (a 2xx page) or :func:`give_back_pages`.
    """
    script = client.register_script(_TAKE)
    got = await script(
        keys=_budget_keys(crawl_id), args=[max_pages, n, worker_id, repr(dead_after_s)]
    )
    return int(got)


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
