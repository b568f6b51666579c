"""Build hook: the per-link hot path compiled with mypyc, the pure-Python modules kept beside it.

The modules in :data:`NATIVE` (URL resolution and canonical form, link extraction, link
decisions, scope rules and trap defences: run for every link of every page) are compiled to
C extension modules with mypyc when it is available (it is a build requirement in
pyproject.toml). Each extension is
optional: without a C compiler the install still succeeds and runs the same code as Python.

Beside the extensions the build writes ``src/skitter/_native_sources.json``: the SHA-256 of
each compiled module's source. At run time ``skitter._native`` compares it with the ``.py``
files and imports them as Python instead when any differs (an editable install whose sources
were edited since), or when ``SKITTER_PURE=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from setuptools import setup

#: Compiled modules (paths under src/skitter), all in one mypyc group. Keep it on one line:
#: the Makefile reads it (NATIVE_SRC).
NATIVE = ["url_simple.py", "url_join.py", "urls.py", "links.py", "link_decisions.py", "rules.py", "traps.py", "export/warc_record.py", "offline/surt_key.py"]  # noqa: E501

HERE = Path(__file__).resolve().parent
PACKAGE = HERE / "src" / "skitter"
SOURCES_FILE = PACKAGE / "_native_sources.json"


def _native_extensions() -> list[Any]:
    SOURCES_FILE.unlink(missing_ok=True)
    if os.environ.get("SKITTER_PURE") == "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:  # no mypyc in the build environment: a pure-Python install
        return []
    paths = [f"src/skitter/{name}" for name in NATIVE]
    # Third-party packages are not installed in the isolated build environment: their
    # imports are typed Any here, and errors are reported for the compiled modules only
    # (`make lint` checks all the code against the real packages, strictly).
    exts = mypycify(
        ["--config-file=", "--ignore-missing-imports", "--follow-imports=silent", *paths],
        opt_level="3",
        group_name="skitter_native",
    )
    for ext in exts:
        ext.optional = True  # a failed compile leaves the pure-Python module in use
    digests = {
        "skitter." + name[:-3].replace("/", "."): hashlib.sha256(
            (PACKAGE / name).read_bytes()
        ).hexdigest()
        for name in NATIVE
    }
    SOURCES_FILE.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    return list(exts)


os.chdir(HERE)  # mypycify takes paths relative to the project
setup(ext_modules=_native_extensions())
