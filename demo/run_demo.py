"""`make demo`: serve the bundled site on loopback, crawl it with Skitter, show the output.

Only 127.0.0.1 is contacted: the site's name is mapped with --resolve and --resolve-only
stops any other DNS query.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from serve import DemoServer

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "demo-out"
HOST = "demo.skitter.test"


def main() -> int:
    try:
        with DemoServer() as port:
            if OUT.exists():
                shutil.rmtree(OUT)
            cmd = [
                sys.executable, "-m", "skitter", "crawl", f"http://{HOST}:{port}/",
                "--resolve", f"{HOST}:{port}:127.0.0.1", "--resolve-only",
                "--delay", "0.05", "--out", str(OUT),
            ]  # fmt: skip
            print("$ skitter " + " ".join(cmd[3:]), flush=True)
            rc = subprocess.call(cmd)
    except RuntimeError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1
    if rc != 0:
        return rc
    report = json.loads((OUT / "report.json").read_text())
    t = report["totals"]
    print()
    print(f"statuses: {t['by_status']}   link decisions: {t['by_decision']}")
    print(f"robots.txt kept out: {t['robots_disallowed']} URL(s)")
    print(f"the output went to {OUT}/:")
    for p in sorted(OUT.iterdir()):
        print(f"  {p.name:40s} {p.stat().st_size:>9,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
