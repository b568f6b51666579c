"""Which build of the hot-path modules runs: mypyc-compiled, or the Python sources.

``setup.py`` compiles a few modules (URL resolution, canonical form, link extraction and
decisions) with mypyc and records the SHA-256 of each source in ``_native_sources.json``.
An extension module shadows its ``.py`` on import, so after the sources are edited in an
editable install the compiled code would be stale. :func:`install` puts a finder first on
``sys.meta_path`` that loads every recorded module from its ``.py`` file when

* any recorded source differs from its digest (all of them, not just the edited one: the
  compiled modules call each other directly, so they are current together or not at all),
* or the environment sets ``SKITTER_PURE=1`` (the tests run the pure path this way too).

Otherwise the normal import system finds the extension modules. :func:`active` says which.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["active", "install"]

_PACKAGE_DIR = Path(__file__).resolve().parent
_SOURCES = _PACKAGE_DIR / "_native_sources.json"


def _source(module: str) -> Path:
    """The ``.py`` file of a compiled module (``skitter.export.warc_record`` -> its path)."""
    return _PACKAGE_DIR.joinpath(*module.split(".")[1:-1], module.rpartition(".")[2] + ".py")


class _SourceFinder:
    """Finds the recorded modules' ``.py`` files (ahead of their extension modules): an
    :class:`importlib.abc.MetaPathFinder` by its ``find_spec``, not by inheritance (importing
    :mod:`importlib.abc` loads :mod:`importlib.resources`, zipfile, lzma...: ~3 MiB in every
    process that imports skitter, the ``--processes`` coordinator too)."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_file_location(fullname, _source(fullname))


def _recorded() -> dict[str, str]:
    try:
        data = json.loads(_SOURCES.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` (hex), from CPython's own implementation when it has one:
    importing :mod:`hashlib` loads and initialises OpenSSL's libcrypto (~4 MiB resident),
    which the ``--processes`` coordinator does not need otherwise."""
    for name in ("_sha2", "_sha256"):  # (CPython 3.12+, 3.11)
        try:
            module: Any = importlib.import_module(name)
        except ImportError:
            continue
        return str(module.sha256(data).hexdigest())
    import hashlib  # pragma: no cover - a Python without them

    return hashlib.sha256(data).hexdigest()  # pragma: no cover


def _current(recorded: dict[str, str]) -> bool:
    for name, digest in recorded.items():
        try:
            if _sha256_hex(_source(name).read_bytes()) != digest:
                return False
        except OSError:
            return False
    return True


def install() -> None:
    """Choose the build once per process (called by ``skitter/__init__``); never raises."""
    recorded = _recorded()
    if not recorded:
        return  # nothing compiled: the .py files are all there is
    if os.environ.get("SKITTER_PURE") == "1" or not _current(recorded):
        sys.meta_path.insert(0, _SourceFinder(frozenset(recorded)))


def active() -> bool:
    """True when the compiled hot-path modules are in use (``skitter.urls`` was loaded from
    an extension module)."""
    import skitter.urls

    return not str(skitter.urls.__file__).endswith(".py")
