"""A crawl kept in Redis: connecting, the crawl's record, workers, shared budgets, control.

The frontier itself is :class:`skitter.frontier.redis.RedisFrontier`; this module owns what
the workers of one crawl share besides it, under keys with the hash tag ``{CRAWL}`` (the page
budget and the IP slots live in :mod:`skitter.redis_shares`, re-exported here):

* ``{CRAWL}:meta``     hash: ``state`` (running | paused | stopped), ``created`` (server
  seconds), ``settings`` (JSON of :func:`skitter.state.settings_to_dict`), ``epoch``
  (incremented by every crawl start or resume).
* ``{CRAWL}:frontier`` hash: the frontier's shard and bucket counts.
* ``{CRAWL}:wid``      counter of worker ids; ``{CRAWL}:workers`` sorted set: worker id ->
  last heartbeat (server seconds).
* ``{CRAWL}:pages``    the ``--max-pages`` budget taken so far (pages recorded + reserved);
  ``{CRAWL}:resv`` hash: worker id -> pages it has reserved (leases in flight), returned
  when its heartbeat stops (:func:`take_pages`).
* ``{CRAWL}:ip:ADDR``  sorted set: ``--ip-concurrency`` tokens held on ADDR -> expiry.
* ``{CRAWL}:robots:ORIGIN`` string: a robots.txt body shared by the workers, with its TTL.

URLs: ``redis://[:PASSWORD@]HOST:PORT/DB``, ``rediss://`` (TLS), and
``redis+cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...]`` (Redis Cluster).

Errors: :class:`ConfigError` (bad URL, refused password, unusable server: one line, exit 2);
:class:`FrontierError` (Redis failed while working).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import redis.asyncio as aioredis
import redis.exceptions as rexc
from redis.asyncio.cluster import ClusterNode, RedisCluster

from skitter.errors import ConfigError, FrontierError
from skitter.frontier.redis import RedisFrontier, shard_prefix
from skitter.frontier.redis_lua import RATE_BUCKET_S, RATE_BUCKETS
from skitter.models import Response
from skitter.redis_shares import (
    acquire_ip,
    confirm_page,
    crawl_key,
    give_back_pages,
    release_ip,
    settle_dead,
    spend_pages,
    take_pages,
)
from skitter.settings import REDACTED, is_redis_url

__all__ = [
    "STATES",
    "CrawlStatus",
    "acquire_ip",
    "check_crawl_id",
    "confirm_page",
    "connect",
    "crawl_key",
    "crawl_state",
    "create_crawl",
    "delete_crawl",
    "give_back_pages",
    "heartbeat",
    "is_redis_url",
    "load_crawl",
    "open_frontier",
    "read_status",
    "recent_rate",
    "release_ip",
    "set_state",
    "settle_dead",
    "shared_robots_fetch",
    "spend_pages",
    "take_pages",
]

log = logging.getLogger("skitter")

#: Crawl states an operator sets with ``skitter control``.
STATES = ("running", "paused", "stopped")

_CRAWL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_crawl_id(crawl_id: str) -> str:
    """Return ``crawl_id`` if it is 1-64 letters, digits, ``_.-`` (not first).

    Raises:
        ConfigError: otherwise.
    """
    if not _CRAWL_ID.match(crawl_id):
        raise ConfigError(f"--crawl-id {crawl_id!r}: use 1-64 letters, digits, '_', '.' or '-'")
    return crawl_id


def _where(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, _, rest = url.partition("://")
    netloc, _, path = rest.partition("/")
    return f"{scheme}://{netloc.rpartition('@')[2]}{'/' + path if path else ''}"


def _check_not_redacted(password: str | None) -> None:
    if password == REDACTED:
        raise ValueError(
            "the password is not kept in the crawl folder: give the URL with its password "
            "(skitter crawl --resume ... --frontier redis://:PASSWORD@HOST:PORT/DB)"
        )


def _client(url: str) -> Any:
    """A client for ``url`` (not yet connected). Raises ConfigError on a bad URL."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme in ("redis", "rediss"):
            if not parts.hostname:
                raise ValueError("no host")
            _check_not_redacted(parts.password)
            _ = parts.port  # raises ValueError on a bad port
            db = parts.path.strip("/") or "0"
            if not db.isdigit():
                raise ValueError(f"database {db!r} is not a number")
            return aioredis.Redis.from_url(
                url, decode_responses=True, socket_connect_timeout=5, socket_timeout=30
            )
        if scheme == "redis+cluster":
            nodes = []
            for part in parts.netloc.rsplit("@", 1)[-1].split(","):
                host, _, port = part.rpartition(":")
                if not host or not port.isdigit():
                    raise ValueError(f"bad node {part!r} (want HOST:PORT)")
                nodes.append(ClusterNode(host.strip("[]"), int(port)))
            _check_not_redacted(parts.password)
            password = unquote(parts.password) if parts.password else None
            return RedisCluster(
                startup_nodes=nodes,
                password=password,
                decode_responses=True,
                socket_connect_timeout=5,
                socket_timeout=30,
            )
    except ValueError as e:
        raise ConfigError(f"bad Redis URL {_where(url)!r}: {e}") from None
    raise ConfigError(
        f"bad Redis URL {url.split('://')[0]}://...: use redis://, rediss:// or redis+cluster://"
    )


