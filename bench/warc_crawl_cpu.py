"""CPU of WARC writing inside a real crawl: one ``--processes 1`` crawl of a served synthweb,
run in this process with ``WarcWriter.write_exchange`` timed (its thread's CPU time,
:func:`time.thread_time`, which a busy machine inflates far less than CPU seconds of a whole
run), the CDXJ hook included.

    python bench/warc_crawl_cpu.py --site SITE --out DIR [--concurrency 128] [-- crawl flags]

SITE and DIR as for ``bench/skitter_bench.py`` (DIR must not exist). Prints one JSON line:
exchanges written, µs of CPU per exchange in ``write_exchange``, the crawl's CPU seconds
(user + system, the whole process) and WARC writing's share of them, the load average.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from skitter_bench import site_args  # bench/skitter_bench.py, beside this script

from skitter.cli import main as skitter_main
from skitter.export.warc import WarcWriter


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--site", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="-- then extra skitter crawl flags")
    a = ap.parse_args()
    if a.out.exists():
        print(f"warc_crawl_cpu: {a.out} exists; the benchmark wants a fresh crawl", file=sys.stderr)
        return 2
    extra = a.extra[1:] if a.extra[:1] == ["--"] else a.extra
    _, seed_args = site_args(a.site, a.out)
    spent = [0.0, 0]
    write = WarcWriter.write_exchange

    def timed(self: WarcWriter, *args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        try:
            return write(self, *args, **kwargs)
        finally:
            spent[0] += time.thread_time() - t0
            spent[1] += 1

    WarcWriter.write_exchange = timed  # type: ignore[method-assign]
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    t0 = os.times()
    rc = skitter_main(
        [
            "crawl", *seed_args, "--out", str(a.out), "--delay", "0",
            "--concurrency", str(a.concurrency), "--ip-concurrency", str(a.concurrency),
            "--processes", "1", "--quiet", *extra,
        ]
    )  # fmt: skip
    t1 = os.times()
    cpu = t1.user + t1.system - t0.user - t0.system
    print(
        json.dumps(
            {
                "exit": rc,
                "exchanges": spent[1],
                "warc_us_per_exchange": round(spent[0] / max(1, spent[1]) * 1e6, 1),
                "warc_cpu_s": round(spent[0], 2),
                "crawl_cpu_s": round(cpu, 2),
                "warc_share": round(spent[0] / cpu, 3) if cpu else None,
                "loadavg": [load0, Path("/proc/loadavg").read_text().split()[:3]],
            }
        )
    )
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
