#!/usr/bin/env bash
# `make bench-redis`: Skitter with 1, 2, 4 workers on one local Redis, beside `skitter crawl
# --processes 2` (SQLite frontier) and Scrapy, on the shared synthetic web, in one run.
# See bench/README.md ("The Redis benchmark").
#
#   bash bench/run_redis_bench.sh                                   # 200 x 50, 2 rounds
#   BENCH_HOSTS=20 BENCH_PAGES=20 BENCH_RUNS=1 bash bench/run_redis_bench.sh      # quick
#
# Environment (defaults in brackets):
#   BENCH_HOSTS [200], BENCH_PAGES [50]  site size (seed 1);  BENCH_RUNS [2]  rounds
#   BENCH_REDIS_PORT_HTTP [8085]  nginx port on 127.0.0.1 (no /etc/hosts: Skitter gets
#                       --resolve, Scrapy a pre-filled DNS cache, see bench/scrapy_urls.py)
#   BENCH_CONCURRENCY [128]  per worker / crawl
#   BENCH_WORKERS ["1 2 4"]  Redis worker counts, one row each
#   BENCH_REDIS_TOOLS ["redis p2 scrapy"]  what runs in each round, in this order; "cluster"
#                       adds BENCH_CLUSTER_WORKERS [2] workers on a fresh 3-master Redis Cluster
#   BENCH_REDIS_FSYNC [always]  the Redis server's appendfsync (docs/scale-out.md's setting)
#   BENCH_KEEP [0], BENCH_SNAPSHOT [1], SHARED_BENCH [../shared/bench]  as bench/run_bench.sh
# Results: bench/results/<UTC time>-redis/ (git-ignored), bench/results/latest-redis.
# Each Redis run gets a fresh redis-server (loopback, free port, AOF on, its own folder), or
# three forming a cluster (cluster-announce-ip 127.0.0.1), stopped after the run. Every process started here is stopped on exit, success or failure.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED_BENCH:-../shared/bench}
HOSTS=${BENCH_HOSTS:-200}; PAGES=${BENCH_PAGES:-50}; RUNS=${BENCH_RUNS:-2}
PORT=${BENCH_REDIS_PORT_HTTP:-8085}; CONC=${BENCH_CONCURRENCY:-128}
WORKERS=${BENCH_WORKERS:-1 2 4}; CLUSTER_WORKERS=${BENCH_CLUSTER_WORKERS:-2}; FSYNC=${BENCH_REDIS_FSYNC:-always}; KEEP=${BENCH_KEEP:-0}
TOOLS=" ${BENCH_REDIS_TOOLS:-redis p2 scrapy} "
SKITTER_PY=${SKITTER_PY:-.venv/bin/python}
BVENV=bench/.venv-scrapy
. bench/bench_lib.sh  # die, venv, stop_child, run, make_site, snapshot_src, measure
has() { [[ "$TOOLS" == *" $1 "* ]]; }
for t in $TOOLS; do
  case $t in redis|cluster|p2|scrapy) ;; *) die "unknown BENCH_REDIS_TOOLS entry '$t'" ;; esac
done

# ---------------------------------------------------------------- prerequisites
[ -f "$SHARED/synthweb.py" ] || die "no $SHARED/synthweb.py (set SHARED_BENCH)"
SHARED=$(cd "$SHARED" && pwd)
[ -x "$SKITTER_PY" ] || die "no $SKITTER_PY: run 'make install' first"
export PATH=$PATH:/usr/sbin
for c in nginx redis-server redis-cli; do
  command -v "$c" >/dev/null 2>&1 || die "no $c: apt-get install -y nginx redis-server"
done
[ -x /usr/bin/time ] || die "no GNU time: apt-get install -y time"
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  die "127.0.0.1:$PORT is in use: stop what listens there or set BENCH_REDIS_PORT_HTTP"
fi
if has scrapy; then venv "$BVENV" bench/requirements-scrapy.txt; fi

# ---------------------------------------------------------------- cleanup, always
child=""; nginx_pid=""; redis_dir=""; work=""
stop_redis() {  # every redis-server whose pid file is under $redis_dir (one, or a cluster's 3)
  [ -n "$redis_dir" ] || return 0
  local pid f
  for f in "$redis_dir"/redis.pid "$redis_dir"/n*/redis.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$redis_dir"
  redis_dir=""
}
exec 7>&1 8>&2
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  exec 1>&7 2>&8
  stop_child
  stop_redis
  if [ -n "$nginx_pid" ] && kill -0 "$nginx_pid" 2>/dev/null; then
    kill -QUIT "$nginx_pid"
    for _ in $(seq 50); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  if [ -n "$work" ] && [ "$KEEP" != 1 ]; then rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

