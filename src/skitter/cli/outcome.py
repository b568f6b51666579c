"""How a command ends: its exit code, its summary on stdout and its one-line errors on stderr.

Exit codes: :data:`EXIT_CODES` (README "Exit codes" has the same) and :func:`exit_code`. The
failure of a crawling command (``crawl``, ``fetch``, ``worker``) is told by
:func:`failure_exit`: one line (two for a worker that lost Redis) and the code.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skitter.errors import FrontierError, OutputError, SkitterError
from skitter.state import STATE_FILE

__all__ = [
    "EXIT_CODES",
    "EXIT_PRECEDENCE",
    "error_exit",
    "exit_code",
    "failure_exit",
    "finished_report",
    "no_seed_answered",
    "os_error_line",
    "output_failure_line",
    "plural",
    "stats_line",
    "summary_lines",
    "write_stdout",
]

#: The exit codes of the crawling commands, for ``--help`` (README "Exit codes" has the same).
EXIT_CODES = """exit codes (when several apply, the first listed wins):
  130  interrupted (Ctrl-C, SIGTERM): resumable with --resume --out DIR
  2    bad flags, config file, seeds or output folder (one line on stderr)
  1    the output could not be written (disk full, I/O error: one line naming the
       file, and the resume command), or a crawler process died; check-links: broken
       links found
  4    no seed got any HTTP response (DNS, connect, TLS, timeout, robots.txt
       unreachable, or every URL refused by robots.txt): nothing could be crawled
  0    done"""


def write_stdout(lines: list[str]) -> OSError | None:
    """Print ``lines`` (a summary, a report) on stdout. Returns None, or the error when stdout
    cannot be written (disk full, a closed pipe such as ``| head``); stdout is then pointed at
    /dev/null so that the interpreter's last flush fails no more."""
    import os

    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except OSError as exc:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return exc
    return None


def os_error_line(exc: OSError) -> str:
    """The one-line message of an I/O error: "skitter: error: REASON: FILE" (no ": FILE"
    when the error names none)."""
    name = getattr(exc, "filename", None)
    return f"skitter: error: {exc.strerror or exc}" + (f": {name}" if name else "")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 URL"``, ``"2 URLs"`` (thousands separated)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def stats_line(records: int, rate: float, queued: int, inflight: int, errors: int) -> str:
    """The periodic ``--stats-interval`` line (stderr not a terminal), as Scrapy's
    (``rate`` in pages per second)."""
    return (
        f"skitter: stats: {plural(records, 'page')} ({rate:,.1f} pages/s), {queued:,} queued, "
        f"{inflight:,} in flight, {plural(errors, 'error')}"
    )


def no_seed_answered(totals: dict[str, Any]) -> bool:
    """True when no page of the crawl got an HTTP response: no record has a status. A seed
    whose every URL robots.txt refused (or whose robots.txt could not be fetched) is not
    answered: exit code 4, as wget says failure. Every record comes from a seed or a page
    reached from one, so this is "no seed got any HTTP response".

    Args:
        totals: report.json ``totals`` (:meth:`skitter.stats.StatsSnapshot.to_dict`).
    """
    return sum(int(v) for v in totals.get("by_status", {}).values()) == 0


#: Exit codes, most important first (``EXIT_CODES`` explains them).
EXIT_PRECEDENCE = (130, 2, 1, 4, 0)


def exit_code(*codes: int) -> int:
    """The exit code that wins among ``codes``: 130 > 2 > 1 > 4 > 0."""
    return min(codes, key=EXIT_PRECEDENCE.index, default=0)


