"""The public names of the package (sorted __all__, each importable)."""

from __future__ import annotations

import skitter


def test_all_is_sorted_and_importable() -> None:
    names = [n for n in skitter.__all__ if n != "__version__"]
    assert names == sorted(names)
    for name in skitter.__all__:
        assert getattr(skitter, name) is not None
    from skitter import Crawler, CrawlSettings

    assert Crawler.__module__ == "skitter.crawler"
    assert CrawlSettings.__module__ == "skitter.settings"
