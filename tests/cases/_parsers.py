"""Run a case test again under aiohttp's pure-Python HTTP parser.

aiohttp picks its C parser (llhttp) or the pure-Python one when it is imported
(``AIOHTTP_NO_EXTENSIONS=1`` forces the latter), so the second run is a pytest subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from aiohttp import http_parser

REPO = Path(__file__).resolve().parents[2]


def pure_python() -> bool:
    """True when this process parses HTTP with aiohttp's pure-Python parser."""
    return http_parser.HttpResponseParser is http_parser.HttpResponseParserPy


def expect_parser() -> None:
    """Pin which parser runs: the C one normally, Python under ``AIOHTTP_NO_EXTENSIONS``."""
    wanted_py = bool(os.environ.get("AIOHTTP_NO_EXTENSIONS"))
    assert pure_python() == wanted_py, "aiohttp did not pick the expected HTTP parser"


def run_under_pure_python(test_id: str, timeout_s: float = 240.0) -> None:
    """Run the pytest node ``test_id`` (``path::name``) with ``AIOHTTP_NO_EXTENSIONS=1``."""
    env = {**os.environ, "AIOHTTP_NO_EXTENSIONS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test_id],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
