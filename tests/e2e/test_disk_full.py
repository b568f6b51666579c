"""Fault 1 of issue 9: an output that cannot be written (disk full, file too large...) ends
the crawl with one line naming the file and the cause, exit 1 and the resume command; no
stray temporary file; nothing recorded is lost: a resume with room finishes the crawl.

Two ways to fill the disk without privileges, both always run (never skipped):
``tmpfs``: a 256 KiB tmpfs in a user namespace (``unshare -Urm``), ENOSPC / SQLITE_FULL;
``fsize``: RLIMIT_FSIZE (an injected fault: EFBIG once a file reaches 512 KiB).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import resource
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_cli import arun_cli
from tests.integration.site import Site, html, links_page

pytestmark = pytest.mark.slow

H = "full.example.test"
PAGES = 40


def _serve(site: Site) -> None:
    rnd = random.Random(9)
    site.route(H, "/", links_page(*[f"/p{i}" for i in range(PAGES)]))
    for i in range(PAGES):
        noise = base64.b64encode(rnd.randbytes(20_000)).decode()  # incompressible
        site.route(H, f"/p{i}", html(f"<p>{noise}</p>"))


def _limit_fsize() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, 512 * 1024))


def _have_userns_tmpfs() -> bool:
    r = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
        timeout=30,
    )
    return r.returncode == 0


@pytest.mark.parametrize(
    "command,processes", [("crawl", "1"), ("crawl", "2"), ("fetch", "1")]
)
@pytest.mark.parametrize("how", ["tmpfs", "fsize"])
async def test_disk_full_one_line_exit_1_resumable(
    site: Site, tmp_path: Path, how: str, command: str, processes: str
) -> None:
    _serve(site)
    res = ["--resolve", f"{H}:{site.port}:127.0.0.1", "--resolve-only", "--delay", "0"]
    if command == "crawl":
        seeds = [f"http://{H}:{site.port}/", "--processes", processes]
    else:  # fetch: the same pages from a list
        urls = tmp_path / "urls.txt"
        urls.write_text("".join(f"http://{H}:{site.port}/p{i}\n" for i in range(PAGES)))
        seeds = ["--urls", str(urls)]
    crawl = [sys.executable, "-m", "skitter", command, *seeds, *res]
    kept = tmp_path / "kept"
    if how == "tmpfs":
        if not shutil.which("unshare") or not _have_userns_tmpfs():
            pytest.fail("unshare -Urm with a tmpfs is not available (user namespaces off?)")
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        out = mnt / "out"
        # inside the namespace: mount, crawl, list the folder, copy it out, report rc
        script = (
            f"mount -t tmpfs -o size=256k tmpfs {mnt} && "
            f"{shlex.join([*crawl, '--out', str(out)])}; rc=$?; "
            f"ls -a {out} > {tmp_path / 'listing'}; cp -a {out} {kept}; exit $rc"
        )
        proc = await asyncio.create_subprocess_exec(
            "unshare", "-Urm", "sh", "-c", script,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    else:
        out = kept
        proc = await asyncio.create_subprocess_exec(
            *crawl, "--out", str(out),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            preexec_fn=_limit_fsize,
        )  # fmt: skip
    _stdout_b, stderr_b = await asyncio.wait_for(proc.communicate(), 120)
    err = stderr_b.decode()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    (line,) = lines
    cause = "No space left on device|database or disk is full" if how == "tmpfs" else "too large"
    assert any(c in line for c in cause.split("|")), line
    assert f"cannot write {out}/" in line, line  # names the file
    assert line.endswith(f"resume with: skitter {command} --resume --out {out}"), line
    listing = (tmp_path / "listing").read_text().split() if how == "tmpfs" else os.listdir(kept)
    assert not [n for n in listing if n.endswith(".tmp")], listing
    # nothing recorded is lost: a resume with room (the copy) finishes the crawl
    rc, _, err = await arun_cli(command, "--resume", "--out", str(kept), timeout=120)
    assert rc == 0, err
    urls = [json.loads(x)["url"] for x in (kept / "pages.jsonl").read_text().splitlines()]
    pages = [f"http://{H}:{site.port}/p{i}" for i in range(PAGES)]
    seed = [f"http://{H}:{site.port}/"] if command == "crawl" else []
    assert sorted(urls) == sorted([*seed, *pages])
    report = json.loads((kept / "report.json").read_text())
    n = len(seed) + PAGES
    assert report["totals"]["records"] == n and report["totals"]["ok"] == n
