"""skitter.process_launch: the crawler processes of --processes are started by a launcher that
imports their modules, and are adopted by the coordinator (a child subreaper)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import json, os, signal, sys, multiprocessing
from multiprocessing.connection import wait
from skitter.process_launch import adopted, launch, subreaper

out = sys.argv[1]
coordinator = os.getpid()

def prepare():
    import skitter.sitemap_reader  # noqa: F401  (a module nobody else imports here)

def body(k, report, launcher_fd):
    ok = adopted(coordinator, launcher_fd)
    with open(report, "w") as fh:
        json.dump({"adopted": ok, "ppid": os.getppid(),
                   "prepared": "skitter.sitemap_reader" in sys.modules}, fh)
    if k == 0:
        sys.exit(3)
    os.kill(os.getpid(), signal.SIGKILL)

ctx = multiprocessing.get_context("fork")
with subreaper():
    kids = launch(ctx, 2, prepare, body, lambda k: (k, f"{out}.{k}"))
    ended = set()
    while len(ended) < len(kids):  # bounded: both end at once
        for k in wait([c.sentinel for c in kids], timeout=60):
            ended.add(k)
    for c in kids:
        c.join()
        assert not c.is_alive()
print(json.dumps({"codes": [c.exitcode for c in kids], "pid": coordinator,
                  "prepared": "skitter.sitemap_reader" in sys.modules}))
"""


def test_launched_processes_are_adopted_and_share_the_launchers_imports(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "r")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    res = json.loads(done.stdout.strip().splitlines()[-1])
    assert res["codes"] == [3, -9]  # exit codes and signals, read by the coordinator
    assert res["prepared"] is False  # the launcher imported it, not the coordinator
    for k in (0, 1):
        child = json.loads((tmp_path / f"r.{k}").read_text())
        assert child == {"adopted": True, "ppid": res["pid"], "prepared": True}
