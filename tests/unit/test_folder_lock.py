"""The output folder's lock (skitter.folder_lock): held while its process lives, released by
the kernel when it is killed (kill -9 too), not kept by forked children, and a refused
check changes nothing in the folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from skitter.errors import StateError
from skitter.folder_lock import LOCK_FILE, check_free, lock_folder

HOLD = """
import sys
from pathlib import Path
from skitter.folder_lock import lock_folder
lock_folder(Path(sys.argv[1]), "crawl")
print("held", flush=True)
sys.stdin.read()  # until the test closes it (or kills this process)
"""


def test_kill_9_releases_the_lock_and_a_refusal_changes_nothing(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        before = (tmp_path / LOCK_FILE).read_bytes()
        assert before == f"{holder.pid} crawl\n".encode()
        for attempt in (lambda: check_free(tmp_path), lambda: lock_folder(tmp_path, "merge")):
            with pytest.raises(StateError) as err:
                attempt()
            assert f"{tmp_path} is in use by a running skitter crawl (pid {holder.pid})" in str(
                err.value
            )
        assert (tmp_path / LOCK_FILE).read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_FILE]
        holder.send_signal(signal.SIGKILL)
        assert holder.wait(60) == -signal.SIGKILL
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None:
                pipe.close()
    check_free(tmp_path)  # the kernel released it with the process
    with lock_folder(tmp_path) as lock:
        assert (tmp_path / LOCK_FILE).read_bytes() == f"{os.getpid()} crawl\n".encode()
        assert lock.folder == tmp_path


def test_a_forked_child_does_not_keep_the_lock(tmp_path: Path) -> None:
    lock = lock_folder(tmp_path)
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its copy was closed at the fork; it waits for the parent's word
        os.write(ready_w, b"r")
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"r"  # the child runs (past its at-fork hook)
        lock.release()
        check_free(tmp_path)  # free although the child still lives
        with lock_folder(tmp_path):
            pass
    finally:
        os.write(w, b"x")
        os.close(w)
        os.close(ready_r)
        os.waitpid(pid, 0)


def test_a_missing_folder_or_lock_file_is_free(tmp_path: Path) -> None:
    check_free(tmp_path / "absent")
    check_free(tmp_path)
    assert list(tmp_path.iterdir()) == []  # checking created nothing
