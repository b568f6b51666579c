# Shell functions shared by the benchmarks that crawl the shared synthetic web
# (bench/run_bench.sh, bench/run_redis_bench.sh; bench/run_site.sh takes stop_child and
# snapshot_src). Sourced, from the repository root, after setting: SHARED (../shared/bench,
# absolute), SKITTER_PY; and, before calling them, rdir (the results folder), SITE (the
# generated site), child="" (the measured process group).

die() { echo "bench: $*" >&2; exit 1; }

venv() {  # DIR REQUIREMENTS: a bench-only venv, remade when the requirements change
  if [ ! -f "$1/.installed" ] || [ "$2" -nt "$1/.installed" ]; then
    echo "bench: creating $1 from $2"
    rm -rf "$1"
    python3 -m venv "$1"
    "$1/bin/pip" install -q --upgrade pip
    "$1/bin/pip" install -q -r "$2"
    touch "$1/.installed"
  fi
}

stop_child() {
  [ -n "$child" ] || return 0
  if kill -0 "$child" 2>/dev/null; then
    echo "bench: stopping process group $child" >&2
    # INT (a crawler's graceful stop), then TERM (INT is ignored when started in the background
    # of a non-interactive shell), then KILL, to the whole process group
    for sig in INT TERM; do
      kill "-$sig" -- "-$child" 2>/dev/null || kill "-$sig" "$child" 2>/dev/null || true
      for _ in $(seq 25); do kill -0 "$child" 2>/dev/null || break; sleep 0.2; done
    done
    kill -KILL -- "-$child" 2>/dev/null || true
  fi
  child=""
}

# run CMD in its own process group (so cleanup can stop all of it) and wait, interruptibly
run() {
  local rc=0
  setsid -w "$@" &
  child=$!
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

make_site() {  # HOSTS PAGES PORT: generate $SITE (seed 1), copy its lists to $rdir, log requests
  python3 "$SHARED/synthweb.py" --hosts "$1" --pages "$2" --seed 1 --out "$SITE" --port "$3"
  cp "$SITE/manifest.json" "$SITE/urls.txt" "$rdir/"
  # synthweb's nginx.conf has `access_log off`. Log every request with its end time ($msec),
  # duration ($request_time), host and status, in this run's SITE only: the polite run's gaps and
  # every crawler's page set and robots.txt requests come from it (bench/accesslog.py).
  python3 - "$SITE/nginx.conf" <<'EOF'
import sys
sys.path.insert(0, "bench")
from accesslog import LOG_FORMAT
p = sys.argv[1]
conf = open(p).read()
assert "access_log off;" in conf, "nginx.conf: no 'access_log off;' to replace"
open(p, "w").write(conf.replace("access_log off;", LOG_FORMAT + "\n    access_log access.log bench;"))
EOF
}

snapshot_src() {  # sets SKITTER_SRC: a frozen copy of src/skitter in $rdir (BENCH_SNAPSHOT=0: src/)
  # Skitter's code, frozen for the whole run: src/ is an editable install that other work may
  # change during the ~20 minutes (BENCH_SNAPSHOT=0 runs the live working tree instead).
  SKITTER_SRC=$(pwd)/src
  if [ "${BENCH_SNAPSHOT:-1}" = 1 ]; then
    mkdir -p "$rdir/skitter-src"
    # (with mypyc's build of the hot path: the modules' .so files and their shared library)
    (cd src && tar --exclude=__pycache__ -cf - skitter $(ls skitter_native__mypyc*.so 2>/dev/null)) \
      | tar -C "$rdir/skitter-src" -xf -
    SKITTER_SRC=$(cd "$rdir/skitter-src" && pwd)
  fi
  # byte-code of the snapshot (PYTHONDONTWRITEBYTECODE=1 would have every start compile it)
  "$SKITTER_PY" -m compileall -q -j0 "$SKITTER_SRC/skitter" || die "cannot compile $SKITTER_SRC"
  got=$(env PYTHONPATH="$SKITTER_SRC" "$SKITTER_PY" -c 'import skitter; print(skitter.__file__)')
  [ "$got" = "$SKITTER_SRC/skitter/__init__.py" ] || die "skitter imports from $got, not $SKITTER_SRC"
  # mypyc's build of the hot path in use (True), or its .py files (SKITTER_PURE=1, no compiler)
  SKITTER_NATIVE=$(env PYTHONPATH="$SKITTER_SRC" "$SKITTER_PY" -c 'import skitter._native as n; print(n.active())')
  export SKITTER_NATIVE
}

measure() {  # TAG LABEL CMD...: one run measured by measure.py, load read right after it
  local tag=$1 label=$2; shift 2
  local rc=0 off0 off1
  off0=$(stat -c %s "$SITE/access.log" 2>/dev/null || echo 0)
  run python3 "$SHARED/measure.py" --site "$SITE" --out "$rdir/$tag.json" --label "$label" -- "$@" \
    > "$rdir/$tag.log" 2>&1 || rc=$?
  cut -d' ' -f1-3 /proc/loadavg > "$rdir/$tag.loadavg"
  # nginx writes a request's line when it ends: all of this run's requests are in by now
  off1=$(stat -c %s "$SITE/access.log" 2>/dev/null || echo 0)
  tail -c "+$((off0 + 1))" "$SITE/access.log" 2>/dev/null | head -c "$((off1 - off0))" > "$rdir/$tag.access" || true
  [ "$rc" = 0 ] || { tail -n 20 "$rdir/$tag.log" >&2; die "measure.py failed for $tag"; }
  echo "$tag: $(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("pages %s, wall %.1f s, %s pages/s, CPU %.1f s, peak RSS %s MB, exit %s, load %.2f"
      % (r.get("pages"), r["wall_s"], r.get("pages_per_s"), r["cpu_s"], r["peak_rss_mb"],
         r.get("exit"), r["loadavg_before"]))' "$rdir/$tag.json")"
}
