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


ORPHAN = r"""
import os, select, signal, sys
from skitter.process_launch import adopted

result_r, result_w = os.pipe()
go_r, go_w = os.pipe()
coordinator = os.fork()
if coordinator == 0:  # the coordinator: forks a launcher, which forks a crawler and exits
    me = os.getpid()
    launcher = os.fork()
    if launcher == 0:
        lr, lw = os.pipe()
        if os.fork() == 0:  # the crawler process
            os.close(lw)
            os.write(result_w, b"%d\n" % os.getpid())
            os.read(go_r, 1)  # once the launcher has exited and the coordinator is reaped
            os.write(result_w, b"%d\n" % adopted(me, lr))
            os._exit(0)
        os._exit(0)
    os.waitpid(launcher, 0)
    os._exit(0)  # the coordinator dies before adopting anyone: the crawler goes to init
os.waitpid(coordinator, 0)
got = b""
while got.count(b"\n") < 1:
    got += os.read(result_r, 100)
crawler = int(got.split()[0])
os.write(go_w, b"x")
while got.count(b"\n") < 2:
    if not select.select([result_r], [], [], 20)[0]:
        os.kill(crawler, signal.SIGKILL)  # (it waits for init to exit: the test fails)
        print("hung")
        sys.exit(1)
    got += os.read(result_r, 100)
print(got.split()[1].decode())
"""


def test_a_crawler_whose_coordinator_died_during_launch_does_not_wait_for_init() -> None:
    """Regression: the coordinator killed in a crawl's first ~0.1-0.3 s (launcher already
    gone) left a crawler process adopted by init waiting forever on init's pidfd (holding
    pages.jsonl and the caller's stdout: `skitter crawl ... | tee` hung). It must see the
    coordinator gone and return False (its caller exits)."""
    r = subprocess.run(
        [sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=60
    )
    assert (r.returncode, r.stdout.strip()) == (0, "0"), r.stdout + r.stderr
