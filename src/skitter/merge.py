"""Merging the journals of a sharded crawl: the shards' pages.jsonl and links.tsv copied
into the crawl folder's own as the crawl goes, and their report.json sections summed.

The coordinator of ``--processes`` (:mod:`skitter.processes`) copies each shard's journal up
to the offset of its last checkpoint (bytes that a resume never cuts); ``OUT/merge.json``
records, atomically, how far each shard has been copied and how long the merged files are,
so after a crash the merged files are cut back to that length and the copy continues:
nothing twice, nothing lost.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from skitter import __version__
from skitter.errors import StateError
from skitter.export.base import AppendFile
from skitter.export.links import HEADER as LINKS_HEADER
from skitter.settings import CrawlSettings
from skitter.sharding import shard_dir
from skitter.state import (
    CHECKPOINT_FILE,
    LINKS_FILE,
    PAGES_FILE,
    REPORT_FILE,
    atomic_write_json,
    read_json,
)
from skitter.stats import Stats

__all__ = ["MERGE_FILE", "Merger", "merged_report", "merged_stats"]

MERGE_FILE = "merge.json"
COPY_CHUNK_BYTES = 1024 * 1024
_LINKS_HEADER_BYTES = LINKS_HEADER.encode("ascii") + b"\n"


class Merger:
    """Copies each shard's pages.jsonl / links.tsv, up to its checkpoint, into the merged
    files; the copy position and merged lengths are kept in merge.json (atomic).

    Args:
        out_dir: the crawl folder (holding ``shards/``). count: the number of shards.
        resume: continue the merge recorded in merge.json (else start one).
    Raises:
        StateError: merge.json does not match ``count`` or the merged files.
        OSError: a merged file cannot be opened or repaired.
    """

    def __init__(self, out_dir: Path, count: int, resume: bool) -> None:
        self.out_dir = out_dir
        self.count = count
        path = out_dir / MERGE_FILE
        state: dict[str, Any] = read_json(path) if resume and path.exists() else {}
        shards = state.get("shards") if isinstance(state, dict) else None
        if not isinstance(shards, list) or len(shards) != count:
            if state:
                raise StateError(f"{path} does not describe {count} processes; state is damaged")
            shards = [{"pages": 0, "links": 0} for _ in range(count)]
        self.state: dict[str, Any] = {
            "pages": int(state.get("pages", 0)),
            "links": int(state.get("links", 0)),
            "shards": shards,
        }
        self.files: dict[str, AppendFile] = {}
        for name, key in ((PAGES_FILE, "pages"), (LINKS_FILE, "links")):
            fpath = out_dir / name
            size = fpath.stat().st_size if fpath.exists() else 0
            want = self.state[key]
            if size < want:
                raise StateError(f"{fpath} is shorter than {MERGE_FILE} says; state is damaged")
            if size > want:
                os.truncate(fpath, want)  # bytes copied after the last merge.json: again
            self.files[key] = AppendFile(fpath)
        if self.state["links"] == 0:
            self.files["links"].write(_LINKS_HEADER_BYTES)
            self.state["links"] = len(_LINKS_HEADER_BYTES)
            self._save()

    def _save(self) -> None:
        atomic_write_json(self.out_dir / MERGE_FILE, self.state)

    def step(self) -> int:
        """Copy what every shard has checkpointed since the last step; returns bytes copied.

        Raises:
            OSError: a file cannot be read or written.
        """
        copied = 0
        for k in range(self.count):
            sdir = shard_dir(self.out_dir, k)
            cp_path = sdir / CHECKPOINT_FILE
            if not cp_path.exists():
                continue
            try:
                cp = read_json(cp_path)
            except StateError:
                continue  # being replaced right now: next step
            pos = self.state["shards"][k]
            for key, name, cp_key, skip in (
                ("pages", PAGES_FILE, "pages_offset", 0),
                ("links", LINKS_FILE, "links_offset", len(_LINKS_HEADER_BYTES)),
            ):
                upto = int(cp.get(cp_key, 0))
                have = max(int(pos[key]), skip)
                if upto <= have:
                    continue
                n = self._copy(sdir / name, have, upto, self.files[key])
                pos[key] = have + n
                self.state[key] += n
                copied += n
        if copied:
            self._save()
        return copied

    @staticmethod
    def _copy(src: Path, start: int, end: int, dst: AppendFile) -> int:
        done = 0
        try:
            fd = os.open(src, os.O_RDONLY)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(src)) from None
        try:
            while start + done < end:
                data = os.pread(fd, min(COPY_CHUNK_BYTES, end - start - done), start + done)
                if not data:
                    break
                try:
                    dst.write(data)
                except OSError as exc:  # name the file: "File too large: .../pages.jsonl"
                    raise OSError(exc.errno, exc.strerror, dst.path) from None
                done += len(data)
        finally:
            os.close(fd)
        return done

    def close(self) -> None:
        """Close the merged files (synced)."""
        for f in self.files.values():
            f.close()


def merged_stats(out_dir: Path, count: int) -> Stats:
    """The sum of the shards' counters as of their last checkpoints."""
    total = Stats()
    for k in range(count):
        cp_path = shard_dir(out_dir, k) / CHECKPOINT_FILE
        if cp_path.exists():
            with contextlib.suppress(StateError):
                total.merge(Stats.from_state(read_json(cp_path).get("stats") or {}))
    return total


def merged_report(
    out_dir: Path, settings: CrawlSettings, stop_reason: str, finished: bool
) -> dict[str, Any]:
    """report.json of a sharded crawl: the shards' reports merged (totals summed, robots
    per origin united, trap counts summed with their first 100 URLs)."""
    stats = merged_stats(out_dir, settings.processes)
    robots: dict[str, Any] = {}
    traps: dict[str, dict[str, Any]] = {}
    for k in range(settings.processes):
        path = shard_dir(out_dir, k) / REPORT_FILE
        if not path.exists():
            continue
        try:
            rep = read_json(path)
        except StateError:
            continue
        robots.update(rep.get("robots") or {})
        for defence, t in (rep.get("traps") or {}).items():
            m = traps.setdefault(defence, {"limit": t.get("limit"), "count": 0, "urls": []})
            m["count"] += int(t.get("count") or 0)
            m["urls"] = (m["urls"] + list(t.get("urls") or []))[:100]
    return {
        "skitter": __version__,
        "out_dir": str(out_dir),
        "finished": finished,
        "stop_reason": stop_reason,
        "processes": settings.processes,
        "totals": stats.snapshot(0.0).to_dict(),
        "robots": dict(sorted(robots.items())),
        "traps": traps,
        "seeds": list(settings.seeds),
    }