async def connect(url: str, *, warn: Callable[[str], None] | None = None) -> Any:
    """Connect to the Redis at ``url`` and check it can hold a frontier.

    Refused: a server whose ``maxmemory-policy`` is ``allkeys-*`` (it would evict the
    frontier's keys, which carry no TTL; ``noeviction`` and ``volatile-*`` are fine).
    ``warn`` gets one line when the server's AOF is off or not fsynced on every write
    (``appendfsync always``): a Redis crash may then lose the last second of the frontier.

    Returns:
        a ``redis.asyncio`` client (``Redis`` or ``RedisCluster``), ``decode_responses=True``.

    Raises:
        ConfigError: a bad URL, an unreachable server, a refused password, an evicting
            ``maxmemory-policy``.
    """
    client = _client(url)
    where = _where(url)
    try:
        if isinstance(client, RedisCluster):
            await client.initialize()
        await client.ping()
        if isinstance(client, RedisCluster):  # every primary answers: {node: info}
            info = await client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            persistence = await client.info("persistence", target_nodes=RedisCluster.PRIMARIES)
        else:
            info = await client.info("memory")
            persistence = await client.info("persistence")
    except rexc.AuthenticationError:
        await client.aclose()
        raise ConfigError(f"Redis at {where} refused the password") from None
    except rexc.ResponseError as e:
        await client.aclose()
        if "NOAUTH" in str(e) or "WRONGPASS" in str(e):
            raise ConfigError(f"Redis at {where} refused the password") from None
        raise ConfigError(f"Redis at {where}: {e}") from None
    except (rexc.RedisError, OSError) as e:
        await client.aclose()
        raise ConfigError(f"cannot connect to Redis at {where}: {e}") from None
    infos = info.values() if isinstance(client, RedisCluster) else [info]
    for one in infos:
        policy = str(one.get("maxmemory_policy", "noeviction"))
        if policy.startswith("allkeys-"):
            await client.aclose()
            raise ConfigError(
                f"Redis at {where} has maxmemory-policy {policy}, which can evict the "
                "frontier's keys: set maxmemory-policy noeviction"
            )
    pers = persistence.values() if isinstance(client, RedisCluster) else [persistence]
    if warn is not None and any(int(p.get("aof_enabled", 0)) != 1 for p in pers):
        warn(f"Redis at {where} has appendonly off: a Redis crash loses the frontier")
    return client


@dataclass(frozen=True, slots=True)
class CrawlStatus:
    """A snapshot of one crawl in Redis.

    Attributes:
        crawl_id: the crawl's key prefix.
        state: running, paused or stopped.
        pending / leased / done / hosts: frontier counts (:class:`FrontierCounts`).
        workers_alive: workers whose heartbeat is at most ``alive_s`` seconds old.
        pages_per_s: URLs done per second over the last minute (server clock; the shards'
            ``rate`` buckets, see :mod:`skitter.frontier.redis_lua`), over the crawl's
            life when it is younger.
        elapsed_s: seconds since the crawl was created.
        pages_taken: the ``--max-pages`` budget taken so far.
    """

    crawl_id: str
    state: str
    pending: int
    leased: int
    done: int
    hosts: int
    workers_alive: int
    pages_per_s: float
    elapsed_s: float
    pages_taken: int
    avg_pages_per_s: float = 0.0

    @property
    def finished(self) -> bool:
        """Nothing pending or leased and something done: the crawl is over."""
        return self.pending == 0 and self.leased == 0 and self.done > 0


async def _server_time(client: Any) -> float:
    sec, usec = await client.time()
    return float(sec) + float(usec) / 1e6


_CREATE = r"""
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and ARGV[1] ~= '1' then return 'exists' end
if (not exists) and ARGV[1] == '1' then return 'missing' end
if not exists then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'created', t[1] .. '.' .. string.format('%06d', tonumber(t[2])))
end
-- on resume too: workers joining from now on take the limits given to the resume
redis.call('HSET', KEYS[1], 'settings', ARGV[2])
redis.call('HSET', KEYS[1], 'state', 'running')
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
return 'ok'
"""


