"""Shared fixtures: paths to ../shared material, a loopback test web, Redis servers, a count of
os.write calls."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.site import Site
from tests.redis_server import RedisServer

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    """A started multi-host loopback :class:`Site`."""
    s = Site()
    await s.start()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One ``redis-server`` for the session (loopback, AOF on); tests use distinct crawl ids."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_server_own(tmp_path: Path) -> Iterator[RedisServer]:
    """A ``redis-server`` of this test alone (fault tests kill and restart it)."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def count_os_writes(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[int]]:
    """``start()``: from then on until the test ends, every ``os.write`` also appends its size
    (bytes) to the list ``start`` returns (the one-write-per-record rules of the writers)."""

    def start() -> list[int]:
        calls: list[int] = []
        real_write = os.write

        def counting_write(fd: int, data: bytes | memoryview) -> int:
            calls.append(len(data))
            return real_write(fd, data)

        monkeypatch.setattr(os, "write", counting_write)
        return calls

    return start