redis_node() {  # DIR PORT [extra redis-server args]: one fresh redis-server, waited for
  local dir=$1 port=$2; shift 2
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --appendonly yes \
    --appendfsync "$FSYNC" --save "" --maxmemory-policy noeviction --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" "$@" >/dev/null
  for _ in $(seq 250); do
    [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
    sleep 0.02
  done
  [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] || die "redis-server did not start: $(tail -3 "$dir/redis.log")"
}
free_port() {  # a free loopback port P (with P + 10000 free too: a cluster node's bus port)
  python3 -c '
import random, socket
for _ in range(200):
    p = random.randrange(20000, 55536)
    try:
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", p)); b.bind(("127.0.0.1", p + 10000))
    except OSError:
        continue
    print(p); break'
}
start_redis() {  # a fresh redis-server on a free loopback port; sets redis_url
  redis_dir=$(mktemp -d "$work/redis.XXXXXX")
  local port
  port=$(free_port)
  redis_node "$redis_dir" "$port"
  redis_url=redis://127.0.0.1:$port/0
}
start_cluster() {  # 3 fresh masters forming a Redis Cluster (no replicas); sets redis_url
  redis_dir=$(mktemp -d "$work/redis.XXXXXX")
  local k port n nodes=()
  for k in 0 1 2; do
    port=$(free_port)
    redis_node "$redis_dir/n$k" "$port" --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-announce-ip 127.0.0.1
    nodes+=("127.0.0.1:$port")
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
  for _ in $(seq 500); do
    local ok=0
    for n in "${nodes[@]}"; do
      redis-cli -p "${n##*:}" cluster info 2>/dev/null | grep -q cluster_state:ok && ok=$((ok + 1))
    done
    [ "$ok" = 3 ] && break
    sleep 0.02
  done
  redis_url=redis+cluster://$(IFS=,; echo "${nodes[*]}")
}

# ---------------------------------------------------------------- site, nginx
rdir=bench/results/$(date -u +%Y%m%dT%H%M%SZ)-redis
mkdir -p "$rdir"
ln -sfn "$(basename "$rdir")" bench/results/latest-redis
work=$(mktemp -d /tmp/skitter-redisbench.XXXXXX)
chmod 755 "$work"  # nginx's workers (not root) must read the site
SITE=$work/synthweb
echo "bench: redis run, $HOSTS hosts x $PAGES pages, workers $WORKERS, appendfsync $FSYNC, results in $rdir"
make_site "$HOSTS" "$PAGES" "$PORT"
snapshot_src
nginx -t -q -p "$SITE/" -c nginx.conf -e error.log
nginx -p "$SITE/" -c nginx.conf -e error.log
for _ in $(seq 50); do [ -s "$SITE/nginx.pid" ] && break; sleep 0.1; done
nginx_pid=$(cat "$SITE/nginx.pid")
python3 - "$rdir/machine.json" "$(git describe --always --dirty 2>/dev/null || echo unknown)" \
  "$(redis-server --version)" "$FSYNC" <<'EOF'
import json, os, sys, time
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
m = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), cpus=os.cpu_count(), cpu=cpu,
         skitter_commit=sys.argv[2], redis=sys.argv[3], appendfsync=sys.argv[4],
         loadavg_start=open("/proc/loadavg").read().split()[0])
json.dump(m, open(sys.argv[1], "w"), indent=1)
print("bench: machine", json.dumps(m))
EOF
start=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["start"])' "$SITE/manifest.json")

# ---------------------------------------------------------------- runs, alternating
here=$(pwd)
for i in $(seq "$RUNS"); do
  if has redis; then
    for n in $WORKERS; do
      start_redis
      measure "redis-w$n-r$i" "skitter-redis-w$n" env PYTHONPATH="$SKITTER_SRC" "$SKITTER_PY" \
        bench/redis_cluster_bench.py --site "$SITE" --out "$rdir/redis-w$n-r$i" \
        --redis "$redis_url" --workers "$n" --concurrency "$CONC"
      stop_redis
    done
  fi
  if has cluster; then
    for n in $CLUSTER_WORKERS; do
      start_cluster
      measure "cluster-w$n-r$i" "skitter-redis-cluster3-w$n" env PYTHONPATH="$SKITTER_SRC" \
        "$SKITTER_PY" bench/redis_cluster_bench.py --site "$SITE" \
        --out "$rdir/cluster-w$n-r$i" --redis "$redis_url" --workers "$n" --concurrency "$CONC"
      stop_redis
    done
  fi
  if has p2; then
    measure "skitter-p2-r$i" "skitter-p2-sqlite" env PYTHONPATH="$SKITTER_SRC" "$SKITTER_PY" \
      bench/skitter_bench.py --site "$SITE" --out "$rdir/skitter-p2-r$i" \
      --concurrency "$CONC" --delay 0 --processes 2
  fi
  if has scrapy; then
    measure "scrapy-r$i" "scrapy" python3 bench/treewatch.py --cwd "$work/scrapy-r$i" -- \
      env BENCH_URLS="$here/$rdir/scrapy-r$i.urls" BENCH_HOSTS_FILE="$SITE/hosts.txt" \
      SHARED_BENCH="$SHARED" "$here/$BVENV/bin/python" "$here/bench/scrapy_urls.py" \
      --start "$start" --concurrency "$CONC"
    rm -rf "${work:?}/scrapy-r$i"
  fi
done
rc=0
echo
python3 bench/redis_report.py "$rdir" || rc=$?
if [ "$KEEP" != 1 ]; then  # keep pages.jsonl and report.json; WARCs and links are large
  find "$rdir" -mindepth 2 \( -name '*.warc.gz' -o -name links.tsv -o -name 'frontier.sqlite*' \) -delete
  find "$rdir" -mindepth 2 -maxdepth 2 -name shards -type d -exec rm -rf {} +
fi
echo
echo "bench: results in $rdir (summary.md)"
exit "$rc"
