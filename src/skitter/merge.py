"""Merging crawl folders into one (:func:`merge_folders`, ``skitter merge``), and the report
sections of several crawls or shards (:func:`merge_sections`, :func:`merged_report`,
:func:`merged_stats`). The copy of a running ``--processes`` crawl's shard journals into its
folder is :class:`skitter.shard_merge.Merger`.
"""
from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skitter import __version__
from skitter.errors import ConfigError, StateError
from skitter.export.base import fsync_dir
from skitter.export.linkfile import (
    LINKS_ZST_FILE,
    ZstdFramer,
    complete_end,
    is_zstd,
    iter_lines,
    links_file,
    links_name,
)
from skitter.export.links import unescape
from skitter.folder_lock import LOCK_FILE, check_free, lock_folder
from skitter.settings import CrawlSettings
from skitter.shard_merge import COPY_CHUNK_BYTES, LINKS_HEADER_BYTES
from skitter.sharding import shard_dir
from skitter.state import (
    CHECKPOINT_FILE,
    LINKS_FILE,
    PAGES_FILE,
    REPORT_FILE,
    STATE_FILE,
    atomic_write_json,
    read_json,
)
from skitter.stats import Stats
from skitter.typefocus import merged_sections
from skitter.urls import host_key

__all__ = [
    "MERGED_FILE",
    "MergeSummary",
    "merge_blocks",
    "merge_folders",
    "merge_sections",
    "merged_report",
    "merged_stats",
    "whole_lines_end",
]


def merged_stats(out_dir: Path, count: int) -> Stats:
    """The sum of the shards' counters as of their last checkpoints."""
    total = Stats()
    for k in range(count):
        cp_path = shard_dir(out_dir, k) / CHECKPOINT_FILE
        if cp_path.exists():
            with contextlib.suppress(StateError):
                total.merge(Stats.from_state(read_json(cp_path).get("stats") or {}))
    return total


def merge_blocks(blocks: Iterable[dict[str, Any] | None]) -> dict[str, Any]:
    """Merge the ``duplicates`` (or ``sitemaps``) blocks of several processes' reports:
    integers summed, dicts merged key by key (per-host blocks are disjoint), lists united
    (sorted), strings (the mode) kept from the first block."""
    out: dict[str, Any] = {}
    for block in blocks:
        if not isinstance(block, dict):
            continue
        for k, v in block.items():
            if isinstance(v, bool | str):
                out.setdefault(k, v)
            elif isinstance(v, int):
                out[k] = int(out.get(k) or 0) + v
            elif isinstance(v, dict):
                out.setdefault(k, {}).update(v)
            elif isinstance(v, list):
                out[k] = sorted(set(out.get(k) or []) | {x for x in v if isinstance(x, str)})
    return out


