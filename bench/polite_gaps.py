"""Per-host gaps between consecutive requests, from the nginx access log of a polite run.

    python3 bench/polite_gaps.py SITE/access.log --delay 1 [--tolerance 0.005]

The log lines are written by the format bench/run_bench.sh adds to the site's nginx.conf
(synthweb's own nginx.conf has `access_log off`, so it logs no request at all):

    $msec $request_time $host $status "$request"

$msec is when nginx finished the response (ms resolution) and $request_time how long it took
from the first request byte read, so a request started at msec - request_time. Skitter's
--delay runs from the end of one request to a host to the start of the next, so for each pair
of consecutive requests to a host:

    gap = start(next) - end(previous) = (msec_next - request_time_next) - msec_previous

must be >= delay (minus --tolerance for the ms rounding of the two stamps). A negative gap means
two requests to the host overlapped. Also printed: start-to-start and end-to-end gaps (the raw
difference of log stamps; end-to-end >= delay + the next request's time). robots.txt requests
count: they go to the host like any other. Exits 1 if a host's minimum gap is below the bound.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import defaultdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--tolerance", type=float, default=0.005)
    a = ap.parse_args()
    reqs: dict[str, list[tuple[float, float, str]]] = defaultdict(list)  # host: (start, end, req)
    with open(a.log) as f:
        lines = f.read().splitlines()
    for line in lines:
        parts = line.split(" ", 4)
        if len(parts) < 5:
            continue
        end, rt, host = float(parts[0]), float(parts[1]), parts[2]
        request = parts[4].split('" "')[0]  # then the content type and body size
        reqs[host].append((end - rt, end, request.strip().strip('"')))
    if not reqs:
        print(f"no requests in {a.log}", file=sys.stderr)
        return 1
    bound = a.delay - a.tolerance
    print(
        f"| host | requests | min gap end→start s | min start→start s | min end→end s "
        f"| max request time s | pair with the min gap | ≥ {bound:g} s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    worst, bad = float("inf"), 0
    for host in sorted(reqs):
        rs = sorted(reqs[host])
        if len(rs) < 2:
            print(f"| {host} | {len(rs)} | – | – | – | – | – | – |")
            continue
        gaps = [(n[0] - p[1], p[2], n[2]) for p, n in itertools.pairwise(rs)]
        g, preq, nreq = min(gaps)
        s2s = min(n[0] - p[0] for p, n in itertools.pairwise(rs))
        e2e = min(n[1] - p[1] for p, n in itertools.pairwise(rs))
        maxrt = max(r[1] - r[0] for r in rs)
        ok = g >= bound
        bad += not ok
        worst = min(worst, g)
        print(
            f"| {host} | {len(rs)} | {g:.3f} | {s2s:.3f} | {e2e:.3f} | {maxrt:.3f} "
            f"| `{preq}` → `{nreq}` | {'yes' if ok else 'NO'} |"
        )
    print()
    verdict = "PASS" if not bad else f"FAIL ({bad} hosts below)"
    print(f"min gap over all hosts: {worst:.3f} s (bound {bound:g} s): {verdict}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
