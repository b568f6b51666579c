"""Fixtures of the cases.md tests: a raw-bytes server (``raw``); ``site`` is in tests/conftest."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.integration.rawserver import RawServer


@pytest.fixture
async def raw() -> AsyncIterator[RawServer]:
    """A started :class:`RawServer` on 127.0.0.1 (virtual hosts by Host header)."""
    async with RawServer() as server:
        yield server
