"""URL lists of ``skitter fetch --urls``: a binary or non-UTF-8 list is one clear error (exit 2),
not a UnicodeDecodeError traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from skitter.errors import ConfigError
from skitter.offline.urllist import read_url_list


def test_non_utf8_list_is_a_config_error(tmp_path: Path) -> None:
    p = tmp_path / "list.txt"
    p.write_bytes(b"http://a.test/\n\xff\xfe\x00binary\n")
    with open(p, encoding="utf-8-sig") as f, pytest.raises(ConfigError, match="not UTF-8"):
        read_url_list(f, str(p))


def test_comment_after_a_url_is_not_part_of_it() -> None:
    # "URL  # note" was fetched as http://a.test/%20%20 (a 404), not as http://a.test/
    import io

    f = io.StringIO("http://a.test/  # home\n# all\nhttp://b.test/x#frag\n")
    assert read_url_list(f, "list.txt") == ["http://a.test/", "http://b.test/x#frag"]


@pytest.mark.parametrize("stdin", [False, True])
def test_fetch_with_a_binary_list_exits_2_with_one_line(tmp_path: Path, stdin: bool) -> None:
    p = tmp_path / "list.bin"
    p.write_bytes(b"\xff\xfe\x00\x01binary\n")
    cmd = [sys.executable, "-m", "skitter", "fetch", "--urls", "-" if stdin else str(p)]
    r = subprocess.run(
        [*cmd, "--out", str(tmp_path / "f")],
        input=p.read_bytes() if stdin else None,
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.decode().splitlines() == [
        f"skitter: error: {'stdin' if stdin else p}: not UTF-8 text (a URL list is one URL a line)"
    ]


def test_fetch_into_a_fetch_folder_hints_fetch_resume(tmp_path: Path) -> None:
    """A second `fetch` into the same folder is refused with the command that resumes it
    (`skitter fetch --resume`, not `skitter crawl --resume`)."""
    out = tmp_path / "f"
    out.mkdir()
    (out / "state.json").write_text("{}")
    lst = tmp_path / "list.txt"
    lst.write_text("http://a.test/\n")
    r = subprocess.run(
        [sys.executable, "-m", "skitter", "fetch", "--urls", str(lst), "--out", str(out)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"skitter: error: output folder {out} holds a crawl; continue it with "
        f"'skitter fetch --resume --out {out}' or choose another folder"
    ]
