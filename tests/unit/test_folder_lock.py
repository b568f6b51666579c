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
from skitter.folder_lock import LOCK_FILE, check_free, held_here, lock_folder

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


CHECK = """
import sys
from pathlib import Path
from skitter.errors import StateError
from skitter.folder_lock import check_free
try:
    check_free(Path(sys.argv[1]))
except StateError as exc:
    print(exc)
else:
    print("free")
"""


def seen_from_another_process(folder: Path) -> str:
    """What another process's :func:`check_free` says of ``folder``: "free" or its error."""
    r = subprocess.run(
        [sys.executable, "-c", CHECK, str(folder)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_the_lock_is_reentrant_within_a_process_and_counted(tmp_path: Path) -> None:
    busy = f"{tmp_path} is in use by a running skitter crawl (pid {os.getpid()})"
    first = lock_folder(tmp_path)
    # the same folder again, by another spelling of its path: shared, not refused
    second = lock_folder(tmp_path / "." / ".." / tmp_path.name, "merge")
    check_free(tmp_path)  # this process holds it: not "in use"
    assert (tmp_path / LOCK_FILE).read_bytes() == f"{os.getpid()} crawl\n".encode()
    first.release()
    first.release()  # (twice: the same hold, released once)
    assert seen_from_another_process(tmp_path).startswith(busy)  # one holder left
    second.release()
    assert seen_from_another_process(tmp_path) == "free"
    with lock_folder(tmp_path) as again:  # taken afresh
        assert again.folder == tmp_path
        assert seen_from_another_process(tmp_path).startswith(busy)
    assert seen_from_another_process(tmp_path) == "free"


def test_a_forked_child_drops_a_shared_lock_and_its_releases_do_nothing(tmp_path: Path) -> None:
    first, second = lock_folder(tmp_path), lock_folder(tmp_path)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: it holds nothing, and releasing its copies closes nothing
        os.close(r)
        code = 0
        try:
            spare = os.open(os.devnull, os.O_RDONLY)  # (may reuse the closed lock's number)
            first.release()
            second.release()
            os.fstat(spare)  # still open
            assert not held_here(tmp_path)
        except BaseException:
            code = 1
        os.write(w, b"%d" % code)
        os._exit(code)
    os.close(w)
    try:
        assert os.read(r, 1) == b"0"
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    busy = f"{tmp_path} is in use by a running skitter crawl (pid {os.getpid()})"
    assert seen_from_another_process(tmp_path).startswith(busy)  # the parent holds it still
    first.release()
    assert seen_from_another_process(tmp_path).startswith(busy)
    second.release()
    assert seen_from_another_process(tmp_path) == "free"
