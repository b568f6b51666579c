"""Shared fixtures: paths to ../shared material and a loopback test web."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.site import Site

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
