"""``make test`` fails loudly, never skips, when ../shared (WHATWG URL data) is missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO


def test_make_test_fails_without_shared(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO / "Makefile", repo / "Makefile")
    r = subprocess.run(
        ["make", "-C", str(repo), "shared"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode != 0
    assert "../shared/data/urltestdata.json not found" in r.stderr
    # with the shared folder beside it, the check passes
    data = tmp_path / "shared" / "data"
    data.mkdir(parents=True)
    (data / "urltestdata.json").write_text("[]")
    r = subprocess.run(
        ["make", "-C", str(repo), "shared"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
