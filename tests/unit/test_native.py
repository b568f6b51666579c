"""The mypyc build of the hot path (setup.py, skitter._native): in use when current, never stale,
and the pure-Python path passes the same tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import skitter
from skitter import _native

PACKAGE = Path(skitter.__file__).resolve().parent
SRC = PACKAGE.parent
RECORDED = PACKAGE / "_native_sources.json"
ROOT = SRC.parent

#: The tests of the compiled modules, run once more on their .py files.
HOT_TESTS = [
    "tests/unit/test_url_simple.py",
    "tests/unit/test_urls.py",
    "tests/unit/test_urls_whatwg.py",
    "tests/unit/test_links.py",
    "tests/unit/test_rules.py",
    "tests/unit/test_traps.py",
    "tests/unit/test_export_warc.py",
    "tests/unit/test_export_warc_bytes.py",
    "tests/offline/test_surt_key.py",
]


def _modules() -> list[str]:
    return sorted(json.loads(RECORDED.read_text()))


def _files(pythonpath: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """Where each compiled module is loaded from, in a fresh interpreter."""
    code = (
        "import importlib, json, sys\n"
        "print(json.dumps({m: importlib.import_module(m).__file__ for m in sys.argv[1:]}))"
    )
    run_env = {k: v for k, v in os.environ.items() if k != "SKITTER_PURE"}
    run_env.update(PYTHONPATH=str(pythonpath), **(env or {}))
    out = subprocess.run(
        [sys.executable, "-c", code, *_modules()],
        env=run_env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files: dict[str, str] = json.loads(out)
    return files


def test_the_install_compiled_the_hot_path() -> None:
    # `make install` builds it (gcc from scripts/system-deps.sh): a missing compiler shows here
    assert RECORDED.is_file(), "no _native_sources.json: setup.py did not run mypyc"
    files = _files(SRC)
    assert all(f.endswith(".so") for f in files.values()), files
    assert _native.active() == (os.environ.get("SKITTER_PURE") != "1")


def test_skitter_pure_runs_the_python_files() -> None:
    files = _files(SRC, {"SKITTER_PURE": "1"})
    assert files == {m: str(_native._source(m)) for m in _modules()}


def test_an_edited_source_makes_all_compiled_modules_run_as_python(tmp_path: Path) -> None:
    copy = tmp_path / "src"
    shutil.copytree(PACKAGE, copy / "skitter", ignore=shutil.ignore_patterns("__pycache__"))
    for lib in SRC.glob("skitter_native__mypyc*.so"):
        shutil.copy(lib, copy / lib.name)
    assert all(f.endswith(".so") for f in _files(copy).values())
    # one module edited since the build: every compiled module is loaded from its .py
    # (they call each other natively, so the others would still run the old code)
    edited = copy / "skitter" / "url_simple.py"
    edited.write_text(edited.read_text() + "\n# edited\n")
    files = _files(copy)
    want = {m: str(copy.joinpath(*m.split(".")[:-1], m.split(".")[-1] + ".py")) for m in _modules()}
    assert files == want


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~1,300 tests in one subprocess: ~40 s alone, minutes under load
def test_the_pure_path_passes_the_hot_path_tests() -> None:
    env = {**os.environ, "SKITTER_PURE": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *HOT_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout
