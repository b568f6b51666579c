#!/usr/bin/env bash
# `make bench-site`: Skitter vs wget on one big real site (Debian's rust-doc), in one run.
# See bench/README.md.
#
#   bash bench/run_site.sh                                   # all of rust-doc, 2 runs each
#   BENCH_SITE_ROOT=/usr/share/doc/rust-doc/html/book BENCH_RUNS=1 bash bench/run_site.sh  # small
#
# Environment (defaults in brackets):
#   BENCH_SITE_ROOT [/usr/share/doc/rust-doc/html]  the folder served as http://rust-doc.test:PORT/
#   BENCH_SITE_PORT [8090]  nginx port on 127.0.0.1
#   BENCH_SITE_RUNS [BENCH_RUNS, else 2]  runs per tool
#   BENCH_SITE_TOOLS ["wget wget-warc skitter-p1 skitter-p2"]  run in this order, alternating
#                    (skitter-pN-zstd: skitter-pN with --links-compress zstd)
#   BENCH_KEEP [0]      1 = keep the crawlers' output folders
#   BENCH_SNAPSHOT [1]  run Skitter from a copy of src/skitter taken at the start (0 = live src/)
#   SHARED_BENCH [../shared/bench]  for measure.py
# Results: bench/results/<UTC time>-site/ (git-ignored), bench/results/latest-site.
# No /etc/hosts entry and no DNS: wget reaches the site through http_proxy (nginx answers
# absolute-URI requests by their host), Skitter through --resolve ... --resolve-only.
# Every process started here is stopped on exit, success or failure: nginx by its pid file,
# a measured command still running by its process group; the served site is only read.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/bench_lib.sh  # stop_child, snapshot_src (die, run and measure: this script's own)
SHARED=${SHARED_BENCH:-../shared/bench}
ROOT=${BENCH_SITE_ROOT:-/usr/share/doc/rust-doc/html}
PORT=${BENCH_SITE_PORT:-8090}; RUNS=${BENCH_SITE_RUNS:-${BENCH_RUNS:-2}}; KEEP=${BENCH_KEEP:-0}
TOOLS=${BENCH_SITE_TOOLS:-wget wget-warc skitter-p1 skitter-p2}
SKITTER_PY=${SKITTER_PY:-.venv/bin/python}
HOST=rust-doc.test

die() { echo "bench-site: $*" >&2; exit 1; }

# ---------------------------------------------------------------- prerequisites
[ -f "$SHARED/measure.py" ] || die "no $SHARED/measure.py: the shared benchmark scripts must sit at ../shared/bench beside the repository (or set SHARED_BENCH)"
SHARED=$(cd "$SHARED" && pwd)
[ -x "$SKITTER_PY" ] || die "no $SKITTER_PY: run 'make install' first"
for t in $TOOLS; do
  case $t in wget|wget-warc|skitter-p[0-9]*) ;; *) die "unknown BENCH_SITE_TOOLS entry '$t'" ;; esac
done
need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
[ -x /usr/bin/time ] || need+=(time)
command -v wget >/dev/null 2>&1 || need+=(wget)
if [ "$ROOT" = /usr/share/doc/rust-doc/html ] && [ ! -f "$ROOT/index.html" ]; then need+=(rust-doc); fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench-site: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    die "missing ${need[*]}: run as root (installs them with apt-get), or: sudo apt-get install -y ${need[*]}"
  fi
fi
export PATH=$PATH:/usr/sbin
[ -f "$ROOT/index.html" ] || die "no $ROOT/index.html (BENCH_SITE_ROOT)"
ROOT=$(cd "$ROOT" && pwd)
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  die "127.0.0.1:$PORT is in use: stop what listens there or set BENCH_SITE_PORT"
fi
mkdir -p bench/results
exec 9>bench/results/.lock  # one benchmark at a time, this one or `make bench`
flock -n 9 || die "another benchmark is running (lock bench/results/.lock)"

# ---------------------------------------------------------------- cleanup, always
child=""; work=""; nginx_pid=""
exec 7>&1 8>&2
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  exec 1>&7 2>&8
  stop_child
  if [ -n "$work" ] && [ -s "$SITE/error.log" ]; then cp "$SITE/error.log" "$rdir/nginx-error.log" || true; fi
  if [ -n "$nginx_pid" ] && kill -0 "$nginx_pid" 2>/dev/null; then
    kill -QUIT "$nginx_pid" || true
    for _ in $(seq 50); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
    echo "bench-site: nginx $nginx_pid stopped"
  fi
  if [ -n "$work" ] && [ "$KEEP" != 1 ]; then rm -rf "$work"; fi
  [ -n "$work" ] && [ "$KEEP" = 1 ] && echo "bench-site: outputs kept in $work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

run() {  # CMD in its own process group (so cleanup can stop all of it), waited for
  local rc=0
  setsid -w "$@" &
  child=$!
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

# ---------------------------------------------------------------- nginx
rdir=bench/results/$(date -u +%Y%m%dT%H%M%SZ)-site
mkdir -p "$rdir"
ln -sfn "$(basename "$rdir")" bench/results/latest-site
work=$(mktemp -d /tmp/skitter-bench-site.XXXXXX)
chmod 755 "$work"
SITE=$work/nginx  # measure.py's --site: nginx.pid (nginx's CPU) lives here
mkdir -p "$SITE/tmp"
LOG_FORMAT=$(python3 -c 'import sys; sys.path.insert(0, "bench"); from accesslog import LOG_FORMAT; print(LOG_FORMAT)')
cat > "$SITE/nginx.conf" <<EOF
# bench/run_site.sh: $ROOT as http://$HOST:$PORT/ on 127.0.0.1, no compression
worker_processes 1;
worker_rlimit_nofile 65536;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 4096; }
http {
    types {
        text/html html htm; text/css css; application/javascript js; text/plain txt md rs;
        image/svg+xml svg; image/png png; image/jpeg jpg jpeg; image/gif gif;
        font/woff2 woff2; font/woff woff; application/json json; application/gzip gz;
    }
    default_type application/octet-stream;
    $LOG_FORMAT
    access_log access.log bench;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 65;
    gzip off;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server {
        listen 127.0.0.1:$PORT default_server;
        server_name _;
        root $ROOT;
        index index.html;
        location / { try_files \$uri \$uri/ =404; }
    }
}
EOF
nginx -t -q -p "$SITE/" -c nginx.conf -e error.log
nginx -p "$SITE/" -c nginx.conf -e error.log
for _ in $(seq 50); do [ -s "$SITE/nginx.pid" ] && break; sleep 0.1; done
nginx_pid=$(cat "$SITE/nginx.pid")
START=http://$HOST:$PORT/
env http_proxy="http://127.0.0.1:$PORT/" no_proxy= wget -q -e use_proxy=on -O /dev/null "${START}index.html" ||
  die "nginx does not serve ${START}index.html (see $SITE/error.log)"

# ---------------------------------------------------------------- Skitter snapshot, machine
snapshot_src  # SKITTER_SRC (bench_lib.sh)
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
src_sha=$(cd "$SKITTER_SRC" && find skitter -name '*.py' -print0 | sort -z | xargs -0 sha1sum | sha1sum | cut -c1-12)
python3 - "$rdir/machine.json" "$commit" "$src_sha" "$ROOT" "$START" <<'EOF'
import json, os, platform, subprocess, sys, time
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
def out(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return None
m = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), cpus=os.cpu_count(), cpu=cpu,
         mem_gb=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
         kernel=platform.release(), python=platform.python_version(),
         skitter_commit=sys.argv[2], skitter_src_sha1=sys.argv[3],
         wget=(out("wget", "--version") or "").split("\n")[0],
         rust_doc=out("dpkg-query", "-W", "-f=${Version}", "rust-doc"),
         root=sys.argv[4], start=sys.argv[5],
         skitter_native=os.environ.get("SKITTER_NATIVE"),
         loadavg_start=open("/proc/loadavg").read().split()[0])
