"""``--config FILE``: command-line flags from a TOML file (TOML 1.0, :mod:`tomllib`).

Every long flag of the command is a key, spelled as the flag without ``--`` (``max-depth``,
or ``max_depth``); ``seeds`` is the list of seeds. Values go through the same checks as on
the command line. A flag given on the command line wins over the file::

    # skitter.toml
    seeds = ["https://example.org/"]
    out = "crawl-1"
    max-depth = 3
    delay = 0.5
    header = ["Accept-Language: en"]
    random-wait = true
"""

from __future__ import annotations

import argparse
import re
import tomllib
from typing import Any

from skitter.errors import ConfigError

__all__ = ["apply_config"]

#: Flags that make no sense in a config file.
_NOT_IN_CONFIG = frozenset({"config", "resume", "help", "version", "output_hint"})


def _line_of(text: str, key: str) -> int | None:
    """The 1-based line where ``key`` is assigned in TOML ``text`` (None if not found)."""
    pattern = re.compile(rf"^[ \t]*[\"']?{re.escape(key)}[\"']?[ \t]*=", re.M)
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Long-flag name (without ``--``, ``-`` and ``_`` both accepted) -> its action."""
    out: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if action.dest in _NOT_IN_CONFIG or action.help == argparse.SUPPRESS:
            continue
        names = [o[2:] for o in action.option_strings if o.startswith("--")]
        if not action.option_strings:
            names = [action.dest]  # positional: "seeds"
        for name in names:
            out[name] = action
            out[name.replace("-", "_")] = action
    return out


def _convert(action: argparse.Action, key: str, value: Any) -> Any:
    """A TOML value for ``action``, checked as the command line would check it."""

    def one(v: Any) -> Any:
        if isinstance(v, (dict, list)):
            raise ValueError(f"expected a single value, got {v!r}")
        if isinstance(v, bool):
            raise ValueError(f"expected a value, got {str(v).lower()}")
        text = str(v)
        conv = action.type if callable(action.type) else None
        result = conv(text) if conv is not None else text
        if action.choices is not None and result not in action.choices:
            choices = ", ".join(map(str, action.choices))
            raise ValueError(f"invalid choice {v!r} (choose from {choices})")
        return result

    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        # store_false flags (no-check-fragments) invert
        return value if isinstance(action, argparse._StoreTrueAction) else not value
    if isinstance(action, argparse._AppendAction) or action.nargs in ("*", "+"):
        items = value if isinstance(value, list) else [value]
        return [one(v) for v in items]
    return one(value)


def apply_config(
    args: argparse.Namespace, parser: argparse.ArgumentParser, path: str
) -> argparse.Namespace:
    """Fill ``args`` from the TOML file ``path`` where the command line left a flag out.

    Args:
        args: parsed flags (defaults suppressed: a flag absent from ``args`` was not given).
        parser: the command's parser (its actions say which keys exist and their types).
        path: the TOML file.

    Returns:
        ``args``, updated in place.

    Raises:
        ConfigError: unreadable file, bad TOML ("… at line N"), an unknown key or a bad
            value (naming the key and its line).
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        text = raw.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError(f"cannot read config file {path}: {detail}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    actions = _actions(parser)
    given = vars(args)
    for key, value in data.items():
        line = _line_of(text, key)
        where = f"config file {path}" + (f" line {line}" if line else "")
        action = actions.get(key)
        if action is None:
            raise ConfigError(f"{where}: unknown key {key!r} (not a flag of this command)")
        if action.dest in given and not (action.dest == "seeds" and not given["seeds"]):
            continue  # the command line wins
        try:
            setattr(args, action.dest, _convert(action, key, value))
        except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
            raise ConfigError(f"{where}: {key}: {exc}") from None
    return args
