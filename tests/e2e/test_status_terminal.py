"""The terminal display: drawn on stderr when stderr is a terminal (a pty here), held at a
point where the crawl cannot move until the panel is seen; nothing with --quiet or a pipe."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.e2e.test_status_live import gated_site  # noqa: F401 (fixture)
from tests.integration.site import Site

pytestmark = pytest.mark.slow


async def run_on_pty(
    site: Site, out: Path, gate: asyncio.Event, want: bytes | None, *extra: str
) -> bytes:
    """Run a crawl with stderr on a pty; once ``want`` shows (or at once when None) open
    ``gate``; returns everything written to the pty."""
    master, slave = os.openpty()
    resolve = [f"--resolve={h}:{site.port}:127.0.0.1" for h in ("a.test", "b.test")]
    env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skitter", "crawl", site.url("a.test", "/"), "--out", str(out),
        *resolve, "--resolve-only", "--delay", "0", "--retries", "0", "--processes", "1",
        "--scope", "any", *extra,
        stdout=asyncio.subprocess.DEVNULL, stderr=slave, env=env,
    )  # fmt: skip
    os.close(slave)
    loop = asyncio.get_running_loop()
    seen = bytearray()
    got = asyncio.Event()

    def readable() -> None:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed its end
            data = b""
        if not data:
            loop.remove_reader(master)
            got.set()
            return
        seen.extend(data)
        if want is not None and want in seen:
            got.set()

    loop.add_reader(master, readable)
    try:
        if want is not None:
            await asyncio.wait_for(got.wait(), 60)
        gate.set()
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        loop.remove_reader(master)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        os.close(master)
    return bytes(seen)


async def test_panel_on_a_terminal(
    gated_site: tuple[Site, asyncio.Event, asyncio.Event],  # noqa: F811
    tmp_path: Path,
) -> None:
    site, gate_a, gate_b = gated_site
    gate_b.set()
    seen = await run_on_pty(site, tmp_path / "out", gate_a, b"slowest hosts")
    assert b"fetched" in seen and b"pages/s" in seen


async def test_bar_with_max_pages(
    gated_site: tuple[Site, asyncio.Event, asyncio.Event],  # noqa: F811
    tmp_path: Path,
) -> None:
    site, gate_a, gate_b = gated_site
    gate_b.set()
    seen = await run_on_pty(site, tmp_path / "out", gate_a, b"/4", "--max-pages", "4")
    assert b"slowest hosts" not in seen


async def test_nothing_with_quiet(
    gated_site: tuple[Site, asyncio.Event, asyncio.Event],  # noqa: F811
    tmp_path: Path,
) -> None:
    site, gate_a, gate_b = gated_site
    gate_b.set()
    seen = await run_on_pty(site, tmp_path / "out", gate_a, None, "--quiet")
    assert seen == b""
