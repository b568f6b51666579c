"""The crawl's state on disk, in its output folder.

Files (all in ``--out DIR``)::

    state.json         format version, the crawl's settings and seeds (written atomically at the
                       start, and on a resume that changes a setting)
    skitter.lock       held (flock) while a command writes the folder: skitter.folder_lock
    checkpoint.json    offsets of pages.jsonl / links.tsv and the stats at the last frontier commit
    requeued.txt       URLs queued on a resume that loosened a limit (skitter.recovery): their
                       trap budgets, which links.tsv (decision kept as written) does not show
    frontier.sqlite    the frontier (SQLite backend)
    cookies.json       the cookie jar
    pages.jsonl, links.tsv, *.warc.gz, report.json   the outputs

Every file is replaced atomically (temp file + ``os.replace``) or appended one unit per
``write()``, so a ``kill -9`` at any instant leaves the folder usable: see
:mod:`skitter.recovery` for how resume reconciles the journals with the frontier.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import MISSING, asdict, fields, replace
from pathlib import Path
from typing import Any

from skitter import __version__, compact_json
from skitter.errors import ConfigError, StateError
from skitter.folder_lock import LOCK_FILE
from skitter.settings import (
    CrawlSettings,
    FetchSettings,
    FocusSettings,
    PolitenessSettings,
    QualitySettings,
    ScopeSettings,
    redact_url,
)

__all__ = [
    "FORMAT_VERSION",
    "RESUME_LIMITS",
    "atomic_write_json",
    "check_resume_compatible",
    "checkpoint_limits",
    "limits_in_checkpoint",
    "load_state",
    "loosened_limits",
    "prepare_new_out_dir",
    "read_json",
    "resume_limits",
    "save_resumed_state",
    "save_state",
    "settings_from_dict",
    "settings_to_dict",
]

#: Bumped whenever the on-disk layout changes incompatibly.
FORMAT_VERSION = 2  # 2: host spellings normalised (urls.normalize_host), new fingerprints

STATE_FILE = "state.json"
CHECKPOINT_FILE = "checkpoint.json"
FRONTIER_FILE = "frontier.sqlite"
COOKIES_FILE = "cookies.json"
PAGES_FILE = "pages.jsonl"
LINKS_FILE = "links.tsv"
REPORT_FILE = "report.json"
SITEMAPS_FILE = "sitemaps.json"
REQUEUED_FILE = "requeued.txt"  # URLs queued by a resume that loosened a limit (recovery)
MERGE_FILE = "merge.json"  # --processes: how far the shards are merged (skitter.shard_merge.Merger)


def atomic_write_json(path: Path, data: Any, *, compact: bool = False) -> None:
    """Write ``data`` as JSON to ``path`` atomically (temp file, fsync, ``os.replace``):
    indented for people to read, or on one line with ``compact`` (json's C encoder: ~10x
    less CPU, for state written often, such as the checkpoint every 2 s).

    Raises:
        OSError: the file could not be written (its ``filename`` says which); the temporary
            file is removed and ``path`` keeps its previous content.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            if compact:
                fh.write(compact_json.encode(data).decode("utf-8"))
            else:
                json.dump(data, fh, ensure_ascii=False, indent=1)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        # never leave a stray temporary file; the previous ``path`` is still whole
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise


