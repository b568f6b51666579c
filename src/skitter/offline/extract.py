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
are concatenated at the end, so output order is file order. Memory per process: one record
(at most ``max_body_bytes`` of its body) plus the reader's buffer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from skitter import urls
from skitter.errors import ConfigError
from skitter.export.links import HEADER, format_rows, unescape
from skitter.export.pages import PAGE_KEYS
from skitter.links import extract as extract_links
from skitter.offline.payload import HttpPayload, payload_of
from skitter.offline.reader import Damage, Record, WarcReader
from skitter.rules import Decision, ScopeRule
from skitter.settings import ScopeSettings
from skitter.state import CHECKPOINT_FILE, FRONTIER_FILE, STATE_FILE, atomic_write_json
from skitter.traps import TrapGuard

__all__ = ["ExtractOptions", "ExtractResult", "check_warc", "extract_warcs"]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})  # as the crawler's
_PAGE_TYPES = frozenset({"response", "resource", "revisit"})
_MEMO_SIZE = 1 << 17
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
class ExtractResult:
    """What :func:`extract_warcs` did (also written to report.json, see :meth:`to_dict`)."""

    files: int = 0
    records: int = 0
    pages: int = 0
    links: int = 0
    bytes_read: int = 0
    revisits_resolved: int = 0
    revisits_unresolved: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    skipped: list[dict[str, Any]] = field(default_factory=list)
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