async def create_crawl(
    client: Any, crawl_id: str, settings: dict[str, Any], *, resume: bool
) -> None:
    """Record crawl ``crawl_id`` (its settings) as running; with ``resume``, an existing one
    (whose stored settings become ``settings``: those of the resume, same scope and seeds).

    Raises:
        ConfigError: the crawl exists and ``resume`` is False, or is missing on ``resume``.
        FrontierError: Redis failed.
    """
    script = client.register_script(_CREATE)
    try:
        got = await script(
            keys=[crawl_key(crawl_id, "meta")],
            args=["1" if resume else "0", json.dumps(settings, separators=(",", ":"))],
        )
    except rexc.RedisError as e:
        raise FrontierError(f"Redis error: {e}") from e
    if got == "exists":
        raise ConfigError(
            f"a crawl {crawl_id!r} already exists in Redis: add --resume to go on with it, "
            f"or `skitter control URL delete --crawl-id {crawl_id}`"
        )
    if got == "missing":
        raise ConfigError(f"no crawl {crawl_id!r} in Redis to resume")


async def load_crawl(client: Any, crawl_id: str) -> dict[str, Any]:
    """The settings dict a worker joining crawl ``crawl_id`` uses.

    Raises:
        ConfigError: no such crawl.
    """
    raw = await client.hget(crawl_key(crawl_id, "meta"), "settings")
    if raw is None:
        raise ConfigError(f"no crawl {crawl_id!r} in Redis (start it with skitter crawl)")
    data: dict[str, Any] = json.loads(raw)
    return data


async def set_state(client: Any, crawl_id: str, state: str) -> None:
    """Set the crawl's state (running, paused, stopped).

    Raises:
        ConfigError: no such crawl, or an unknown state.
    """
    if state not in STATES:
        raise ConfigError(f"unknown crawl state {state!r}")
    key = crawl_key(crawl_id, "meta")
    if not await client.exists(key):
        raise ConfigError(f"no crawl {crawl_id!r} in Redis")
    await client.hset(key, "state", state)


async def crawl_state(client: Any, crawl_id: str) -> str | None:
    """The crawl's state, or None if the crawl does not exist."""
    got: str | None = await client.hget(crawl_key(crawl_id, "meta"), "state")
    return got


async def delete_crawl(client: Any, crawl_id: str) -> int:
    """Delete every key of crawl ``crawl_id`` (``{CRAWL}:*`` and ``{CRAWL:s}:*``); the count.

    On a cluster every primary is scanned.
    """
    deleted = 0
    for pattern in (f"{{{crawl_id}}}:*", f"{{{crawl_id}:[0-9]*}}:*"):
        batch: list[str] = []
        async for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += await _delete(client, batch)
                batch = []
        if batch:
            deleted += await _delete(client, batch)
    return deleted


async def _delete(client: Any, keys: list[str]) -> int:
    n = 0
    for key in keys:  # one key per command: keys of many slots on a cluster
        n += int(await client.delete(key))
    return n


async def heartbeat(client: Any, crawl_id: str, worker_id: int | None = None) -> int:
    """Register (``worker_id`` None: a new id is taken) or refresh a worker; its id."""
    if worker_id is None:
        worker_id = int(await client.incr(crawl_key(crawl_id, "wid")))
    now = await _server_time(client)
    await client.zadd(crawl_key(crawl_id, "workers"), {str(worker_id): now})
    return worker_id


async def open_frontier(client: Any, crawl_id: str, **kwargs: Any) -> RedisFrontier:
    """:meth:`RedisFrontier.open` for crawl ``crawl_id`` (keyword arguments passed on)."""
    return await RedisFrontier.open(client, crawl_id, **kwargs)


async def read_status(client: Any, crawl_id: str, *, alive_s: float = 60.0) -> CrawlStatus:
    """A :class:`CrawlStatus` of crawl ``crawl_id``.

    Raises:
        ConfigError: no such crawl.
    """
    meta = await client.hgetall(crawl_key(crawl_id, "meta"))
    if not meta:
        raise ConfigError(f"no crawl {crawl_id!r} in Redis")
    frontier = await RedisFrontier.open(client, crawl_id)
    counts = await frontier.counts()
    pipe = client.pipeline(transaction=False)
    for s in range(frontier.shards):
        pipe.hgetall(shard_prefix(crawl_id, s) + "rate")
    buckets: list[dict[str, str]] = await pipe.execute()
    now = await _server_time(client)
    alive = await client.zcount(crawl_key(crawl_id, "workers"), now - alive_s, "+inf")
    taken = int(await client.get(crawl_key(crawl_id, "pages")) or 0)
    elapsed = max(now - float(meta.get("created", now)), 0.0)
    return CrawlStatus(
        crawl_id=crawl_id,
        state=str(meta.get("state", "running")),
        pending=counts.pending,
        leased=counts.leased,
        done=counts.done,
        hosts=counts.hosts,
        workers_alive=int(alive),
        pages_per_s=recent_rate(buckets, now, elapsed),
        elapsed_s=elapsed,
        pages_taken=taken,
        avg_pages_per_s=counts.done / elapsed if elapsed > 0 else 0.0,
    )


