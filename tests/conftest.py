"""Shared fixtures: paths to ../shared material and a loopback test web."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
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
