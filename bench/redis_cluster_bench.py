"""N Skitter workers on one Redis frontier over a served synthweb, as one measured command.

    .venv/bin/python bench/redis_cluster_bench.py --site SITE --out DIR --redis redis://H:P/0 \
        --workers N [--concurrency 128] [--delay 0] [-- extra skitter crawl flags]

The command ../shared/bench/measure.py times (bench/run_redis_bench.sh runs it): worker 1 is
``skitter crawl --seeds-file ... --frontier REDIS --out DIR/w1`` (every host of SITE/hosts.txt
a seed, mapped with --resolve HOST:PORT:127.0.0.1 --resolve-only, as bench/skitter_bench.py);
once the crawl's settings are in Redis, workers 2..N are ``skitter worker REDIS --out DIR/wK``
(they take the crawl's settings, --resolve included, from Redis). All run at once; each exits
by itself when nothing is pending or leased. The redis-server is NOT a child of this command
(the caller starts it), so measure.py's CPU seconds are the crawler tree's alone.

Redis figures are deltas of INFO between just before worker 1 starts and just after the last
worker exits (this script's own INFO and HGET calls are subtracted):

* ``redis_cpu_s``: used_cpu_user + used_cpu_sys (the whole server process);
  ``redis_cpu_sys_s`` the system part (the AOF's write and fsync calls are in it);
  ``redis_script_s``: the ``usec`` of INFO commandstats summed over the script commands (the
  time Redis itself measured executing the scripts, their inner commands included).
* ``redis_calls``: the sum of ``calls`` over INFO commandstats. Redis 7 counts a command run
  by a Lua script (``redis.call``) under its own name as well as the EVALSHA that ran it, so
  this is every command executed, the scripts' inner ones included; ``redis_script_calls``
  is the EVALSHA/EVAL/FCALL calls alone (client round trips carrying a script), and
  ``redis_by_command`` the per-command deltas.
* ``redis_peak_memory_b``: used_memory_peak at the end (the server is fresh for each run);
  ``redis_base_memory_b``: used_memory before the crawl.

With ``--redis redis+cluster://HOST:PORT,...`` (every master listed) the figures are summed
over the nodes, and ``redis_node_cpu_s`` gives each master's CPU seconds (how evenly the 16
shards and the crawl-wide keys spread).

Memory of the crawler tree: bench/treewatch.py's Sampler over every worker's process tree.
Writes {"pages": N, ...} to $BENCH_OUT (N = records with status 200 and no error over every
worker's pages.jsonl; ``duplicate_urls``: URLs with more than one record across workers) and
exits 0 when every worker exited 0, else the first non-zero exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis
from skitter_bench import count_pages, site_args, skitter_cmd  # bench/, beside this script
from treewatch import Sampler, output_size

SCRIPT_COMMANDS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro")


def nodes_of(url: str) -> list[redis.Redis]:
    """One client per server: the server of a redis:// URL, or every node listed in a
    ``redis+cluster://HOST:PORT,HOST:PORT,...`` URL (the masters of a cluster)."""
    if not url.startswith("redis+cluster://"):
        return [redis.Redis.from_url(url, decode_responses=True)]
    hosts = url.removeprefix("redis+cluster://").split("/")[0].split(",")
    return [
        redis.Redis(host=h.rsplit(":", 1)[0], port=int(h.rsplit(":", 1)[1]), decode_responses=True)
        for h in hosts
    ]


def snapshot_all(nodes: list[redis.Redis]) -> list[dict[str, Any]]:
    """:func:`snapshot` of every node."""
    return [snapshot(n) for n in nodes]


