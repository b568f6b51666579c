"""anchors.jsonl: the fragment targets (``id`` / ``<a name>``) of every HTML page a check
crawls, written as the crawl goes and read by the report (fragment checks)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from skitter.export.base import LineJournal
from skitter.export.pages import read_records

__all__ = ["ANCHORS_FILE", "AnchorsWriter", "read_anchors"]

#: Fragment targets of every HTML page: one JSON line ``{"url": ..., "ids": [...]}`` each.
ANCHORS_FILE = "anchors.jsonl"


class AnchorsWriter(LineJournal):
    """Appends anchors.jsonl lines: ``{"url": page URL, "ids": [sorted fragment targets]}``.

    One ``os.write`` per page, crash-safe like the other journals (a partial last line is
    cut on open). A page fetched twice (resume) has two lines; readers keep the last.

    Raises:
        OSError: the file cannot be opened or repaired.
    """

    def write(self, url: str, ids: Iterable[str]) -> int:
        """Append the line of one page; returns the bytes written."""
        line = json.dumps({"url": url, "ids": sorted(ids)}, ensure_ascii=False)
        return self._file.write(line.encode("utf-8", "surrogatepass") + b"\n")


def read_anchors(
    path: str | os.PathLike[str], wanted: set[str] | None = None
) -> dict[str, frozenset[str]]:
    """Page URL -> its fragment targets, from an anchors.jsonl file (missing file: empty).

    Args:
        path: the file.
        wanted: keep only these page URLs (None = all).
    """
    out: dict[str, frozenset[str]] = {}
    if not os.path.exists(path):
        return out
    for r in read_records(path):
        url = r.get("url")
        if isinstance(url, str) and (wanted is None or url in wanted):
            out[url] = frozenset(str(i) for i in r.get("ids") or ())
    return out
