"""The end of a finished ``--processes`` crawl: the merged files become the only copy.

While a sharded crawl runs, each process's journals (``OUT/shards/K/pages.jsonl`` and
``links.tsv``) are copied into ``OUT/pages.jsonl`` and ``OUT/links.tsv``
(:class:`skitter.shard_merge.Merger`), so the folder holds every record twice. Once the crawl is
finished (its frontier ran dry: nothing to resume), :func:`seal_finished` does, in this order:

1. sync the merged files and the folder (they are complete: the last merge step ran);
2. write ``OUT/report.json`` with ``finished: true`` (atomic: temp file, fsync, rename) and
   sync the folder: from here on ``skitter crawl --resume`` says "finished" and touches
   nothing, and every reader (``skitter report``, ``skitter merge``) reads the merged files;
3. remove the shard journals and hand-off files (:func:`remove_shard_journals`).

A crash at any instant leaves a usable folder: before step 2 the crawl is unfinished and a
resume re-runs the (empty) crawl and this sequence; after it, only spare journals remain.
The shards' checkpoints, reports, states and frontiers stay (the merged report's counters
come from them).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

from skitter.export.base import fsync_dir
from skitter.shard_merge import Merger
from skitter.sharding import shard_dir
from skitter.state import LINKS_FILE, PAGES_FILE, REPORT_FILE, atomic_write_json

__all__ = ["SHARD_JOURNALS", "fault_point", "remove_shard_journals", "seal_finished"]

#: The shard journals that the merged files copy.
SHARD_JOURNALS = (PAGES_FILE, LINKS_FILE)


def seal_finished(out_dir: Path, count: int, merger: Merger, report: dict[str, Any]) -> int:
    """Steps 1-3 of the module docstring for a finished crawl whose last merge step ran.

    Args:
        out_dir: the crawl folder. count: its number of processes (shards).
        merger: the crawl's merger (closed here: its files synced).
        report: the merged report.json content (``finished`` true).
    Returns:
        The bytes of shard journals removed.
    Raises:
        OSError: a file cannot be synced, written or removed.
    """
    merger.close()
    fsync_dir(out_dir)
    fault_point("merged-synced")
    atomic_write_json(out_dir / REPORT_FILE, report)
    fsync_dir(out_dir)
    fault_point("finished-marked")
    return remove_shard_journals(out_dir, count)


def remove_shard_journals(out_dir: Path, count: int) -> int:
    """Remove the shards' pages.jsonl, links.tsv and hand-off files (``handoff/to-J.jsonl``);
    returns the bytes freed. Missing files are skipped (a removal cut short by a crash).

    Raises:
        OSError: a file cannot be removed.
    """
    freed = 0
    for k in range(count):
        sdir = shard_dir(out_dir, k)
        for path in (*(sdir / name for name in SHARD_JOURNALS), *sdir.glob("handoff/to-*.jsonl")):
            with contextlib.suppress(FileNotFoundError):
                size = path.stat().st_size
                path.unlink()
                freed += size
                fault_point("journal-removed")
        fsync_dir(sdir)
    return freed


def fault_point(name: str) -> None:
    """Tests only: kill this process (SIGKILL) here when ``$SKITTER_FAULT_POINT`` is
    ``name``, to check that a crash at that instant leaves a usable folder."""
    if os.environ.get("SKITTER_FAULT_POINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
