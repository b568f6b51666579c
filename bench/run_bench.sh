#!/usr/bin/env bash
# `make bench`: Skitter vs Scrapy, Crawlee and spider-rs on the shared synthetic web, in one run.
# See bench/README.md.
#
#   bash bench/run_bench.sh                      # 200 hosts x 50 pages, 3 runs each, + ceilings
#   BENCH_HOSTS=20 BENCH_PAGES=20 BENCH_RUNS=1 bash bench/run_bench.sh      # a quick run
#   BENCH_POLITE=1 bash bench/run_bench.sh       # the polite variant alone: --delay 1, gaps
#
# Environment (defaults in brackets):
#   BENCH_HOSTS [200], BENCH_PAGES [50]   site size (seed 1);  BENCH_RUNS [3]  runs per tool
#   BENCH_PORT [8080]   nginx port on 127.0.0.1;   BENCH_CONCURRENCY [128]
#   BENCH_TOOLS ["skitter skitter-nowarc scrapy crawlee spider"]  the crawlers, run in this order
#   BENCH_PROCESSES [nproc]  Skitter's --processes; a list ("2 1") gives one row each
#   BENCH_CEILINGS [1]  also run ../shared/bench/run_ceilings.sh;  BENCH_WRK_SECONDS [20]
#   BENCH_POLITE [0]    1 = polite variant only: BENCH_POLITE_HOSTS [5] x BENCH_POLITE_PAGES [20],
#                       --delay BENCH_POLITE_DELAY [1], gaps from nginx's access log
#   BENCH_KEEP [0]      1 = keep the generated site and Skitter's WARC/links/frontier files
#   BENCH_SNAPSHOT [1]  run Skitter from a copy of src/skitter taken at the start (0 = live src/)
#   SHARED_BENCH [../shared/bench]   the shared scripts (beside the repository, also in CI)
# Results: bench/results/<UTC time>-<full|polite>/ (git-ignored), bench/results/latest[-polite].
# Every process started here is stopped on exit, success or failure: nginx by serve.sh stop,
# a measured command still running by its process group. nginx logs every request (format in
# bench/accesslog.py); each crawler run gets its slice of the log (RESULTS/TAG.access).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED_BENCH:-../shared/bench}
HOSTS=${BENCH_HOSTS:-200}; PAGES=${BENCH_PAGES:-50}; RUNS=${BENCH_RUNS:-3}
PORT=${BENCH_PORT:-8080}; CONC=${BENCH_CONCURRENCY:-128}
CEILINGS=${BENCH_CEILINGS:-1}; WRK_SECONDS=${BENCH_WRK_SECONDS:-20}
POLITE=${BENCH_POLITE:-0}; KEEP=${BENCH_KEEP:-0}
PROCS=${BENCH_PROCESSES:-$(nproc)}  # Skitter's --processes; a list ("2 1") runs each in turn
SKITTER_PY=${SKITTER_PY:-.venv/bin/python}
BVENV=bench/.venv-scrapy    # Scrapy + the ceilings' aiohttp/selectolax (requirements-scrapy.txt)
CVENV=bench/.venv-crawlee   # Crawlee for Python (requirements-crawlee.txt)
TOOLS=" ${BENCH_TOOLS:-skitter skitter-nowarc scrapy crawlee spider} "
has() { [[ "$TOOLS" == *" $1 "* ]]; }
for t in $TOOLS; do
  case $t in skitter|skitter-nowarc|scrapy|crawlee|spider) ;; *) echo "bench: unknown BENCH_TOOLS entry '$t'" >&2; exit 2 ;; esac
done
MARK="# synthweb-bench begin"

. bench/bench_lib.sh  # die, venv, stop_child, run, make_site, snapshot_src, measure

# ---------------------------------------------------------------- prerequisites
[ -f "$SHARED/synthweb.py" ] || die "no $SHARED/synthweb.py: the shared benchmark scripts must sit at ../shared/bench beside the repository (or set SHARED_BENCH)"
SHARED=$(cd "$SHARED" && pwd)
[ -x "$SKITTER_PY" ] || die "no $SKITTER_PY: run 'make install' first"
need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
[ -x /usr/bin/time ] || need+=(time)            # measure.py runs GNU `time -v`, not the shell's
[ "$POLITE" = 1 ] || [ "$CEILINGS" != 1 ] || command -v wrk >/dev/null 2>&1 || need+=(wrk)
if [ "$POLITE" != 1 ] && has spider; then  # spider-rs through its Node binding
  command -v node >/dev/null 2>&1 || need+=(nodejs)
  command -v npm >/dev/null 2>&1 || need+=(npm)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    die "missing ${need[*]}: run as root (installs them with apt-get), or: sudo apt-get install -y ${need[*]}"
  fi
