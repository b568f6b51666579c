"""Flags of file-type focus and self-tuning: ``--accept-type``, ``--reject-type``,
``--accept-ext``, ``--reject-ext``, ``--save-files``, ``--concurrency auto``, ``--cpu-target``,
``--max-memory``, ``--timeout auto`` (:mod:`skitter.typefocus`, :mod:`skitter.autotune`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from skitter.settings import CrawlSettings, FocusSettings
from skitter.typefocus import normalize_ext, normalize_type

__all__ = ["AUTO_CONCURRENCY_MAX", "AutoOr", "add_focus_flags", "focus_from_args"]

#: The ceiling of ``--concurrency auto`` unless a number is also given.
AUTO_CONCURRENCY_MAX = 256


class AutoOr(argparse.Action):
    """``--flag auto`` sets ``<dest>_auto``; ``--flag N`` stores ``number(N)`` in ``dest``
    (with auto: its ceiling or hard cap). Both may be given."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, number: Callable[[str], Any], **kw: Any
    ) -> None:
        self.number = number
        super().__init__(option_strings, dest, **kw)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        text = str(values)
        if text.strip().lower() == "auto":
            setattr(namespace, f"{self.dest}_auto", True)
            return
        try:
            setattr(namespace, self.dest, self.number(text))
        except argparse.ArgumentTypeError as exc:
            parser.error(f"argument {option_string}: {exc} (or 'auto')")


def _checked(fn: Callable[[str], str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = fn.__name__
    return parse


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.05 <= v <= 64:
        raise argparse.ArgumentTypeError(f"a share of one core between 0.05 and 64: {text!r}")
    return v


def add_focus_flags(c: argparse.ArgumentParser) -> None:
    """Add the file-type and self-tuning flags (``crawl``)."""
    from skitter.cli.common import size

    g = c.add_argument_group("file types (wget -A/-R)")
    mime, ext = _checked(normalize_type), _checked(normalize_ext)
    g.add_argument(
        "--accept-type",
        action="append",
        type=mime,
        metavar="TYPE",
        help="keep only responses of this media type or family (application/pdf, image/*); "
        "HTML is still read for links",
    )
    g.add_argument(
        "--reject-type",
        action="append",
        type=mime,
        metavar="TYPE",
        help="drop responses of this type on their headers (pages.jsonl error rejected_type)",
    )
    g.add_argument(
        "--accept-ext",
        action="append",
        type=ext,
        metavar="EXT",
        help="keep only URLs whose path ends in .EXT (links to other files are not queued)",
    )
    g.add_argument(
        "--reject-ext",
        action="append",
        type=ext,
        metavar="EXT",
        help="do not queue links whose path ends in .EXT (links.tsv decision 'type')",
    )
    g.add_argument(
        "--save-files",
        metavar="DIR",
        help="also write each kept response body to DIR/host/path (wget -x layout)",
    )
    g = c.add_argument_group("self-tuning (--concurrency auto, --timeout auto)")
    g.add_argument(
        "--cpu-target",
        type=_fraction,
        metavar="CORES",
        help="--concurrency auto keeps the process below this share of a core, default 0.85",
    )
    g.add_argument(
        "--max-memory",
        type=size,
        metavar="BYTES",
        help="--concurrency auto backs off above this resident memory, "
        "default a quarter of the machine",
    )


def focus_from_args(args: argparse.Namespace, settings: CrawlSettings) -> CrawlSettings:
    """``settings`` with the focus flags applied on top of ``settings.focus`` (the stored
    ones on resume). ``--concurrency auto`` without a number raises the ceiling to
    :data:`AUTO_CONCURRENCY_MAX`."""
    a: dict[str, Any] = vars(args)
    f: FocusSettings = settings.focus
    changes: dict[str, Any] = {}
    for name in ("accept_type", "reject_type", "accept_ext", "reject_ext"):
        if name in a:
            changes[f"{name}s"] = tuple(dict.fromkeys(a[name]))
    for name, field in (
        ("save_files", "save_files"),
        ("cpu_target", "cpu_target"),
        ("max_memory", "max_memory_bytes"),
        ("concurrency_auto", "concurrency_auto"),
        ("timeout_auto", "timeout_auto"),
    ):
        if name in a:
            changes[field] = a[name]
    if not changes:
        return settings
    out = replace(settings, focus=replace(f, **changes))
    if a.get("concurrency_auto") and "concurrency" not in a:
        out = replace(out, politeness=replace(out.politeness, concurrency=AUTO_CONCURRENCY_MAX))
    return out