def snapshot(r: redis.Redis) -> dict[str, Any]:
    """One INFO (all sections) reduced to CPU seconds, used_memory(_peak), calls per command."""
    info = r.info("all")
    calls = {
        k.removeprefix("cmdstat_"): int(v["calls"])
        for k, v in info.items()
        if k.startswith("cmdstat_") and isinstance(v, dict)
    }
    usec = {
        k.removeprefix("cmdstat_"): int(v["usec"])
        for k, v in info.items()
        if k.startswith("cmdstat_") and isinstance(v, dict)
    }
    return dict(
        script_usec=sum(usec.get(c, 0) for c in SCRIPT_COMMANDS),
        cpu=float(info["used_cpu_user"]) + float(info["used_cpu_sys"]),
        sys=float(info["used_cpu_sys"]),
        used=int(info["used_memory"]),
        peak=int(info["used_memory_peak"]),
        calls=calls,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--site", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--redis", required=True, help="redis://HOST:PORT/DB of a fresh server")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--crawl-id", default="skitter")
    ap.add_argument("--delay", default="0")
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="-- then extra skitter crawl flags")
    a = ap.parse_args()
    extra = a.extra[1:] if a.extra[:1] == ["--"] else a.extra
    if a.out.exists():
        print(f"redis_cluster_bench: {a.out} exists; wants a fresh crawl", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True)
    hosts, seed_args = site_args(a.site, a.out)
    skitter = skitter_cmd()
    first = [
        *skitter, "crawl", *seed_args,
        "--frontier", a.redis, "--crawl-id", a.crawl_id,
        "--out", str(a.out / "w1"),
        "--delay", a.delay,
        "--concurrency", str(a.concurrency),
        "--ip-concurrency", str(a.concurrency),
        "--quiet",
        *extra,
    ]  # fmt: skip
    nodes = nodes_of(a.redis)
    own_calls: Counter[str] = Counter(info=len(nodes))  # the INFO of the first snapshot
    s0 = snapshot_all(nodes)
    r: Any = nodes[0]
    if a.redis.startswith("redis+cluster://"):  # the meta key's slot may be on any master
        first_node = nodes[0].connection_pool.connection_kwargs
        r = redis.RedisCluster(
            host=first_node["host"], port=first_node["port"], decode_responses=True
        )
    procs: list[subprocess.Popen[bytes]] = []
    roots: list[int] = []
    t0 = time.monotonic()
    with Sampler(roots) as sampler:
        procs.append(subprocess.Popen(first))
        roots.append(procs[0].pid)
        if a.workers > 1:
            meta = "{" + a.crawl_id + "}:meta"
            for _ in range(3000):  # bounded: 3000 x 20 ms; the crawl writes its settings first
                own_calls["hget"] += 1
                if r.hget(meta, "settings") is not None or procs[0].poll() is not None:
                    break
                time.sleep(0.02)
            for k in range(2, a.workers + 1):
                cmd = [*skitter, "worker", a.redis, "--crawl-id", a.crawl_id]
                procs.append(subprocess.Popen([*cmd, "--out", str(a.out / f"w{k}"), "--quiet"]))
                roots.append(procs[-1].pid)
        codes = [p.wait() for p in procs]
    wall = time.monotonic() - t0
    s1 = snapshot_all(nodes)
    for n in {id(x): x for x in [r, *nodes]}.values():
        n.close()
    by_cmd: Counter[str] = Counter()
    for b, e in zip(s0, s1, strict=True):
        by_cmd.update({k: v - b["calls"].get(k, 0) for k, v in e["calls"].items()})
    by_cmd.subtract(own_calls)
    by_cmd = +by_cmd  # drop zeros
    folders = sorted(a.out.glob("w*"))
    jsonls = [d / "pages.jsonl" for d in folders]
    pages, statuses, errors, _last = count_pages(jsonls)
    per_url: Counter[str] = Counter()
    for j in jsonls:
        if j.exists():
            with j.open() as f:
                per_url.update(json.loads(line)["url"] for line in f)
    per_worker = [count_pages([j])[0] for j in jsonls]
    out_bytes, out_files = output_size([a.out])
    calls = sum(by_cmd.values())
    scripts = sum(by_cmd[c] for c in SCRIPT_COMMANDS)
    res = dict(
        tool="skitter-redis",
        workers=a.workers,
        pages=pages,
        pages_per_worker=per_worker,
        records=sum(statuses.values()),
        by_status=dict(statuses),
        by_error=dict(errors),
        duplicate_urls=sum(1 for n in per_url.values() if n > 1),
        skitter_exits=[128 - c if c < 0 else c for c in codes],
        skitter_exit=next((c for c in codes if c != 0), 0),
        hosts=len(hosts),
        crawl_wall_s=round(wall, 2),
        redis_cpu_s=round(sum(e["cpu"] - b["cpu"] for b, e in zip(s0, s1, strict=True)), 3),
        redis_script_s=round(
            sum(e["script_usec"] - b["script_usec"] for b, e in zip(s0, s1, strict=True)) / 1e6, 3
        ),
        redis_cpu_sys_s=round(sum(e["sys"] - b["sys"] for b, e in zip(s0, s1, strict=True)), 3),
        redis_node_cpu_s=[round(e["cpu"] - b["cpu"], 3) for b, e in zip(s0, s1, strict=True)],
        redis_nodes=len(nodes),
        redis_calls=calls,
        redis_script_calls=scripts,
        redis_by_command=dict(by_cmd.most_common()),
        redis_base_memory_b=sum(b["used"] for b in s0),
        redis_peak_memory_b=sum(e["peak"] for e in s1),  # per node peaks, summed
        output_bytes=out_bytes,
        output_files=out_files,
        **sampler.figures(),
    )
    if pages:
        res["redis_cpu_us_per_page"] = round(res["redis_cpu_s"] / pages * 1e6, 1)
        res["redis_calls_per_page"] = round(calls / pages, 1)
        res["redis_script_us_per_page"] = round(res["redis_script_s"] / pages * 1e6, 1)
        res["redis_script_calls_per_page"] = round(scripts / pages, 2)
    print(json.dumps(res))
    if os.environ.get("BENCH_OUT"):
        Path(os.environ["BENCH_OUT"]).write_text(json.dumps(res))
    return int(res["skitter_exit"])


if __name__ == "__main__":
    sys.exit(main())