def recent_rate(buckets: list[dict[str, str]], now: float, elapsed_s: float) -> float:
    """URLs per second over the last minute: the counts of the shards' ``rate`` buckets
    (``{bucket: count}`` each; bucket = server seconds // :data:`RATE_BUCKET_S`) of the last
    :data:`RATE_BUCKETS` buckets, the current one included, over the seconds from the
    oldest one's start to ``now`` (55-60 s; ``elapsed_s`` when the crawl is younger)."""
    current = int(now // RATE_BUCKET_S)
    first = current - RATE_BUCKETS + 1
    total = sum(int(n) for b in buckets for k, n in b.items() if first <= int(k) <= current)
    window = min(now - first * RATE_BUCKET_S, elapsed_s)
    return total / window if window > 0 else 0.0


def _response_to_json(resp: Response) -> str:
    return json.dumps(
        {
            "url": resp.url,
            "status": resp.status,
            "reason": resp.reason,
            "headers": [list(h) for h in resp.headers],
            "body": base64.b64encode(resp.body).decode("ascii"),
            "http_version": resp.http_version,
            "truncated": resp.truncated,
        }
    )


def _response_from_json(text: str) -> Response:
    d = json.loads(text)
    body = base64.b64decode(d["body"])
    return Response(
        url=d["url"],
        status=int(d["status"]),
        reason=d["reason"],
        headers=tuple((str(k), str(v)) for k, v in d["headers"]),
        body=body,
        raw_body=body,
        http_version=d["http_version"],
        truncated=bool(d["truncated"]),
    )


def shared_robots_fetch(
    fetch: Callable[[str], Awaitable[Response]],
    client: Any,
    crawl_id: str,
    *,
    ttl_s: float,
    retry_s: float,
    lock_s: float = 30.0,
    poll_s: float = 0.1,
) -> Callable[[str], Awaitable[Response]]:
    """Wrap a robots.txt fetch function so the workers of a crawl fetch each robots.txt
    URL once (RFC 9309 §2.4 caching, shared through Redis).

    The first worker to ask takes ``{CRAWL}:robotslock:URL`` (``SET NX``, ``lock_s``
    seconds), fetches, and stores the response under ``{CRAWL}:robots:URL`` for
    ``ttl_s`` seconds (``retry_s`` for a 5xx); the others wait for it (polling every
    ``poll_s`` seconds, at most ``lock_s``), then fetch themselves if it never came. A
    failed fetch (:class:`FetchError`) is not shared: each worker sees its own. While Redis
    is unreachable the worker fetches robots.txt itself (a line is logged).

    Returns:
        a function with the signature of ``fetch``; its responses carry ``body`` as
        fetched (``raw_body`` = ``body`` when read from Redis, so the worker that fetched
        is the one that archived it).
    """

    async def shared(url: str) -> Response:
        try:
            return await share(url)
        except (rexc.RedisError, OSError) as e:  # Redis away: this worker fetches alone
            log.warning("robots.txt of %s fetched without Redis (%s)", url, e)
            return await fetch(url)

    async def share(url: str) -> Response:
        key = crawl_key(crawl_id, f"robots:{url}")
        lock = crawl_key(crawl_id, f"robotslock:{url}")
        cached = await client.get(key)
        if cached is not None:
            return _response_from_json(cached)
        if await client.set(lock, "1", nx=True, ex=max(int(lock_s), 1)):
            try:
                resp = await fetch(url)
            except BaseException:
                await client.delete(lock)
                raise
            keep = retry_s if resp.status >= 500 else ttl_s
            await client.set(key, _response_to_json(resp), px=max(int(keep * 1000), 1))
            await client.delete(lock)
            return resp
        for _ in range(max(int(lock_s / poll_s), 1)):
            await asyncio.sleep(poll_s)
            cached = await client.get(key)
            if cached is not None:
                return _response_from_json(cached)
            if not await client.exists(lock):  # the fetcher failed: try ourselves
                break
        return await fetch(url)

    return shared
