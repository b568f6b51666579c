"""Offline link extraction: WARC files in, links.tsv + pages.jsonl + report.json out.

``skitter extract WARC... --out DIR`` reads anyone's WARC files (see
:mod:`skitter.offline.reader` and :mod:`skitter.offline.payload`) and writes what a crawl of
the same pages writes:

* ``pages.jsonl``: one line per ``response``, ``resource`` or ``revisit`` record of an
  http(s) URL, in the columns of a crawl's (:data:`skitter.export.pages.PAGE_KEYS`):
  ``url`` = ``final_url`` = the record's ``WARC-Target-URI`` (WARC 1.0 angle brackets
  removed), ``status`` (null for a ``resource``), ``content_type``, ``bytes`` and ``sha1`` of
  the decoded body, ``fetched_at`` from ``WARC-Date``, ``redirects`` []; ``depth``,
  ``elapsed_s`` and ``attempts`` are null (an archive does not know them). ``error`` is
  ``"truncated"`` for a record with ``WARC-Truncated`` (or cut by the reader's cap), with the
  reason in ``error_detail``; ``error_detail`` also says what decoding could not do.
* ``links.tsv``: the links of every HTML page (:func:`skitter.links.extract`, as the crawler
  calls it) and a ``redirect`` row per 3xx with a ``Location``, with the decisions of the
  stateless rules only: ``scheme``, ``url_length``, ``scope``, ``nofollow``, ``trap``
  (repeated segments, path depth) and otherwise ``queued``; there is no crawl order, so no
  ``seen``, ``depth`` or ``limit``. Scope: the hosts (``--scope host``) or registered domains
  (``--scope domain``) of the given seeds, or, without seeds, of every page in the archives.
* a ``revisit`` (WARC 1.1 §6.7) takes its body from the record it refers to
  (``WARC-Refers-To``, else the same ``WARC-Payload-Digest``) in any of the files given; its
  links are the original's, resolved against the revisit's own URL.
* ``report.json``: counts, and ``skipped``: each damaged part ``{file, offset, reason}``
  (also one line on stderr each).

Files are read by up to ``jobs`` processes (one file per task); each writes part files that
are concatenated at the end, so output order is file order (then the revisits). What is written
per page: :mod:`skitter.offline.page_rows`; revisits: :mod:`skitter.offline.revisits`. Memory
per process: one record (at most ``max_body_bytes`` of its body) plus the reader's buffer.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from skitter.errors import ConfigError
from skitter.export.links import HEADER, unescape
from skitter.offline.page_rows import (
    MEMO_SIZE,
    LinkDecider,
    PageCounts,
    PageWriter,
    PartCounts,
)
from skitter.offline.payload import payload_of
from skitter.offline.reader import Damage, WarcReader
from skitter.offline.revisits import defer_revisit, note_original, part_file, resolve_revisits
from skitter.rules import Decision, ScopeRule
from skitter.settings import ScopeSettings
from skitter.state import CHECKPOINT_FILE, FRONTIER_FILE, STATE_FILE, atomic_write_json

__all__ = ["ExtractOptions", "ExtractResult", "check_warc", "extract_warcs"]

_PAGE_TYPES = frozenset({"response", "resource", "revisit"})
_AUTHORITY_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")
_POST_HOC = frozenset({Decision.QUEUED.value, Decision.NOFOLLOW.value, Decision.TRAP.value})


@dataclass(frozen=True, slots=True)
class ExtractOptions:
    """How to extract.

    Attributes:
        scope: scope and trap settings (``max_depth``, link caps and stateful trap budgets
            are not used: there is no crawl order).
        seeds: canonical seed URLs defining the scope; () = the hosts of the archived pages.
        bot_token: robots product token for ``<meta name=TOKEN>`` / ``X-Robots-Tag``.
        max_body_bytes: decoded body cap per record (bytes); longer bodies are cut there.
        jobs: processes reading files at once (>= 1).
    """

    scope: ScopeSettings = field(default_factory=ScopeSettings)
    seeds: tuple[str, ...] = ()
    bot_token: str | None = "skitter"
    max_body_bytes: int = 10 * 1024 * 1024
    jobs: int = 1


@dataclass(slots=True)
class ExtractResult(PageCounts):
    """What :func:`extract_warcs` did (also written to report.json, see :meth:`to_dict`):
    the summed :class:`~skitter.offline.page_rows.PageCounts`, the files read, the revisits
    resolved or not, and the time taken (seconds)."""

    files: int = 0
    revisits_resolved: int = 0
    revisits_unresolved: int = 0
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The report.json object."""
        el = max(self.elapsed_s, 1e-9)
        return {
            "files": self.files,
            "records": self.records,
            "pages": self.pages,
            "links": self.links,
            "bytes_read": self.bytes_read,
            "revisits": {
                "resolved": self.revisits_resolved,
                "unresolved": self.revisits_unresolved,
            },
            "decisions": dict(sorted(self.decisions.items())),
            "status": dict(sorted(self.statuses.items())),
            "skipped": self.skipped,
            "elapsed_s": round(self.elapsed_s, 3),
            "records_per_s": round(self.records / el, 1),
            "mb_per_s": round(self.bytes_read / el / 1e6, 2),
        }