fi
export PATH=$PATH:/usr/sbin
[ -w /etc/hosts ] || die "../shared/bench/serve.sh maps the *.test hosts in /etc/hosts (Scrapy and the ceilings resolve them): run as root"
if grep -qF "$MARK" /etc/hosts; then
  die "/etc/hosts already has a synthweb-bench block: another benchmark is serving (or one was killed); stop it with $SHARED/serve.sh stop SITE_DIR, or delete the block between the '# synthweb-bench' markers"
fi
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  die "127.0.0.1:$PORT is in use: stop what listens there or set BENCH_PORT"
fi
mkdir -p bench/results
exec 9>bench/results/.lock
flock -n 9 || die "another 'make bench' is running (lock bench/results/.lock)"

[ "$POLITE" = 1 ] || ! has spider || [ "$PORT" = 8080 ] || die "../shared/bench/spider_bench.js names port 8080: with BENCH_PORT=$PORT leave spider out of BENCH_TOOLS"
if [ "$POLITE" != 1 ]; then  # the peers, apart from Skitter's venv
  venv "$BVENV" bench/requirements-scrapy.txt  # Scrapy, and aiohttp + selectolax for the ceilings
  if has crawlee; then venv "$CVENV" bench/requirements-crawlee.txt; fi
  if has spider && { [ ! -f bench/node_modules/.package-lock.json ] ||
                     [ bench/package-lock.json -nt bench/node_modules/.package-lock.json ]; }; then
    # npm install, not npm ci: npm 11's ci refuses a lock without every platform's optional
    # binary (the registry here has linux-x64 only); package.json pins both exactly
    echo "bench: npm install in bench/ (spider-rs 0.0.157, pinned by bench/package.json)"
    (cd bench && npm install --no-audit --no-fund --loglevel=error)
  fi
fi

# ---------------------------------------------------------------- cleanup, always
child=""; served=0; work=""
exec 7>&1 8>&2  # the terminal, for cleanup's messages even if a trap fires inside a redirection
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  exec 1>&7 2>&8
  stop_child
  if [ "$served" = 1 ]; then "$SHARED/serve.sh" stop "$SITE" || true; fi
  if [ -n "$work" ] && [ "$KEEP" != 1 ]; then rm -rf "$work"; fi
  [ -n "$work" ] && [ "$KEEP" = 1 ] && echo "bench: site kept in $SITE"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- site, nginx
mode=full; [ "$POLITE" = 1 ] && mode=polite
if [ "$POLITE" = 1 ]; then
  HOSTS=${BENCH_POLITE_HOSTS:-5}; PAGES=${BENCH_POLITE_PAGES:-20}; DELAY=${BENCH_POLITE_DELAY:-1}
fi
rdir=bench/results/$(date -u +%Y%m%dT%H%M%SZ)-$mode
mkdir -p "$rdir"
ln -sfn "$(basename "$rdir")" "bench/results/latest$([ "$POLITE" = 1 ] && echo -polite || true)"
work=$(mktemp -d /tmp/skitter-bench.XXXXXX)
chmod 755 "$work"  # mktemp -d makes it 0700: nginx's workers (not root) would answer 404 to all
SITE=$work/synthweb
echo "bench: $mode run, $HOSTS hosts x $PAGES pages, results in $rdir"
make_site "$HOSTS" "$PAGES" "$PORT"
snapshot_src
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
src_sha=$(cd "$SKITTER_SRC" && find skitter -name '*.py' -print0 | sort -z | xargs -0 sha1sum | sha1sum | cut -c1-12)
python3 - "$rdir/machine.json" "$SKITTER_PY" "$BVENV/bin/python" "$commit" "$src_sha" "$CVENV/bin/python" <<'EOF'
import json, os, platform, subprocess, sys, time
def ver(py, mod):
    try:
        return subprocess.run([py, "-c", f"import importlib.metadata as m; print(m.version({mod!r}))"],
                              capture_output=True, text=True, timeout=60).stdout.strip() or None
    except OSError:
        return None
def npm_ver(pkg):
    try:
        return json.load(open(f"bench/node_modules/{pkg}/package.json"))["version"]
    except (OSError, ValueError, KeyError):
        return None
