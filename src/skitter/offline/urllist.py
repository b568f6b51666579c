"""URL lists for ``skitter fetch`` and the levels of ``skitter crawl --levels``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TextIO

from skitter.errors import ConfigError
from skitter.seeds import list_line
from skitter.urls import canonicalize

__all__ = ["read_url_list", "write_url_list"]


def read_url_list(f: TextIO, name: str) -> list[str]:
    """The URLs of a list, one a line (blank lines and ``#`` comments skipped,
    :func:`skitter.seeds.list_line`), in order,
    duplicates (same canonical URL) dropped.

    Raises:
        ConfigError: a line is not an absolute http(s) URL (message names the line), the
            list is empty, or it is not UTF-8 text.
    """
    try:
        return _read_url_list(f, name)
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: not UTF-8 text (a URL list is one URL a line)") from None


def _read_url_list(f: TextIO, name: str) -> list[str]:
    urls: list[str] = []
    seen: set[str] = set()
    for lineno, line in enumerate(f, 1):
        text = list_line(line)
        if not text:
            continue
        canon = canonicalize(text)
        if canon is None:
            raise ConfigError(f"{name}:{lineno}: not an absolute http(s) URL: {text[:200]!r}")
        if canon not in seen:
            seen.add(canon)
            urls.append(text)
    if not urls:
        raise ConfigError(f"{name}: no URLs")
    return urls


def write_url_list(path: str, urls: Iterable[str]) -> int:
    """Write ``urls`` one a line to ``path`` atomically (temp file, fsync, rename).

    Returns:
        The number of URLs written.
    """
    tmp = path + ".tmp"
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for u in urls:
            f.write(u + "\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return n
