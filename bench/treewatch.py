"""Run one benchmark command; add its process tree's peak memory and its output size.

    python3 bench/treewatch.py [--cwd DIR] [--output PATH]... -- CMD [ARGS...]

A wrapper between ../shared/bench/measure.py and a crawler, so that every crawler of `make bench`
and `make bench-site` is measured the same way, whatever it is made of (one Python process,
Skitter's coordinator and its forked crawler processes, node with a Rust thread pool, wget):

- CMD runs in its own working directory (--cwd, created if missing; default: the current one),
  so that whatever a peer writes there (Crawlee's ./storage, wget's mirror) is its output.
- While it runs, /proc is sampled every 0.2 s over CMD and all its descendants
  (/proc/PID/task/TID/children): ``peak_rss_mb`` is the largest SUM of their resident sets
  (pages shared by forked processes are counted once per process: it over-states a forked
  tree), ``peak_pss_mb`` the largest sum of their proportional set sizes
  (/proc/PID/smaps_rollup: shared pages split between the sharers, so the tree's real
  footprint), ``largest_process_rss_mb`` the largest single process (GNU time's figure),
  ``peak_rss_parts_mb`` each process's resident set in the sample of the peak (tree order:
  CMD first, then each process before its children). A spike shorter than 0.2 s can be missed.
- Afterwards ``output_bytes`` is the total size of the regular files under the --output paths
  (default: the --cwd folder; none when neither is given), ``output_files`` their number.

CMD gets $BENCH_OUT pointing at a file of its own; the JSON object it writes there (e.g.
{"pages": N}) is merged with the figures above into the $BENCH_OUT this wrapper was given
(measure.py merges that into its record, so these override GNU time's peak_rss_mb). Exits
with CMD's exit code (128 + N if a signal N ended it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (from /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            kids: list[int] = []
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    kids.extend(int(c) for c in fh.read().split())
            todo.extend(reversed(kids))  # depth first, children in order
        except OSError:
            continue
    return out


def rss_kb(pid: int) -> int:
    """Resident set of ``pid`` in kB (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE_KB
    except (OSError, ValueError, IndexError):
        return 0


def pss_kb(pid: int) -> int:
    """Proportional set size of ``pid`` in kB (0 if it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class Sampler:
    """Samples the memory of a process tree every ``interval`` seconds in a thread."""

    def __init__(self, pid: int | list[int], interval: float = 0.2) -> None:
        """``pid``: one root, or a list of roots (processes started one after another: the
        list may grow while sampling; each sample sums the trees of all of them)."""
        self.pid, self.interval = pid, interval
        self.peak_rss = self.peak_pss = self.peak_one = self.peak_procs = 0
        self.peak_parts: list[int] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        roots = self.pid if isinstance(self.pid, list) else [self.pid]
        pids = [p for r in list(roots) for p in tree(r)]
        sizes = [rss_kb(p) for p in pids]
        if sum(sizes) > self.peak_rss:
            self.peak_rss, self.peak_parts = sum(sizes), sizes
        self.peak_one = max(self.peak_one, max(sizes, default=0))
        self.peak_pss = max(self.peak_pss, sum(pss_kb(p) for p in pids))
        self.peak_procs = max(self.peak_procs, len(pids))

    def _run(self) -> None:
        self._sample()
        while not self._done.wait(self.interval):
            self._sample()

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def figures(self) -> dict[str, Any]:
        """The peaks, in MB (2^20 bytes)."""
        return dict(
            peak_rss_mb=round(self.peak_rss / 1024, 1),
            peak_pss_mb=round(self.peak_pss / 1024, 1),
            largest_process_rss_mb=round(self.peak_one / 1024, 1),
            peak_processes=self.peak_procs,
            peak_rss_parts_mb=[round(k / 1024, 1) for k in self.peak_parts],
        )


def run_sampled(
    cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """Run ``cmd``; returns (exit code, Sampler.figures()). SIGINT/SIGTERM to this process
    are passed on to the child, which is waited for."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env)

    def forward(sig: int, _frame: object) -> None:
        proc.send_signal(sig)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with Sampler(proc.pid) as s:
            rc = proc.wait()
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
    return (128 - rc if rc < 0 else rc), s.figures()


def output_size(paths: list[Path]) -> tuple[int, int]:
    """(bytes, files): the regular files under ``paths`` (files or folders; missing ones: 0)."""
    total = files = 0
    for p in paths:
        if p.is_file():
            total, files = total + p.stat().st_size, files + 1
            continue
        for root, _dirs, names in os.walk(p):
            for n in names:
                f = Path(root, n)
                if f.is_file() and not f.is_symlink():
                    total, files = total + f.stat().st_size, files + 1
    return total, files


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--cwd", type=Path, help="run CMD here (created if missing)")
    ap.add_argument(
        "--output",
        type=Path,
        action="append",
        default=[],
        help="a file or folder CMD writes (repeatable; default: --cwd)",
    )
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command after --")
    if a.cwd:
        a.cwd.mkdir(parents=True, exist_ok=True)
    outer = os.environ.get("BENCH_OUT")
    # absolute: CMD runs in --cwd, and measure.py's $BENCH_OUT may be relative
    inner = Path((outer or str(a.cwd or ".") + "/bench") + ".inner").resolve()
    inner.unlink(missing_ok=True)
    rc, figures = run_sampled(cmd, a.cwd, dict(os.environ, BENCH_OUT=str(inner)))
    res: dict[str, Any] = {}
    if inner.exists():
        try:
            res.update(json.loads(inner.read_text()))
        except ValueError:
            print(f"treewatch: {inner} is not JSON", file=sys.stderr)
        inner.unlink()
    res.update(figures)
    outputs = a.output or ([a.cwd] if a.cwd else [])
    if outputs:
        res["output_bytes"], res["output_files"] = output_size(outputs)
    res["exit_code"] = rc
    print("treewatch: " + json.dumps(figures | {k: res.get(k) for k in ("output_bytes",)}))
    if outer:
        Path(outer).write_text(json.dumps(res))
    return rc


if __name__ == "__main__":
    sys.exit(main())