json.dump(m, open(sys.argv[1], "w"), indent=1)
print("bench-site: machine", json.dumps(m))
EOF

# ---------------------------------------------------------------- runs
measure() {  # TAG LABEL CMD...: one run measured by measure.py; its slice of the access log
  local tag=$1 label=$2; shift 2
  local rc=0 off0 off1
  off0=$(stat -c %s "$SITE/access.log" 2>/dev/null || echo 0)
  run python3 "$SHARED/measure.py" --site "$SITE" --out "$rdir/$tag.json" --label "$label" -- "$@" \
    > "$rdir/$tag.log" 2>&1 || rc=$?
  cut -d' ' -f1-3 /proc/loadavg > "$rdir/$tag.loadavg"
  off1=$(stat -c %s "$SITE/access.log" 2>/dev/null || echo 0)
  tail -c "+$((off0 + 1))" "$SITE/access.log" | head -c "$((off1 - off0))" > "$rdir/$tag.access" || true
  [ "$rc" = 0 ] || { tail -n 20 "$rdir/$tag.log" >&2; die "measure.py failed for $tag"; }
  echo "$tag: $(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("wall %.1f s, CPU %.1f s, peak RSS %s MB (tree), output %.1f MB, exit %s, load %.2f"
      % (r["wall_s"], r["cpu_s"], r["peak_rss_mb"], r.get("output_bytes", 0) / 1e6,
         r.get("exit"), r["loadavg_before"]))' "$rdir/$tag.json")"
}
here=$(pwd)
for i in $(seq "$RUNS"); do  # alternating, so drift in the machine's load hits all alike
  for t in $TOOLS; do
    tag=$t-r$i; out=$work/$tag
    case $t in
      wget|wget-warc)
        warc=(); [ "$t" = wget-warc ] && warc=(--warc-file=rust-doc)
        # wget exits 8 when some linked URL answered 404 (links out of the served tree): the
        # page set is checked from the access log instead. http_proxy: no DNS, no /etc/hosts.
        measure "$tag" "$t" python3 bench/treewatch.py --cwd "$out" -- \
          env http_proxy="http://127.0.0.1:$PORT/" no_proxy= \
          wget --recursive --level=inf --no-parent -e robots=on -e use_proxy=on \
          --no-verbose --output-file=wget.log "${warc[@]}" "$START"
        ;;
      skitter-p*)  # skitter-pN, or skitter-pN-zstd: with --links-compress zstd
        n=${t#skitter-p}; n=${n%-zstd}; lc=(); [ "${t%-zstd}" != "$t" ] && lc=(--links-compress zstd)
        measure "$tag" "$t" python3 bench/treewatch.py --output "$out" -- \
          env PYTHONPATH="$SKITTER_SRC" "$here/$(dirname "$SKITTER_PY")/skitter" crawl "$START" \
          --out "$out" --resolve "$HOST:$PORT:127.0.0.1" --resolve-only --delay 0 \
          --processes "$n" --quiet "${lc[@]}"
        cp "$out/report.json" "$rdir/$tag.report.json" 2>/dev/null || true
        python3 -c '
import json, sys
from collections import Counter
c = Counter()
for line in open(sys.argv[1]):
    r = json.loads(line)
    c["records"] += 1
    c["error" if r.get("error") else str(r.get("status"))] += 1
json.dump(c, open(sys.argv[2], "w"))' "$out/pages.jsonl" "$rdir/$tag.pages.json" 2>/dev/null || true
        ;;
    esac
    [ "$KEEP" = 1 ] || rm -rf "$out"
  done
done
echo
rc=0
python3 bench/site_report.py "$rdir" || rc=$?
echo
echo "bench-site: results in $rdir (summary.md)"
exit "$rc"
