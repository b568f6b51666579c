"""The shards of a running ``--processes`` crawl merged into its folder, as the crawl goes
(:class:`Merger`, run by the coordinator, :mod:`skitter.processes`).

The coordinator copies each shard's journals (pages.jsonl, links.tsv or links.tsv.zst) up to
the offset of its last checkpoint (bytes that a resume never cuts); ``OUT/merge.json`` records,
atomically, how far each shard has been copied and how long the merged files are, so after a
crash the merged files are cut back to that length and the copy continues: nothing twice,
nothing lost. It also keeps the links' decision counts the copied rows carry (each shard
checkpoint's counters cover its links file up to the checkpoint's offset), so the report need
not read the merged links file again (:func:`skitter.report.data.merged_decisions`).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from skitter.errors import StateError
from skitter.export.base import AppendFile
from skitter.export.linkfile import header_frame, links_name
from skitter.export.links import HEADER as LINKS_HEADER
from skitter.sharding import shard_dir
from skitter.state import CHECKPOINT_FILE, MERGE_FILE, PAGES_FILE, atomic_write_json, read_json

__all__ = ["COPY_CHUNK_BYTES", "LINKS_HEADER_BYTES", "MERGE_FILE", "Merger"]

#: Bytes copied per read.
COPY_CHUNK_BYTES = 1024 * 1024
#: Bytes copied into a merged file after which a step syncs it: the disk writes the copy as
#: the crawl goes, so the sync at the end of the crawl (:meth:`Merger.close`) has little left.
SYNC_EVERY_BYTES = 8 * 1024 * 1024
#: The header line of a plain links.tsv.
LINKS_HEADER_BYTES = LINKS_HEADER.encode("ascii") + b"\n"


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

    def __init__(
        self, out_dir: Path, count: int, resume: bool, links_compress: str = "none"
    ) -> None:
        self.out_dir = out_dir
        self.count = count
        self.links_name = links_name(links_compress)  # links.tsv.zst: frames copied as is
        self.links_header = header_frame() if links_compress == "zstd" else LINKS_HEADER_BYTES
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
        self._sum_decisions()
        self.files: dict[str, AppendFile] = {}
        self._unsynced = {"pages": 0, "links": 0}
        for name, key in ((PAGES_FILE, "pages"), (self.links_name, "links")):
            fpath = out_dir / name
            size = fpath.stat().st_size if fpath.exists() else 0
            want = self.state[key]
            if size < want:
                raise StateError(f"{fpath} is shorter than {MERGE_FILE} says; state is damaged")
            if size > want:
                os.truncate(fpath, want)  # bytes copied after the last merge.json: again
            self.files[key] = AppendFile(fpath)
        if self.state["links"] == 0:
            self.files["links"].write(self.links_header)
            self.state["links"] = len(self.links_header)
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
                ("links", self.links_name, "links_offset", len(self.links_header)),
            ):
                upto = int(cp.get(cp_key, 0))
                have = max(int(pos[key]), skip)
                if upto <= have:
                    continue
                n = self._copy(sdir / name, have, upto, self.files[key])
                pos[key] = have + n
                self.state[key] += n
                self._unsynced[key] += n
                copied += n
                if key == "links":
                    _note_decisions(pos, cp, upto)
        if copied:
            self._sum_decisions()
            self._save()
        for key, n in self._unsynced.items():
            if n >= SYNC_EVERY_BYTES:
                self.files[key].sync()
                self._unsynced[key] = 0
        return copied

    def _sum_decisions(self) -> None:
        """The merged links file's decision counts (``by_decision``): the sum of every shard's,
        kept only while each shard's copied rows have known counts."""
        total: Counter[str] = Counter()
        for pos in self.state["shards"]:
            decisions = pos.get("decisions")
            if isinstance(decisions, dict):
                total.update(decisions)
            elif int(pos.get("links", 0)) > len(self.links_header):
                self.state.pop("by_decision", None)  # rows of unknown counts: readers scan
                return
        self.state["by_decision"] = dict(total)

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


def _note_decisions(pos: dict[str, Any], cp: dict[str, Any], upto: int) -> None:
    """Record in a shard's merge position the decision counts of its links rows copied so
    far: its checkpoint's counters, which cover its links file up to ``upto`` (the
    checkpoint's ``links_offset``); dropped when the copy stopped short or they are unusable."""
    stats = cp.get("stats")
    decisions = stats.get("by_decision") if isinstance(stats, dict) else None
    if (
        int(pos["links"]) == upto
        and isinstance(decisions, dict)
        and all(isinstance(n, int) and isinstance(k, str) for k, n in decisions.items())
    ):
        pos["decisions"] = dict(decisions)
    else:
        pos.pop("decisions", None)
