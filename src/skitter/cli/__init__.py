"""The ``skitter`` command line.

Each subcommand is a module of this package with ``add_parser(subparsers)`` and
``run(args) -> int``; :data:`COMMANDS` maps the command names to them, in ``--help`` order.
A new command is a new module and one line in :data:`COMMANDS`.

Exit codes (``EXIT_CODES`` in :mod:`skitter.cli.common`; when several apply the first
wins): 130 interrupted (resumable); 2 usage error, bad config or unusable input/output (one
line on stderr, no traceback); 1 the output could not be written, a crawler process died, or
(check-links) broken links found; 4 no seed got any HTTP response; 0 success.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from skitter import __version__
from skitter.cli.common import Parser, settings_from_args
from skitter.cli.config import apply_config
from skitter.cli.outcome import error_exit
from skitter.errors import ConfigError
from skitter.logs import setup_logging

__all__ = ["COMMANDS", "build_parser", "main", "settings_from_args"]

#: command name -> name of its module in this package (``add_parser(subparsers)`` and
#: ``run(args) -> int``). Modules are imported on demand: a plain ``skitter crawl`` must not
#: pay for (or hold in memory) Redis, the status server or check-links code.
COMMANDS: dict[str, str] = {
    "crawl": "crawl",
    "check-links": "check_links",
    "fetch": "fetch",
    "extract": "extract",
    "index": "index",
    "graph": "graph",
    "merge": "merge",
    "report": "report",
    "worker": "worker",
    "status": "status",
    "control": "control",
}


def command_module(name: str) -> ModuleType:
    """The module of command ``name`` (a key of :data:`COMMANDS`), imported on first use.

    Raises KeyError for an unknown command name."""
    return importlib.import_module(f"skitter.cli.{COMMANDS[name]}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser for every subcommand, or for the one command ``only`` (so that only
    its module is imported). Defaults are suppressed so that a resume can tell given flags from
    defaults."""
    parser = Parser(prog="skitter", description="A polite, fast, resumable web crawler.")
    parser.add_argument("--version", action="version", version=f"skitter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in COMMANDS if only is None else (only,):
        command_module(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``skitter`` command; returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    # ``skitter COMMAND ...``: build (and import) only that command's parser.
    only = args_list[0] if args_list and args_list[0] in COMMANDS else None
    parser = build_parser(only)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if getattr(args, "config", None) is not None:
            apply_config(args, sub.choices[args.command], args.config)
        setup_logging(bool(getattr(args, "verbose", False)), getattr(args, "log_file", None))
    except (ConfigError, OSError) as exc:
        return error_exit(exc)
    try:
        code: int = command_module(args.command).run(args)
    except KeyboardInterrupt:  # a command without its own Ctrl-C handling (graph, merge...)
        print(f"skitter {args.command}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