def check_warc(path: str) -> None:
    """Refuse a path that is not a readable WARC file (gzip, or starting ``WARC/``).

    Raises:
        ConfigError: one-line reason (missing, a directory, unreadable, not a WARC).
    """
    try:
        with open(path, "rb") as f:
            head = f.read(5)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    if not (head.startswith(b"\x1f\x8b") or head == b"WARC/"):
        raise ConfigError(f"{path}: not a WARC file (neither gzip nor starting 'WARC/')")


def _keep_for(headers: dict[str, str], max_body: int) -> int:
    return max_body + 65536 if headers.get("warc-type", "").lower() in _PAGE_TYPES else 0


def _http_url(uri: str) -> bool:
    return uri[:7].lower() == "http://" or uri[:8].lower() == "https://"


def _decider(options: ExtractOptions) -> LinkDecider:
    return LinkDecider(options.scope, options.seeds)


def _work(args: tuple[int, str, str, ExtractOptions]) -> PartCounts:
    """Extract one WARC file into part files ``{index}.*`` of ``part_dir``."""
    index, path, part_dir, options = args
    out = PartCounts()

    def damage(d: Damage) -> None:
        out.skipped.append({"file": path, "offset": d.offset, "reason": d.reason})
        print(f"skitter: {path}: offset {d.offset}: {d.reason} (skipped)", file=sys.stderr)

    max_body = options.max_body_bytes
    with (
        open(path, "rb") as f,
        open(part_file(part_dir, index, "links"), "w", encoding="utf-8", errors="replace") as lf,
        open(part_file(part_dir, index, "pages"), "w", encoding="utf-8", errors="replace") as pf,
        open(part_file(part_dir, index, "keys"), "w", encoding="utf-8") as keys_f,
        open(part_file(part_dir, index, "revisits"), "w", encoding="utf-8") as rev_f,
    ):
        writer = PageWriter(_decider(options), options.bot_token, lf, pf, out)
        reader = WarcReader(f, damage, keep_bytes=lambda h: _keep_for(h, max_body))
        for rec in reader:
            out.records += 1
            rtype = rec.type
            if rtype not in _PAGE_TYPES:
                continue
            url = rec.target_uri
            if not _http_url(url):
                continue
            if rtype == "revisit":
                defer_revisit(rec, url, path, rev_f)
                continue
            p = payload_of(rec, max_body_bytes=max_body)
            if p is None:
                continue
            note_original(rec, index, keys_f)
            writer.emit(url, rec.headers.get("warc-date", ""), p)
        out.bytes_read = f.tell()
    return out


def _add(result: ExtractResult, out: PartCounts, hosts: dict[str, str]) -> None:
    result.add(out)
    for hk, url in out.hosts.items():
        hosts.setdefault(hk, url)


def _authority(url: str) -> str:
    m = _AUTHORITY_RE.match(url)
    return m.group(1) if m else url


def _scope_test(rule: ScopeRule, settings: ScopeSettings) -> Callable[[str], bool]:
    """``rule.in_scope``, remembered per authority when no include/exclude pattern applies
    (then scope depends on the host alone)."""
    if settings.include or settings.exclude:
        return rule.in_scope
    memo: dict[str, bool] = {}

    def test(url: str) -> bool:
        auth = _authority(url)
        got = memo.get(auth)
        if got is None:
            got = memo[auth] = rule.in_scope(url)
            if len(memo) > MEMO_SIZE:
                memo.clear()
        return got

    return test


def _copy_links(
    src: str, dst: Any, rescope: Callable[[str], bool] | None, decisions: Counter[str]
) -> None:
    """Append a part's rows to links.tsv; without seeds, re-decide scope post hoc."""
    with open(src, encoding="utf-8", errors="replace") as f:
        if rescope is None:
            shutil.copyfileobj(f, dst, 1 << 20)
            return
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 7 and fields[6] in _POST_HOC and not rescope(unescape(fields[1])):
                decisions[fields[6]] -= 1
                decisions[Decision.SCOPE.value] += 1
                fields[6] = Decision.SCOPE.value
                line = "\t".join(fields) + "\n"
            dst.write(line)