def node_ver():
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip() or None
    except OSError:
        return None
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
m = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), cpus=os.cpu_count(), cpu=cpu,
         mem_gb=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
         kernel=platform.release(), python=platform.python_version(),
         skitter=ver(sys.argv[2], "skitter"), skitter_commit=sys.argv[4],
         skitter_src_sha1=sys.argv[5], scrapy=ver(sys.argv[3], "scrapy"),
         crawlee=ver(sys.argv[6], "crawlee"), spider_rs=npm_ver("@spider-rs/spider-rs"),
         node=node_ver(),
         skitter_native=os.environ.get("SKITTER_NATIVE"),
         loadavg_start=open("/proc/loadavg").read().split()[0])
json.dump(m, open(sys.argv[1], "w"), indent=1)
print("bench: machine", json.dumps(m))
EOF
"$SHARED/serve.sh" start "$SITE"
served=1
start=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["start"])' "$SITE/manifest.json")

skitter_run() {  # TAG LABEL DELAY PROCESSES [-- extra crawl flags]
  local tag=$1 label=$2 delay=$3 procs=$4; shift 4
  measure "$tag" "$label" env PYTHONPATH="$SKITTER_SRC" "$SKITTER_PY" bench/skitter_bench.py \
    --site "$SITE" --out "$rdir/$tag" \
    --concurrency "$CONC" --delay "$delay" --processes "$procs" "$@"
}
peer_run() {  # TAG LABEL CMD...: a peer in its own working folder (its output) under $work
  local tag=$1 label=$2; shift 2
  measure "$tag" "$label" python3 bench/treewatch.py --cwd "$work/$tag" -- "$@"
  rm -rf "${work:?}/$tag"
}
trim_skitter_out() {  # keep pages.jsonl, report.json, state: the WARC, links.tsv, shards are large
  [ "$KEEP" = 1 ] || rm -rf "$1"/*.warc.gz "$1"/links.tsv "$1"/frontier.sqlite* "$1"/shards
}

# ---------------------------------------------------------------- runs
rc=0
if [ "$POLITE" = 1 ]; then
  skitter_run "polite-skitter-d$DELAY-r1" "polite-skitter-d$DELAY" "$DELAY" "${PROCS%% *}"
  cp "$SITE/access.log" "$rdir/access.log"
  python3 bench/report.py "$rdir" || rc=$?
  echo
  echo "## Per-host gaps between consecutive requests (nginx access log, --delay $DELAY)" | tee "$rdir/gaps.md"
  echo | tee -a "$rdir/gaps.md"
  python3 bench/polite_gaps.py "$rdir/access.log" --delay "$DELAY" | tee -a "$rdir/gaps.md" || rc=1
  trim_skitter_out "$rdir/polite-skitter-d$DELAY-r1"
else
  here=$(pwd)
  for i in $(seq "$RUNS"); do  # alternating, so drift in the machine's load hits all alike
    if has skitter; then
      for n in $PROCS; do
        skitter_run "skitter-p$n-c$CONC-r$i" "skitter-p$n-c$CONC" 0 "$n"
      done
    fi
    if has skitter-nowarc; then
      n=${PROCS%% *}
      skitter_run "skitter-p$n-c$CONC-nowarc-r$i" "skitter-p$n-c$CONC-nowarc" 0 "$n" -- --no-warc
    fi
    if has scrapy; then
      peer_run "scrapy-c$CONC-r$i" "scrapy-c$CONC" env BENCH_URLS="$here/$rdir/scrapy-c$CONC-r$i.urls" \
        SHARED_BENCH="$SHARED" "$here/$BVENV/bin/python" "$here/bench/scrapy_urls.py" \
        --start "$start" --concurrency "$CONC"
    fi
    if has crawlee; then
      peer_run "crawlee-c$CONC-r$i" "crawlee-c$CONC" "$here/$CVENV/bin/python" \
        "$SHARED/crawlee_bench.py" "$start" "$CONC"
    fi
    if has spider; then  # the shared script, unchanged; its require() finds bench/node_modules
      peer_run "spider-r$i" "spider" env NODE_PATH="$here/bench/node_modules" \
        node "$SHARED/spider_bench.js" "$start" "$SITE/hosts.txt"
    fi
  done
  if [ "$CEILINGS" = 1 ]; then
    echo "bench: ceilings (wrk, aiohttp fetch-only, aiohttp + selectolax), $RUNS runs each"
    run env PY="$BVENV/bin/python" RESULTS="$rdir" "$SHARED/run_ceilings.sh" "$SITE" "$CONC" \
      "$RUNS" "$WRK_SECONDS"
  fi
  echo
  python3 bench/report.py "$rdir" || rc=$?
  for i in $(seq "$RUNS"); do
    for d in "$rdir"/skitter-*-r"$i"; do if [ -d "$d" ]; then trim_skitter_out "$d"; fi; done
  done
fi
echo
echo "bench: results in $rdir (summary.md)"
exit "$rc"