def summary_lines(totals: dict[str, Any]) -> list[str]:
    """The end-of-crawl summary, rendered from report.json ``totals`` only, so that both
    always say the same (a 2xx record cut off as ``body_too_large`` is counted in ``ok``
    and in ``errors`` in both)."""
    by_status = {int(k): int(v) for k, v in totals.get("by_status", {}).items()}

    def band(lo: int) -> int:
        return sum(n for s, n in by_status.items() if lo <= s < lo + 100)

    errors = totals.get("by_error", {})
    kinds = ", ".join(f"{k} {n:,}" for k, n in sorted(errors.items()))
    return [
        f"{plural(int(totals.get('records', 0)), 'page')}: {int(totals.get('ok', 0)):,} ok "
        f"(2xx), {plural(band(300), 'redirect')} (3xx), {plural(band(400), 'client error')} "
        f"(4xx), {plural(band(500), 'server error')} (5xx), "
        f"{plural(int(totals.get('errors', 0)), 'error')}"
        + (f" ({kinds})" if kinds else "")
        + f"; {plural(int(totals.get('robots_disallowed', 0)), 'more URL')} blocked by "
        f"robots.txt; {float(totals.get('elapsed_s', 0)):,.1f} s = "
        f"{float(totals.get('pages_per_s', 0)):,.1f} pages/s"
    ]


def output_failure_line(exc: OSError | OutputError, resume: str) -> str:
    """The one line for an output that could not be written during a crawl: the file, the
    cause and how to resume, e.g. ``skitter: error: cannot write out/pages.jsonl: No space
    left on device; resume with: skitter crawl --resume --out out``."""
    if isinstance(exc, OSError):
        exc = OutputError.from_os_error(exc)
    return f"skitter: error: {exc}; resume with: {resume}"


def finished_report(out: str) -> dict[str, Any] | None:
    """report.json of the crawl in ``out`` if that crawl is finished (its frontier ran dry:
    ``finished`` true, ``stop_reason`` "done"), else None (unfinished, stopped by a limit or
    a signal, or no readable report)."""
    import json

    try:
        report = json.loads((Path(out) / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict):
        return None
    done = report.get("finished") is True or report.get("stop_reason") in ("done", "finished")
    return report if done else None


def error_exit(exc: SkitterError | OSError) -> int:
    """Tell an error on stderr in one line (``skitter: error: ...``, see :func:`os_error_line`
    for an ``OSError``); returns 2, the exit code of bad input or an unreadable file."""
    if isinstance(exc, SkitterError):
        print(f"skitter: error: {exc}", file=sys.stderr)
    else:
        print(os_error_line(exc), file=sys.stderr)
    return 2


def failure_exit(
    exc: SkitterError | OSError | KeyboardInterrupt,
    *,
    go_on: str,
    out: str | None = None,
    lost: str | None = None,
    verb: str = "resume with",
    message: Callable[[SkitterError], str] = str,
) -> int:
    """Tell on stderr why a crawling command stopped; returns its exit code.

    Args:
        exc: what stopped it.
        go_on: the command that goes on (``skitter crawl --resume --out DIR``).
        out: the output folder: an :class:`OutputError`, or an ``OSError`` once the crawl
            has started (``out``/state.json exists), is an output failure: one line naming
            the file and ``go_on``, exit 1. None: no such case (both are exit 2).
        lost: for a :class:`FrontierError` (Redis lost past ``--redis-wait``), what follows
            ``skitter: error: REASON``, exit 1; None: it is told as any other error.
        verb: how an interruption (exit 130) introduces ``go_on``.
        message: the text of any other :class:`SkitterError` (exit 2).

    Returns:
        1 (output failure, frontier lost), 2 (bad input, error) or 130 (interrupted).
    """
    if out is not None and isinstance(exc, OutputError):
        print(output_failure_line(exc, go_on), file=sys.stderr)
        return 1
    if lost is not None and isinstance(exc, FrontierError):
        print(f"skitter: error: {exc}{lost}", file=sys.stderr)
        return 1
    if isinstance(exc, SkitterError):
        print(f"skitter: error: {message(exc)}", file=sys.stderr)
        return 2
    if isinstance(exc, KeyboardInterrupt):
        print(f"interrupted; {verb}: {go_on}", file=sys.stderr)
        return 130
    if out is not None and (Path(out) / STATE_FILE).exists():  # started: output failed
        print(output_failure_line(exc, go_on), file=sys.stderr)
        return 1
    return error_exit(exc)