def read_json(path: Path) -> Any:
    """Read a JSON file; raises StateError with a one-line message if unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise StateError(f"cannot read {path}: {exc}") from None


def settings_to_dict(settings: CrawlSettings) -> dict[str, Any]:
    """CrawlSettings → JSON-ready dict (the ``resolve`` map becomes a list of triples; a
    Redis URL's password becomes ``***``: :func:`skitter.settings.redact_url`)."""
    d = asdict(settings)
    d["frontier"] = redact_url(settings.frontier)
    d["fetch"]["resolve"] = [[h, p, a] for (h, p), a in settings.fetch.resolve.items()]
    return d


def _build(cls: Any, data: dict[str, Any]) -> Any:
    names = {f.name for f in fields(cls)}
    kwargs = {k: v for k, v in data.items() if k in names}
    defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    for f in fields(cls):
        if f.name in kwargs and isinstance(kwargs[f.name], list):
            kwargs[f.name] = tuple(tuple(x) if isinstance(x, list) else x for x in kwargs[f.name])
        if f.name not in kwargs or f.name not in defaults:
            continue
        value, default = kwargs[f.name], defaults[f.name]
        if default is None or value is None:
            continue
        expected = (int, float) if isinstance(default, float) else type(default)
        if not isinstance(value, expected) or (
            isinstance(value, bool) != isinstance(default, bool)
        ):
            raise ValueError(f"{f.name} should be {type(default).__name__}, not {value!r}")
    return cls(**kwargs)


def settings_from_dict(data: dict[str, Any]) -> CrawlSettings:
    """Inverse of :func:`settings_to_dict`."""
    fetch = dict(data.get("fetch", {}))
    fetch["resolve"] = {(h, int(p)): a for h, p, a in fetch.get("resolve", [])}
    fetch_s = _build(FetchSettings, {k: v for k, v in fetch.items() if k != "resolve"})
    fetch_s = replace(fetch_s, resolve=fetch["resolve"])
    result: CrawlSettings = replace(
        _build(
            CrawlSettings,
            {
                k: v
                for k, v in data.items()
                if k not in ("fetch", "politeness", "scope", "quality", "focus")
            },
        ),
        focus=_build(FocusSettings, data.get("focus", {})),
        fetch=fetch_s,
        politeness=_build(PolitenessSettings, data.get("politeness", {})),
        scope=_build(ScopeSettings, data.get("scope", {})),
        quality=_build(QualitySettings, data.get("quality", {})),
    )
    return result


#: What a crawl killed while starting, before state.json, can have left (the write probe, the
#: temporary state.json): nothing to resume, so the same command may start again there.
_START_LEFTOVERS = frozenset({".write-test", STATE_FILE + ".tmp", LOCK_FILE})


def prepare_new_out_dir(out_dir: Path) -> None:
    """Create ``out_dir`` for a new crawl (a folder holding only :data:`_START_LEFTOVERS`
    counts as empty).

    Raises:
        StateError: the folder exists and is not empty (a new crawl never mixes with an old one),
            or cannot be created/written.
    """
    if out_dir.exists():
        if not out_dir.is_dir():
            raise StateError(f"output path {out_dir} exists and is not a folder")
        if any(f.name not in _START_LEFTOVERS for f in out_dir.iterdir()):
            if (out_dir / STATE_FILE).exists():
                raise StateError(
                    f"output folder {out_dir} holds a crawl; continue it with "
                    f"'skitter crawl --resume --out {out_dir}' or choose another folder"
                )
            raise StateError(f"output folder {out_dir} is not empty")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StateError(f"cannot write to output folder {out_dir}: {exc.strerror}") from None


def save_state(out_dir: Path, settings: CrawlSettings) -> None:
    """Write state.json: format version, Skitter version and the settings."""
    atomic_write_json(
        out_dir / STATE_FILE,
        {"format": FORMAT_VERSION, "skitter": __version__, "settings": settings_to_dict(settings)},
    )


def save_resumed_state(out_dir: Path, settings: CrawlSettings) -> bool:
    """On resume: store the settings given now (the limits, politeness... that may change,
    :data:`FIXED_ON_RESUME` being checked already) in state.json, so that a later
    ``--resume`` without flags goes on with them (a ``--max-pages`` raised or lifted stays
    so). Written (atomically) only when they differ from the stored ones; call with the
    folder's lock held (:mod:`skitter.folder_lock`).

    Returns:
        True when state.json was rewritten.
    Raises:
        StateError: state.json unreadable. OSError: it cannot be written.
    """
    stored = load_state(out_dir)
    now = replace(settings, out_dir=stored.out_dir, resume=stored.resume, quiet=stored.quiet)
    if settings_to_dict(now) == settings_to_dict(stored):
        return False
    save_state(out_dir, now)
    return True


def load_state(out_dir: Path) -> CrawlSettings:
    """Read state.json of a crawl to resume.

    Raises:
        StateError: no crawl in the folder, or its format version is not this Skitter's.
    """
    path = out_dir / STATE_FILE
    if not path.exists():
        raise StateError(f"no crawl to resume in {out_dir} (state.json missing)")
    _refuse_process_folder(out_dir)
    data = read_json(path)
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt != FORMAT_VERSION:
        raise StateError(
            f"{out_dir} was written in state format {fmt!r}; this Skitter "
            f"{__version__} reads format {FORMAT_VERSION} only"
        )
    try:
        return settings_from_dict(data["settings"])
    except (KeyError, TypeError, ValueError, AttributeError, ConfigError) as exc:
        raise StateError(f"{path} is damaged ({type(exc).__name__}: {exc})") from None


def _refuse_process_folder(out_dir: Path) -> None:
    """Refuse ``OUT/shards/K`` of a ``--processes`` crawl: resumed alone, it would crawl every
    host as a one-process crawl into the shard and the whole crawl's next resume would merge
    those pages again (the same URLs twice in pages.jsonl).

    Raises:
        StateError: naming the crawl folder to give instead.
    """
    parent = out_dir.absolute().parent
    if parent.name == "shards" and (parent.parent / STATE_FILE).exists():  # sharding.SHARDS_DIR
        raise StateError(
            f"{out_dir} is the folder of process {out_dir.absolute().name} of the crawl in "
            f"{parent.parent}: give that folder instead"
        )


#: Settings that define *what* is crawled: they may not change on resume.
FIXED_ON_RESUME = (
    ("seeds", lambda s: tuple(s.seeds)),
    ("scope", lambda s: s.scope.scope),
    ("include", lambda s: tuple(s.scope.include)),
    ("exclude", lambda s: tuple(s.scope.exclude)),
    ("max-url-length", lambda s: s.scope.max_url_length),
    ("follow-nofollow", lambda s: s.scope.follow_nofollow),
    ("ignore-robots", lambda s: s.politeness.ignore_robots),
    ("frontier", lambda s: redact_url(s.frontier)),
    ("dedup", lambda s: s.quality.dedup),
    ("sitemaps", lambda s: s.quality.sitemaps),
    ("sitemap", lambda s: tuple(s.quality.sitemap_urls)),
    ("processes", lambda s: s.processes),
    ("links-compress", lambda s: s.links_compress),
)


def resume_limits(scope: ScopeSettings) -> dict[str, int | None]:
    """The limits on what is queued that may change on resume (:data:`RESUME_LIMITS`), as
    the crawl applies them: ``None`` = no limit (a trap limit or per-host cap of 0 is off;
    ``max_seed_links`` is the seed pages' cap in effect, ``max_links_per_page`` when unset).
    Written in checkpoint.json (the limits a session ran with) and compared by
    :func:`loosened_limits`."""
    seed = scope.max_seed_links if scope.max_seed_links is not None else scope.max_links_per_page
    return {
        "max_depth": scope.max_depth,
        "max_links_per_page": scope.max_links_per_page,
        "max_seed_links": seed,
        "max_pages_per_host": scope.max_pages_per_host or None,
        "max_path_depth": scope.max_path_depth or None,
        "max_query_variants_per_path": scope.max_query_variants_per_path or None,
        "max_segment_repeats": scope.max_segment_repeats or None,
    }


#: The limits a resume may change (raised: what they left out is queued; see skitter.recovery).
RESUME_LIMITS = tuple(resume_limits(ScopeSettings()))


def loosened_limits(before: dict[str, Any], now: dict[str, int | None]) -> list[str]:
    """The names (as flags: ``max-pages-per-host``) of the limits of ``now``
    (:func:`resume_limits`) raised or lifted since ``before`` (the same shape, as read
    from a checkpoint: a limit missing or not a number there is taken as unchanged)."""
    out: list[str] = []
    for name in RESUME_LIMITS:
        old, new = before.get(name), now.get(name)
        if isinstance(old, bool) or not isinstance(old, int):
            continue  # no limit before, or unknown (an older checkpoint)
        if new is None or new > old:
            out.append(name.replace("_", "-"))
    return out


def limits_in_checkpoint(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The limits (:func:`resume_limits`) a checkpoint.json's session ran with; one of an
    older Skitter knows ``max_depth`` only, or nothing."""
    limits = checkpoint.get("limits")
    if isinstance(limits, dict):
        return limits
    return {"max_depth": checkpoint["max_depth"]} if "max_depth" in checkpoint else {}


def checkpoint_limits(out_dir: Path) -> dict[str, Any] | None:
    """The limits the crawl in ``out_dir`` last ran with (:func:`limits_in_checkpoint`), from
    its checkpoint.json (process 0's for a ``--processes`` crawl: every process runs with
    the same), or None when there is no readable checkpoint."""
    for path in (out_dir / CHECKPOINT_FILE, out_dir / "shards" / "0" / CHECKPOINT_FILE):
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        return limits_in_checkpoint(data) if isinstance(data, dict) else None
    return None


def check_resume_compatible(stored: CrawlSettings, given: CrawlSettings) -> None:
    """Refuse a resume whose scope or seeds differ from the stored crawl.

    Raises:
        StateError: naming the first setting that differs.
    """
    for name, get in FIXED_ON_RESUME:
        if get(stored) != get(given):
            raise StateError(
                f"--{name} differs from the crawl being resumed "
                f"({get(stored)!r} stored, {get(given)!r} given); what is crawled and the "
                "number of processes cannot change on resume"
            )