def _resolve(
    paths: Sequence[str],
    part_dir: str,
    options: ExtractOptions,
    result: ExtractResult,
    hosts: dict[str, str],
) -> None:
    """Complete the revisits of all files into their own part (copied after every file's);
    count them in ``result``."""
    counts = PartCounts()
    with (
        open(part_file(part_dir, None, "links"), "w", encoding="utf-8", errors="replace") as lf,
        open(part_file(part_dir, None, "pages"), "w", encoding="utf-8", errors="replace") as pf,
    ):
        writer = PageWriter(_decider(options), options.bot_token, lf, pf, counts)
        resolved, unresolved = resolve_revisits(
            paths, part_dir, options.max_body_bytes, writer.emit
        )
    result.revisits_resolved += resolved
    result.revisits_unresolved += unresolved
    _add(result, counts, hosts)


#: files of a crawl's (or merge's) folder: extract refuses to write its outputs over them.
_CRAWL_STATE = (STATE_FILE, CHECKPOINT_FILE, FRONTIER_FILE, "merge.json", "merged.json")


def extract_warcs(
    paths: Sequence[str],
    out_dir: str | os.PathLike[str],
    options: ExtractOptions,
) -> ExtractResult:
    """Extract the pages and links of WARC files into ``out_dir`` (see the module doc).

    Args:
        paths: WARC files (checked with :func:`check_warc` first).
        out_dir: output folder, created if missing; links.tsv, pages.jsonl and report.json
            there are replaced (each atomically, at the end).
        options: see :class:`ExtractOptions`.

    Returns:
        The counts and the damaged parts skipped (also in report.json).

    Raises:
        ConfigError: a path is not a readable WARC or is given twice, the scope settings are
            invalid, or ``out_dir`` holds a crawl or a merge (state.json, merged.json...).
        OSError: the output cannot be written.
    """
    start = time.monotonic()
    given: set[str] = set()
    for p in paths:
        check_warc(p)
        real = os.path.realpath(p)
        if real in given:  # read twice, its pages and links would be written twice
            raise ConfigError(f"{p}: WARC file given twice")
        given.add(real)
    _decider(options)  # invalid scope settings fail here, before any work
    out = Path(out_dir)
    held = [n for n in _CRAWL_STATE if (out / n).exists()]
    if held:  # its pages.jsonl, links.tsv and report.json would be replaced
        raise ConfigError(f"--out {out} holds a crawl or merge ({held[0]}): choose another folder")
    out.mkdir(parents=True, exist_ok=True)
    part_dir = out / ".extract-parts"
    links_tmp = out / "links.tsv.tmp"
    pages_tmp = out / "pages.jsonl.tmp"
    try:
        shutil.rmtree(part_dir, ignore_errors=True)
        part_dir.mkdir()
        tasks = [(i, p, str(part_dir), options) for i, p in enumerate(paths)]
        jobs = max(1, min(options.jobs, len(tasks)))
        if jobs > 1:
            with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
                outs = list(pool.map(_work, tasks))
        else:
            outs = [_work(t) for t in tasks]
        result = ExtractResult(files=len(paths))
        hosts: dict[str, str] = {}
        for o in outs:
            _add(result, o, hosts)
        with (
            open(links_tmp, "w", encoding="utf-8", errors="replace") as links_f,
            open(pages_tmp, "w", encoding="utf-8", errors="replace") as pages_f,
        ):
            links_f.write(HEADER + "\n")
            parts = str(part_dir)
            _resolve(paths, parts, options, result, hosts)
            rescope: Callable[[str], bool] | None = None
            if not options.seeds:
                rescope = _scope_test(ScopeRule(options.scope, list(hosts.values())), options.scope)
            for i in [*range(len(paths)), None]:
                _copy_links(part_file(parts, i, "links"), links_f, rescope, result.decisions)
                with open(part_file(parts, i, "pages"), encoding="utf-8", errors="replace") as pf:
                    shutil.copyfileobj(pf, pages_f, 1 << 20)
        result.decisions = +result.decisions
        os.replace(links_tmp, out / "links.tsv")
        os.replace(pages_tmp, out / "pages.jsonl")
        shutil.rmtree(part_dir, ignore_errors=True)
        result.elapsed_s = time.monotonic() - start
    except OSError as exc:
        # disk full, I/O error: no stray parts or temporary files; name where it failed (a
        # failed write() names no file)
        shutil.rmtree(part_dir, ignore_errors=True)
        for tmp in (links_tmp, pages_tmp):
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror or str(exc), str(out)) from None
        raise
    atomic_write_json(out / "report.json", result.to_dict())
    return result
