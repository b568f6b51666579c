"""WARC files written by a test, checked with ``warcio check`` (the archive tools' reader)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

WARCIO = str(Path(sys.executable).parent / "warcio")


def warcio_check(*paths: str | Path) -> str:
    """Run ``warcio check -v`` on the WARC ``paths``; assert that it exits 0 (else the test
    fails with its output). Returns its output (stdout + stderr)."""
    check = subprocess.run(
        [WARCIO, "check", "-v", *map(str, paths)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    return check.stdout + check.stderr


def warc_records(out: Path) -> list[tuple[str, dict[str, str]]]:
    """``(record type, WARC headers)`` of every record of ``out``/*.warc.gz in name order,
    each file passing :func:`warcio_check` first."""
    recs: list[tuple[str, dict[str, str]]] = []
    for w in sorted(out.glob("*.warc.gz")):
        warcio_check(w)
        with open(w, "rb") as f:
            recs += [(r.rec_type, dict(r.rec_headers.headers)) for r in ArchiveIterator(f)]
    return recs
