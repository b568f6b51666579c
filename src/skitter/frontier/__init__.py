"""The frontier: queued requests, URL-seen deduplication, politeness and leases.

Backends: :class:`MemoryFrontier` (tests, small crawls) and :class:`SqliteFrontier`
(resumable, crash-safe). Both implement :class:`Frontier`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skitter.frontier.base import AddResult, Frontier, FrontierCounts
from skitter.frontier.memory import MemoryFrontier

if TYPE_CHECKING:
    from skitter.frontier.sqlite import SqliteFrontier

__all__ = ["AddResult", "Frontier", "FrontierCounts", "MemoryFrontier", "SqliteFrontier"]


def __getattr__(name: str) -> Any:
    """:class:`SqliteFrontier`, imported on first use (PEP 562): a process that keeps no
    frontier (the coordinator of ``--processes``) does not load SQLite and the Bloom filter."""
    if name == "SqliteFrontier":
        from skitter.frontier.sqlite import SqliteFrontier

        return SqliteFrontier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
