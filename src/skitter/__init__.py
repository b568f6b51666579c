"""Skitter: a polite, fast, resumable web crawler.

Library use::

    from skitter import Crawler, CrawlSettings

    settings = CrawlSettings(out_dir="out", seeds=("https://example.org/",))
    async with Crawler.from_settings(settings) as crawler:
        stats = await crawler.run()

The names below are loaded on first use, so ``import skitter`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skitter import _native

_native.install()  # compiled hot path, or its .py files when edited since the build

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "CrawlHooks",
    "CrawlSettings",
    "Crawler",
    "FetchSettings",
    "HookError",
    "PolitenessSettings",
    "ScopeSettings",
    "StatsSnapshot",
    "__version__",
]

_LAZY = {
    "ConfigError": "skitter.errors",
    "HookError": "skitter.errors",
    "CrawlHooks": "skitter.events",
    "CrawlSettings": "skitter.settings",
    "Crawler": "skitter.crawler",
    "FetchSettings": "skitter.settings",
    "PolitenessSettings": "skitter.settings",
    "ScopeSettings": "skitter.settings",
    "StatsSnapshot": "skitter.stats",
}

if TYPE_CHECKING:
    from skitter.crawler import Crawler
    from skitter.errors import ConfigError, HookError
    from skitter.events import CrawlHooks
    from skitter.settings import CrawlSettings, FetchSettings, PolitenessSettings, ScopeSettings
    from skitter.stats import StatsSnapshot


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'skitter' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