def warc_date_iso(value: str) -> str:
    """A ``WARC-Date`` (W3C-ISO8601, WARC 1.1 §5.4) as pages.jsonl writes times
    (``2024-05-01T12:00:00.123Z``); the value as is when it does not parse."""
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError:
        return value
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    dt = dt.astimezone(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _media_type(ct: str | None) -> str | None:
    if not ct:
        return None
    mt = ct.split(";", 1)[0].strip().lower()
    return mt or None


def _is_html(ct: str | None, body: bytes) -> bool:
    if ct is not None:
        return ct in _HTML_TYPES
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<head", b"<body"))


def _json_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


class _Decider:
    """The stateless link rules (see the module doc)."""

    def __init__(self, options: ExtractOptions) -> None:
        settings = replace(
            options.scope,
            max_depth=None,
            max_links_per_page=None,
            max_seed_links=None,
            max_query_variants_per_path=None,
            max_pages_per_host=None,
        )
        if not options.seeds:
            settings = replace(settings, scope="any")  # scope decided at the end (post hoc)
        self.rule = ScopeRule(settings, options.seeds)
        self.traps = TrapGuard(settings)

        # pages repeat their navigation links: decisions are pure, remember the recent ones
        self._memo: dict[tuple[str | None, bool], tuple[str, str | None]] = {}

    def decide(self, url: str | None, nofollow: bool) -> tuple[str, str | None]:
        key = (url, nofollow)
        got = self._memo.get(key)
        if got is not None:
            return got
        decision, canon = self.rule.decide(
            url, depth=1, nofollow=nofollow, index=0, is_seed_page=False
        )
        got = (decision.value, canon)
        if decision is Decision.QUEUED and canon is not None:
            trap = self.traps.admit(canon)
            if trap is not None:
                got = (trap.decision.value, canon)
        if len(self._memo) >= _MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = got
        return got


@dataclass(slots=True)
class _FileOut:
    """What one worker returns for one file."""

    records: int = 0
    pages: int = 0
    links: int = 0
    bytes_read: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    hosts: dict[str, str] = field(default_factory=dict)


def _page_rows(
    url: str, p: HttpPayload, decider: _Decider, bot_token: str | None
) -> list[list[Any]]:
    rows: list[list[Any]] = []
    status = p.status
    if status is not None and 300 <= status < 400:
        loc = (p.header("location") or "").strip()
        if loc:
            target = urls.join(url, loc)
            dec, canon = decider.decide(target, False)
            frag = target.partition("#")[2] if target else ""
            rows.append([url, canon or loc, frag, "", "redirect", False, dec])
        return rows
    ct = _media_type(p.content_type)
    if not p.body or not _is_html(ct, p.body):
        return rows
    page = extract_links(
        p.body, url, p.content_type, p.headers.get("x-robots-tag", []), bot_token=bot_token
    )
    for link in page.links:
        nofollow = link.nofollow or page.nofollow
        dec, canon = decider.decide(link.url, nofollow)
        if link.url is not None:
            target_nofrag, _, fragment = link.url.partition("#")
        else:
            target_nofrag, fragment = link.raw, ""
        rows.append(
            [
                url,
                canon if canon is not None else target_nofrag,
                fragment,
                link.anchor,
                link.kind,
                nofollow,
                dec,
            ]
        )
    return rows


def _page_line(url: str, date: str, p: HttpPayload) -> dict[str, Any]:
    error = "truncated" if p.truncated else None
    details = []
    if p.truncated:
        details.append(f"WARC-Truncated: {p.truncated}")
    if p.note:
        details.append(p.note)
    obj: dict[str, Any] = {
        "url": url,
        "final_url": url,
        "status": p.status,
        "depth": None,
        "content_type": _media_type(p.content_type),
        "bytes": len(p.body),
        "sha1": hashlib.sha1(p.body).hexdigest() if p.body else None,
        "fetched_at": warc_date_iso(date),
        "elapsed_s": None,
        "attempts": None,
        "redirects": [],
        "error": error,
        "error_detail": "; ".join(details) or None,
    }
    assert tuple(obj) == PAGE_KEYS
    return obj


def _keep_for(headers: dict[str, str], max_body: int) -> int:
    return max_body + 65536 if headers.get("warc-type", "").lower() in _PAGE_TYPES else 0


def _http_url(uri: str) -> bool:
    return uri[:7].lower() == "http://" or uri[:8].lower() == "https://"


def _work(args: tuple[int, str, str, ExtractOptions]) -> _FileOut:
    """Extract one WARC file into part files ``{index}.*`` of ``part_dir``."""
    index, path, part_dir, options = args
    out = _FileOut()
    decider = _Decider(options)
    base = os.path.join(part_dir, f"{index:06d}")

    def damage(d: Damage) -> None:
        out.skipped.append({"file": path, "offset": d.offset, "reason": d.reason})
        print(f"skitter: {path}: offset {d.offset}: {d.reason} (skipped)", file=sys.stderr)

    max_body = options.max_body_bytes
    with (
        open(path, "rb") as f,
        open(base + ".links", "w", encoding="utf-8", errors="replace") as links_f,
        open(base + ".pages", "w", encoding="utf-8", errors="replace") as pages_f,
        open(base + ".keys", "w", encoding="utf-8") as keys_f,
        open(base + ".revisits", "w", encoding="utf-8") as rev_f,
    ):
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
                _defer_revisit(rec, url, path, rev_f)
                continue
            p = payload_of(rec, max_body_bytes=max_body)
            if p is None:
                continue
            loc = f"{rec.offset}\t{rec.inner}\n"
            rid = rec.headers.get("warc-record-id")
            if rid:
                keys_f.write(f"{rid}\t{index}\t{loc}")
            digest = rec.headers.get("warc-payload-digest")
            if digest:
                keys_f.write(f"{digest}\t{index}\t{loc}")
            _emit(out, url, rec.headers.get("warc-date", ""), p, decider, options, links_f, pages_f)
        out.bytes_read = f.tell()
    return out


def _emit(
    out: _FileOut,
    url: str,
    date: str,
    p: HttpPayload,
    decider: _Decider,
    options: ExtractOptions,
    links_f: Any,
    pages_f: Any,
) -> None:
    rows = _page_rows(url, p, decider, options.bot_token)
    if rows:
        links_f.write(format_rows(rows))
        out.links += len(rows)
        out.decisions.update(r[6] for r in rows)
    pages_f.write(_json_line(_page_line(url, date, p)))
    out.pages += 1
    out.statuses[str(p.status) if p.status is not None else "none"] += 1
    try:
        hk = urls.host_key(url)
    except ValueError:
        return
    out.hosts.setdefault(hk, url)


def _defer_revisit(rec: Record, url: str, path: str, rev_f: Any) -> None:
    """A revisit is completed at the end, once every file's originals are known."""
    p = payload_of(rec, max_body_bytes=0)
    obj = {
        "url": url,
        "date": rec.headers.get("warc-date", ""),
        "refers_to": rec.headers.get("warc-refers-to", ""),
        "digest": rec.headers.get("warc-payload-digest", ""),
        "status": p.status if p is not None else None,
        "headers": p.headers if p is not None else {},
        "truncated": rec.headers.get("warc-truncated"),
        "file": path,
        "offset": rec.offset,
    }
    rev_f.write(json.dumps(obj) + "\n")


def _read_at(path: str, offset: int, inner: int, keep: int) -> Record | None:
    """The record at (member ``offset``, ``inner`` decompressed bytes into it), or None."""
    with open(path, "rb") as f:
        f.seek(offset)
        reader = WarcReader(f, lambda d: None, keep_bytes=keep)
        reader.skip(inner)
        for rec in reader:
            return rec
    return None


def _resolve_revisits(
    paths: Sequence[str],
    part_dir: str,
    options: ExtractOptions,
    result: ExtractResult,
    links_f: Any,
    pages_f: Any,
    hosts: dict[str, str],
) -> None:
    rev_files = [os.path.join(part_dir, f"{i:06d}.revisits") for i in range(len(paths))]
    wanted: set[str] = set()
    for rf in rev_files:
        with open(rf, encoding="utf-8") as f:
            for line in f:
                obj = json.loads(line)
                wanted.update(k for k in (obj["refers_to"], obj["digest"]) if k)
    if not wanted:
        return
    where: dict[str, tuple[int, int, int]] = {}
    for i in range(len(paths)):
        with open(os.path.join(part_dir, f"{i:06d}.keys"), encoding="utf-8") as f:
            for line in f:
                key, idx, off, inner = line.rstrip("\n").split("\t")
                if key in wanted and key not in where:
                    where[key] = (int(idx), int(off), int(inner))
    decider = _Decider(options)
    out = _FileOut()
    for rf in rev_files:
        with open(rf, encoding="utf-8") as f:
            for line in f:
                obj = json.loads(line)
                loc = where.get(obj["refers_to"]) or where.get(obj["digest"])
                orig = None
                if loc is not None:
                    orig = _read_at(paths[loc[0]], loc[1], loc[2], options.max_body_bytes + 65536)
                op = payload_of(orig, max_body_bytes=options.max_body_bytes) if orig else None
                if op is None:
                    result.revisits_unresolved += 1
                    p = HttpPayload(status=obj["status"], headers=obj["headers"])
                    p.note = "revisit: the record it refers to is not in these files"
                else:
                    result.revisits_resolved += 1
                    headers = obj["headers"] or op.headers
                    ct = headers.get("content-type") or (
                        [op.content_type] if op.content_type else []
                    )
                    p = HttpPayload(
                        status=obj["status"] if obj["status"] is not None else op.status,
                        headers=headers,
                        body=op.body,
                        stored=op.stored,
                        content_type=ct[0] if ct else None,
                        truncated=obj["truncated"] or op.truncated,
                        note=op.note,
                    )
                _emit(out, obj["url"], obj["date"], p, decider, options, links_f, pages_f)
    _add(result, out, hosts)


def _add(result: ExtractResult, out: _FileOut, hosts: dict[str, str]) -> None:
    result.records += out.records
    result.pages += out.pages
    result.links += out.links
    result.bytes_read += out.bytes_read
    result.decisions.update(out.decisions)
    result.statuses.update(out.statuses)
    result.skipped.extend(out.skipped)
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
            if len(memo) > _MEMO_SIZE:
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
    _Decider(options)  # invalid scope settings fail here, before any work
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
            rev_links = part_dir / "revisits.links"
            rev_pages = part_dir / "revisits.pages"
            with (
                open(rev_links, "w", encoding="utf-8", errors="replace") as rl,
                open(rev_pages, "w", encoding="utf-8", errors="replace") as rp,
            ):
                _resolve_revisits(paths, str(part_dir), options, result, rl, rp, hosts)
            rescope: Callable[[str], bool] | None = None
            if not options.seeds:
                rescope = _scope_test(ScopeRule(options.scope, list(hosts.values())), options.scope)
            for i in range(len(paths)):
                _copy_links(str(part_dir / f"{i:06d}.links"), links_f, rescope, result.decisions)
                with open(part_dir / f"{i:06d}.pages", encoding="utf-8", errors="replace") as pf:
                    shutil.copyfileobj(pf, pages_f, 1 << 20)
            _copy_links(str(rev_links), links_f, rescope, result.decisions)
            with open(rev_pages, encoding="utf-8", errors="replace") as pf:
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