def merge_sections(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The per-section parts of several report.json files merged, as a dict to put in the
    merged report: ``robots`` per origin united (a later report's entry for an origin
    replaces an earlier one), ``traps`` counts summed with their first 100 URLs, the
    ``duplicates`` and ``sitemaps`` blocks (and ``recrawl`` when any report has one) merged by
    :func:`merge_blocks`, the ``focus``, ``concurrency`` and ``timeouts``
    sections by :func:`skitter.typefocus.merged_sections`. Used by the coordinator and by
    :func:`merge_folders`."""
    robots: dict[str, Any] = {}
    traps: dict[str, dict[str, Any]] = {}
    for rep in reports:
        robots.update(rep.get("robots") or {})
        for defence, t in (rep.get("traps") or {}).items():
            m = traps.setdefault(defence, {"limit": t.get("limit"), "count": 0, "urls": []})
            m["count"] += int(t.get("count") or 0)
            m["urls"] = (m["urls"] + list(t.get("urls") or []))[:100]
    sections: dict[str, Any] = {"robots": dict(sorted(robots.items())), "traps": traps}
    for key in ("duplicates", "sitemaps"):
        sections[key] = merge_blocks(rep.get(key) for rep in reports)
    if any(rep.get("recrawl") for rep in reports):
        sections["recrawl"] = merge_blocks(rep.get("recrawl") for rep in reports)
    sections.update(merged_sections(list(reports)))
    return sections


def _read_report(path: Path) -> dict[str, Any] | None:
    """A report.json, or None if it is missing or being replaced right now."""
    if not path.exists():
        return None
    try:
        rep = read_json(path)
    except StateError:
        return None
    return rep if isinstance(rep, dict) else None


def merged_report(
    out_dir: Path, settings: CrawlSettings, stop_reason: str, finished: bool
) -> dict[str, Any]:
    """report.json of a sharded crawl: the shards' reports merged (totals summed, robots
    per origin united, trap counts summed with their first 100 URLs, the duplicates,
    sitemaps and recrawl blocks summed: :func:`merge_blocks`)."""
    stats = merged_stats(out_dir, settings.processes)
    reports = [_read_report(shard_dir(out_dir, k) / REPORT_FILE) for k in range(settings.processes)]
    sections = merge_sections([r for r in reports if r is not None])
    return {
        "skitter": __version__,
        "out_dir": str(out_dir),
        "finished": finished,
        "stop_reason": stop_reason,
        "processes": settings.processes,
        "totals": stats.snapshot(0.0).to_dict(),
        **sections,
        "seeds": list(settings.seeds),
    }


# ---------------------------------------------------------------------------------------
# skitter merge DIR... --out MERGED: several crawl folders joined, one record per URL
# ---------------------------------------------------------------------------------------

#: The last file a merge writes into MERGED: its presence says the merge is complete.
MERGED_FILE = "merged.json"
_OUTPUTS = (PAGES_FILE, LINKS_FILE, LINKS_ZST_FILE, REPORT_FILE, MERGED_FILE, LOCK_FILE)


@dataclass(frozen=True, slots=True)
class MergeSummary:
    """What :func:`merge_folders` did.

    Attributes:
        folders: the input folders, in command-line order.
        records: pages.jsonl records written (one per URL).
        superseded: records dropped because a later attempt at the same URL won.
        links: links.tsv rows written (header not counted).
        torn: input journals that ended in a partial line (a kill mid-write), not read.
        damaged: whole pages.jsonl lines that are not a record (not JSON, no string ``url``,
            a field of the wrong type), left out.
        stale_leases: of ``superseded``, records of a lease that Redis had already given to
            another worker (an older ``fence`` than the winner's).
    """

    folders: tuple[Path, ...]
    records: int
    superseded: int
    links: int
    torn: int
    damaged: int = 0
    stale_leases: int = 0


def whole_lines_end(path: Path) -> int:
    """The length in bytes of ``path`` up to and including its last newline (0 if the file
    is missing or has none): what a reader may use of a journal being written, or cut by a
    kill mid-line.

    Raises:
        OSError: the file exists but cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        end = os.fstat(fd).st_size
        while end > 0:
            start = max(0, end - COPY_CHUNK_BYTES)
            block = os.pread(fd, end - start, start)
            i = block.rfind(b"\n")
            if i >= 0:
                return start + i + 1
            end = start
        return 0
    finally:
        os.close(fd)


def _lines(path: Path, end: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` for each whole line of ``path`` before byte ``end``."""
    if end <= 0:
        return
    with open(path, "rb") as fh:
        pos = 0
        for line in fh:
            if pos + len(line) > end:
                return
            yield pos, line
            pos += len(line)


def _check_inputs(inputs: Sequence[Path], out: Path) -> list[Path]:
    """Resolved input folders; ConfigError (one line) for bad input or a bad MERGED."""
    if not inputs:
        raise ConfigError("no crawl folder to merge")
    folders: list[Path] = []
    out_r = out.resolve()
    for d in inputs:
        if not d.exists():
            raise ConfigError(f"no such folder: {d}")
        if not d.is_dir():
            raise ConfigError(f"not a folder: {d}")
        if not (d / PAGES_FILE).exists() and not (d / STATE_FILE).exists():
            raise ConfigError(f"not a crawl folder (no {PAGES_FILE} or {STATE_FILE}): {d}")
        r = d.resolve()
        if r in folders:
            raise ConfigError(f"folder given twice: {d}")
        if out_r == r or r in out_r.parents:
            raise ConfigError(f"the merged folder {out} is inside the input folder {d}")
        if out_r in r.parents:
            raise ConfigError(f"the input folder {d} is inside the merged folder {out}")
        folders.append(r)
    if out.exists():
        if not out.is_dir():
            raise ConfigError(f"--out {out} exists and is not a folder")
        extra = sorted(
            p.name for p in out.iterdir() if p.name not in _OUTPUTS and p.suffix != ".tmp"
        )
        if extra:
            raise ConfigError(
                f"--out {out} exists and is not the output of a merge (it holds {extra[0]})"
            )
    return folders


def _folder_robots_disallowed(folder: Path, report: dict[str, Any] | None) -> tuple[int, float]:
    """(URLs not fetched because of robots.txt, crawling seconds) of one folder: from its
    checkpoint (the counters a resume would restart from), else its report.json."""
    cp_path = folder / CHECKPOINT_FILE
    if cp_path.exists():
        with contextlib.suppress(StateError):
            st = Stats.from_state(read_json(cp_path).get("stats") or {})
            return st.robots_disallowed, st.elapsed_before_s
    totals = (report or {}).get("totals") or {}
    return int(totals.get("robots_disallowed") or 0), float(totals.get("elapsed_s") or 0.0)


_Counted = tuple[str, int, int | None, str | None, int, str]


def _parse_record(line: bytes) -> tuple[str, str, tuple[int, str], _Counted] | None:
    """``(url, final_url, (fence, fetched_at), count_record arguments)`` of a pages.jsonl
    line (fence -1 when the record has none), or None when the line is not a well-formed
    record (damaged: it is left out of the merge)."""
    # (here: a crawl's coordinator imports this module, not the link checker's policy)
    from skitter.checklinks.verdicts import record_verdict

    try:
        rec = json.loads(line)
        url, final = rec["url"], rec.get("final_url") or rec["url"]
        fence = rec.get("fence", -1)
        if not isinstance(url, str) or not isinstance(final, str) or type(fence) is not int:
            return None
        status, error = rec.get("status"), rec.get("error")
        if not (status is None or type(status) is int) or not (
            error is None or isinstance(error, str)
        ):
            return None
        hops = rec.get("redirects") or ()
        counted = (
            host_key(url),
            int(rec.get("depth") or 0),
            status,
            error,
            int(rec.get("bytes") or 0),
            record_verdict(
                status, error, rec.get("error_detail"), hops[0]["status"] if hops else None
            ),
        )
    except (ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None
    return url, final, (fence, str(rec.get("fetched_at") or "")), counted


def _source_of(line: bytes) -> str:
    """The source URL (first field) of a links.tsv row."""
    field_ = line.split(b"\t", 1)[0].decode("utf-8", "surrogateescape")
    return unescape(field_) if "\\" in field_ else field_


def merge_folders(inputs: Sequence[Path], out: Path) -> MergeSummary:
    """Join the journals of several crawl folders into ``out``'s pages.jsonl, links.tsv and
    report.json (``skitter merge``).

    * Each folder is read up to the last whole line of each journal (a line cut by a kill is
      left out, as a resume would cut it); the folders are not modified. A whole line that
      is not a record (not JSON, ``url`` not a string, a field of the wrong type) is left
      out and counted in ``damaged``.
    * One record per URL (pages.jsonl ``url``): the latest attempt wins, by ``fence`` (the
      fencing token of a Redis worker's lease: a worker frozen past its lease wrote a page
      whose ack was refused; the newest token is the lease Redis accepted), then
      ``fetched_at``; a record with a ``fence`` wins over one without; ties go to the
      folder given later, then to the later line of its file. Records dropped for a newer
      fencing token are counted in ``stale_leases`` (also in ``superseded``). Records are
      copied byte for byte, in folder order then file order.
    * links.tsv: the rows of a page come from the folder holding the latest record whose
      ``final_url`` is that page; rows of a page with no record (a kill between them and the
      record) are left out. Written as ``links.tsv.zst`` (independent frames of whole lines,
      :class:`~skitter.export.linkfile.ZstdFramer`) when any input holds a links.tsv.zst,
      else as ``links.tsv``; a previous merge's file of the other name is removed.
    * report.json: totals recounted from the merged records and rows (``robots_disallowed``,
      which has no record, summed over the folders; ``elapsed_s`` the longest); robots per
      origin united, trap counts summed (:func:`merge_sections`).

    Crash-safe: ``out/merged.json`` is removed first and written last; each file is written
    to a temporary name, fsynced and renamed, so after a kill every file in ``out`` is whole
    and a merge without merged.json is simply run again.

    Raises:
        ConfigError: a folder is missing, is not a crawl folder, is given twice, or ``out``
            is inside an input (or the reverse), or ``out`` holds other files.
        StateError: a crawl or another merge is running in ``out`` (its pid named).
        OSError: a file cannot be read or written.
    """
    check_free(out)  # a crawl running in ``out``: named (nothing changed)
    folders = _check_inputs(inputs, out)
    out.mkdir(parents=True, exist_ok=True)
    with lock_folder(out, "merge"):
        return _merge_into(folders, out)


def _merge_into(folders: list[Path], out: Path) -> MergeSummary:
    """:func:`merge_folders` once the inputs are checked and ``out`` is locked."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(out / MERGED_FILE)
    fsync_dir(out)
    # pass 1: who wins (per URL, per final URL for the link rows)
    ends: list[tuple[int, int]] = []
    torn = 0
    win: dict[str, tuple[int, str, int, int]] = {}
    page_of: dict[str, tuple[int, str, int, int]] = {}
    fences: dict[str, list[int]] = {}  # url -> fencing tokens of its records
    seen_records = damaged = 0
    for i, folder in enumerate(folders):
        pages, links = folder / PAGES_FILE, links_file(folder)
        pend, lend = whole_lines_end(pages), complete_end(links)
        for path, end in ((pages, pend), (links, lend)):
            if path.exists() and path.stat().st_size > end:
                torn += 1
        ends.append((pend, lend))
        for off, line in _lines(pages, pend):
            parsed = _parse_record(line)
            if parsed is None:
                damaged += 1
                continue
            url, final, (fence, fetched_at), _ = parsed
            seen_records += 1
            if fence >= 0:
                fences.setdefault(url, []).append(fence)
            rank = (fence, fetched_at, i, off)
            if url not in win or rank > win[url]:
                win[url] = rank
            if final not in page_of or rank > page_of[final]:
                page_of[final] = rank
    # pass 2: copy the winners and count them
    stats = Stats()
    records = nlinks = 0
    reports = [_read_report(f / REPORT_FILE) for f in folders]
    with _TempFile(out / PAGES_FILE) as pf:
        for i, folder in enumerate(folders):
            for off, line in _lines(folder / PAGES_FILE, ends[i][0]):
                parsed = _parse_record(line)
                if parsed is None:
                    continue
                w = win.get(parsed[0])
                if w is None or w[2] != i or w[3] != off:
                    continue
                pf.write(line)
                records += 1
                stats.count_record(*parsed[3])
    decisions: Counter[str] = Counter()
    # links.tsv.zst (frames of whole lines) when an input is compressed, else links.tsv
    links_out = links_name("zstd" if any(is_zstd(links_file(f)) for f in folders) else "none")
    with _TempFile(out / links_out) as lf:
        framer = ZstdFramer(lf.write) if is_zstd(links_out) else None
        add = lf.write if framer is None else framer.add
        if framer is None:
            lf.write(LINKS_HEADER_BYTES)
        for i, folder in enumerate(folders):
            for off, line in iter_lines(links_file(folder), 0, ends[i][1]):
                if off == 0 and line == LINKS_HEADER_BYTES:
                    continue
                owner = page_of.get(_source_of(line))
                if owner is None or owner[2] != i:
                    continue
                add(line)
                nlinks += 1
                decisions[line.rstrip(b"\r\n").rsplit(b"\t", 1)[-1].decode("ascii", "replace")] += 1
        if framer is not None:
            framer.flush()
    # a previous merge's links file of the other kind would shadow or confuse this one
    with contextlib.suppress(FileNotFoundError):
        os.unlink(out / (LINKS_FILE if is_zstd(links_out) else LINKS_ZST_FILE))
    stats.count_decisions(decisions)
    elapsed = 0.0
    for folder, rep in zip(folders, reports, strict=True):
        disallowed, secs = _folder_robots_disallowed(folder, rep)
        stats.robots_disallowed += disallowed
        stats.by_verdict["excluded"] += disallowed
        elapsed = max(elapsed, secs)
    stats.elapsed_before_s = elapsed
    if not stats.by_verdict["excluded"]:
        del stats.by_verdict["excluded"]
    sections = merge_sections([r for r in reports if r is not None])
    seeds: list[str] = []
    for rep in reports:
        for s in (rep or {}).get("seeds") or ():
            if s not in seeds:
                seeds.append(s)
    report = {
        "skitter": __version__,
        "out_dir": str(out),
        "finished": all(bool((rep or {}).get("finished")) for rep in reports),
        "stop_reason": "merged",
        "merged_from": [str(f) for f in folders],
        "totals": stats.snapshot(0.0).to_dict(),
        **sections,
        "seeds": seeds,
    }
    atomic_write_json(out / REPORT_FILE, report)
    stale = sum(sum(1 for f in fs if f < win[u][0]) for u, fs in fences.items())
    summary = MergeSummary(
        tuple(folders), records, seen_records - records, nlinks, torn, damaged, stale
    )
    atomic_write_json(
        out / MERGED_FILE,
        {
            "skitter": __version__,
            "folders": [
                {"path": str(f), "pages_bytes": e[0], "links_bytes": e[1]}
                for f, e in zip(folders, ends, strict=True)
            ],
            "records": records,
            "superseded": summary.superseded,
            "stale_leases": stale,
            "links": nlinks,
        },
    )
    fsync_dir(out)
    return summary


class _TempFile:
    """``path`` written as ``path.tmp`` (buffered), fsynced and renamed over ``path`` when
    the block ends without an exception; else (a failed write, flush, fsync or close too:
    disk full) the temporary file is removed, and an :class:`OSError` that names no file
    is given ``path``'s name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(path.name + ".tmp")
        self.fh = open(self.tmp, "wb")  # noqa: SIM115 (closed in __exit__)

    def write(self, data: bytes) -> None:
        self.fh.write(data)

    def __enter__(self) -> _TempFile:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        try:
            try:
                if exc_type is None:
                    self.fh.flush()
                    os.fsync(self.fh.fileno())
            finally:
                self.fh.close()
            if exc_type is None:
                os.replace(self.tmp, self.path)
                return
        except OSError as own:
            exc = own
            raise
        finally:
            if exc is not None:
                if isinstance(exc, OSError) and not exc.filename:
                    exc.filename = str(self.path)
                with contextlib.suppress(OSError):
                    os.unlink(self.tmp)
