"""Status of a crawl kept in Redis: each worker publishes its figures, any worker shows them all.

Every worker of a Redis crawl runs a :class:`ClusterPublisher`: about once a second it sends
its :class:`~skitter.status.source.LiveState` to Redis in ONE Lua script (atomic, and whole
in the AOF: a crash at any instant leaves the previous or the new state, never half). Keys,
all under the crawl's hash tag (one cluster slot), ``P`` = ``{CRAWL}:stat:``:

* ``Pw``       hash: run -> JSON snapshot of one worker run (``{wid, run, t, state,
  totals, metrics}``: its record counts, breakdowns and Prometheus counter/histogram
  samples). Kept after the run ends or dies, so its last counts stay in the totals.
* ``Pseq``     hash: run -> the last batch number applied (a batch sent again after a lost
  reply is applied once).
* ``Plive:RUN`` string with an expiry (15 s, or 5 intervals if longer): the run is alive. A run
  that ended cleanly deletes it; a killed one lets it expire.
* ``Ph``       hash: host -> JSON ``[added, fetched, errors, bytes, fetch_s, disallowed,
  delay_s, cause, backoff_until, robots, last_error]``: counts summed over every worker
  (each batch adds the deltas since its last one), the state fields as last reported.
* ``Pbo``      sorted set: host -> backoff_until (Redis server clock): hosts in backoff are
  ``ZCOUNT now +inf``.
* ``Pchg``     sorted set: host -> ``Pver`` at its last change (a counter incremented per
  host written, so versions are unique); a reader asks only for the hosts changed since
  the version it has (so a table of 100,000 hosts is not read again per request).

A run is one process of a worker (``WID-RANDOM``): a resumed worker starts a new run, and
the killed run's last snapshot still counts. A worker killed with ``kill -9`` loses at most
the counts of its last interval (about a second) from the totals; its pages.jsonl has them.

:class:`skitter.status.cluster_source.ClusterSource` reads these keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis.exceptions as rexc

from skitter.status.source import LiveState

__all__ = ["ClusterPublisher", "stat_key"]

log = logging.getLogger("skitter")


PUBLISH = r"""
local p = string.sub(KEYS[1], 1, #KEYS[1] - 1)
local run, seq = ARGV[1], tonumber(ARGV[2])
if tonumber(redis.call('HGET', p .. 'seq', run) or '-1') >= seq then return 0 end
local t = redis.call('TIME')
local skew = tonumber(t[1]) + tonumber(t[2]) / 1000000 - tonumber(ARGV[4])
redis.call('HSET', p .. 'seq', run, seq)
redis.call('HSET', p .. 'w', run, ARGV[3])
if tonumber(ARGV[5]) > 0 then
  redis.call('SET', p .. 'live:' .. run, '1', 'PX', ARGV[5])
else
  redis.call('DEL', p .. 'live:' .. run)
end
if #ARGV < 6 then return 1 end
for i = 6, #ARGV, 12 do
  local host = ARGV[i]
  local ver = redis.call('INCR', p .. 'ver')
  local old = redis.call('HGET', p .. 'h', host)
  local r
  if old then r = cjson.decode(old) else r = {0, 0, 0, 0, 0, 0, 0, 'delay', 0, 'unknown', ''} end
  for k = 1, 6 do r[k] = tonumber(r[k]) + tonumber(ARGV[i + k]) end
  if ARGV[i + 7] ~= '' then
    r[7] = tonumber(ARGV[i + 7])
    r[8] = ARGV[i + 8]
    local u = tonumber(ARGV[i + 9])
    if u > 0 then u = u + skew end
    r[9] = u
    if u > 0 then
      redis.call('ZADD', p .. 'bo', string.format('%.17g', u), host)
    else
      redis.call('ZREM', p .. 'bo', host)
    end
  end
  if ARGV[i + 10] ~= 'unknown' then r[10] = ARGV[i + 10] end
  if ARGV[i + 11] ~= '' then r[11] = ARGV[i + 11] end
  redis.call('HSET', p .. 'h', host, cjson.encode(r))
  redis.call('ZADD', p .. 'chg', ver, host)
end
return 1
"""


#: Hosts per script call (a long script would hold up every other client of Redis).
BATCH_HOSTS = 1000

#: The :class:`~skitter.status.source.Totals` fields a worker run's snapshot carries.
SNAPSHOT_TOTALS = (
    "fetched",
    "ok",
    "errors",
    "bytes",
    "robots_disallowed",
    "by_status_class",
    "by_status",
    "by_error",
    "by_content_type",
)


def stat_key(crawl_id: str, name: str) -> str:
    """``{CRAWL}:stat:name``, a key of the cluster status (see the module docstring)."""
    return f"{{{crawl_id}}}:stat:{name}"


def metric_samples(live: LiveState) -> list[list[Any]]:
    """The counter and histogram samples of ``live``'s metrics as ``[name, {labels},
    value]`` (no gauges: those are the frontier's; no ``_created``, no info)."""
    out: list[list[Any]] = []
    for fam in live.metrics.registry.collect():
        if fam.type not in ("counter", "histogram"):
            continue
        for s in fam.samples:
            if not s.name.endswith("_created"):
                out.append([s.name, dict(s.labels), s.value])
    return out


class ClusterPublisher:
    """Publishes one worker run's :class:`LiveState` to Redis every ``interval_s`` seconds.

    Args:
        live: the run's live state (fed by its crawl).
        client: the crawl's ``redis.asyncio`` client (``decode_responses=True``).
        crawl_id: the crawl's key prefix.
        worker_id: this worker's id; the run is ``WID-RANDOM``.
        interval_s: seconds between two batches; the run's live key lasts 3 of them.
        clock: Unix seconds (the crawl's clock: backoff times are converted to Redis's).

    A batch that fails (Redis away) is sent again, unchanged, before any newer one; errors
    are logged (one line per outage), never raised into the crawl.
    """

    def __init__(
        self,
        live: LiveState,
        client: Any,
        crawl_id: str,
        worker_id: int,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.live = live
        self.crawl_id = crawl_id
        self.run = f"{worker_id}-{uuid.uuid4().hex[:8]}"
        self.worker_id = worker_id
        self.interval_s = interval_s
        self._clock = clock
        self._script = client.register_script(PUBLISH)
        self._seq = 0
        self._pending: list[list[Any]] = []
        self._failing = False
        self._sent: dict[str, tuple[int, int, int, int, float, int]] = {}
        self._state: dict[str, tuple[float, str, float]] = {}
        self._seen: dict[str, tuple[str, str]] = {}
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    def start(self) -> None:
        """Start publishing in the background (on the running event loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while not self._stop.is_set():
            await self.publish()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval_s)

    async def close(self, state: str) -> None:
        """Stop the loop and publish the run's final snapshot (``state``: ``finished`` or
        ``stopped``); the run's live key is deleted."""
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self.publish(final=state)

    async def publish(self, final: str | None = None) -> bool:
        """Send the batches not yet sent (a failed one first, unchanged), then the live state
        now; True when all went."""
        async with self._lock:
            self._pending.extend(self._batches(final))
            key = stat_key(self.crawl_id, "w")
            try:
                while self._pending:
                    args = self._pending[0]
                    args[3] = repr(self._clock())  # the skew to Redis's clock: measured now
                    await self._script(keys=[key], args=args)
                    self._pending.pop(0)
                self._failing = False
                return True
            except (rexc.RedisError, OSError) as exc:
                if not self._failing:  # one line per outage, not one a second
                    log.warning("status not published to Redis (kept for the next try): %s", exc)
                self._failing = True
                return False

    def _batches(self, final: str | None) -> list[list[Any]]:
        """The script's argument lists for the live state now: the changed hosts (deltas
        since they were last sent) in batches of at most :data:`BATCH_HOSTS`, each with the
        run's snapshot and its own sequence number."""
        live = self.live
        t = live.totals_now()
        snap = json.dumps(
            {
                "wid": self.worker_id,
                "run": self.run,
                "t": round(self._clock(), 3),
                "state": final or "running",
                "totals": {k: getattr(t, k) for k in SNAPSHOT_TOTALS},
                "metrics": metric_samples(live),
            },
            separators=(",", ":"),
        )
        ttl_ms = 0 if final else int(max(15.0, self.interval_s * 5) * 1000)
        rows: list[Any] = []
        for row, added, fetch_s in live.take_dirty():
            now = (added, row.fetched, row.errors, row.bytes, fetch_s, row.robots_disallowed)
            was = self._sent.get(row.host, (0, 0, 0, 0, 0.0, 0))
            self._sent[row.host] = now
            state = (round(row.delay_s, 3), row.delay_cause, row.backoff_until or 0.0)
            changed = self._state.get(row.host) != state
            self._state[row.host] = state
            rows.append(row.host)
            rows.extend(n - w for n, w in zip(now[:4], was[:4], strict=True))
            rows.append(repr(now[4] - was[4]))
            rows.append(now[5] - was[5])
            rows.extend((repr(state[0]), state[1], repr(state[2])) if changed else ("", "", ""))
            # robots and last error: sent when they changed here (else another worker's stay)
            seen = (row.robots, row.last_error or "")
            rows.extend(("unknown", "") if self._seen.get(row.host) == seen else seen)
            self._seen[row.host] = seen
        out = []
        step = BATCH_HOSTS * 12
        for i in range(0, max(len(rows), 1), step):
            self._seq += 1
            head = [self.run, self._seq, snap, repr(self._clock()), ttl_ms]
            out.append(head + rows[i : i + step])
        return out
