"""The frontier: queued requests, URL-seen deduplication, politeness and leases.

Backends: :class:`MemoryFrontier` (tests, small crawls) and :class:`SqliteFrontier`
(resumable, crash-safe). Both implement :class:`Frontier`.
"""

from __future__ import annotations

from skitter.frontier.base import AddResult, Frontier, FrontierCounts
from skitter.frontier.memory import MemoryFrontier
from skitter.frontier.sqlite import SqliteFrontier

__all__ = ["AddResult", "Frontier", "FrontierCounts", "MemoryFrontier", "SqliteFrontier"]
