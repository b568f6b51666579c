"""Skitter: a polite, fast, resumable web crawler.

Library use::

    from skitter import Crawler, CrawlSettings

    async with Crawler.from_settings(CrawlSettings(out_dir="out", seeds=("https://x.test/",))) as c:
        stats = await c.run()
"""

from __future__ import annotations

__version__ = "0.1.0"
