"""The ``skitter`` command line.

Each subcommand is a module of this package with ``add_parser(subparsers)`` and
``run(args) -> int``; :data:`COMMANDS` maps the command names to them, in ``--help`` order.
A new command is a new module and one line in :data:`COMMANDS`.

Exit codes: 0 success; 2 usage error or unusable input/output (one line on stderr, no
traceback); 130 interrupted (the crawl can be resumed).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from types import ModuleType

from skitter import __version__
from skitter.cli import check_links, crawl, extract, fetch, graph, index, merge, report
from skitter.cli.common import Parser, settings_from_args

__all__ = ["COMMANDS", "build_parser", "main", "settings_from_args"]

#: command name -> module with ``add_parser(subparsers)`` and ``run(args) -> int``.
COMMANDS: dict[str, ModuleType] = {
    "crawl": crawl,
    "check-links": check_links,
    "fetch": fetch,
    "extract": extract,
    "index": index,
    "graph": graph,
    "merge": merge,
    "report": report,
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand (defaults are suppressed so that a resume
    can tell given flags from defaults)."""
    parser = Parser(prog="skitter", description="A polite, fast, resumable web crawler.")
    parser.add_argument("--version", action="version", version=f"skitter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``skitter`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="skitter: %(levelname)s: %(message)s",
    )
    code: int = COMMANDS[args.command].run(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
