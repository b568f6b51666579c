"""Ctrl-C in a command that has no handling of its own (graph, merge, index) ends with one
line on stderr and exit code 130, never a KeyboardInterrupt traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

import skitter.merge
import skitter.offline.graph
from skitter.cli import main


def _interrupt(*args: object, **kwargs: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("module", "name", "argv"),
    [
        (skitter.offline.graph, "load_graph", ["graph", "{d}", "--format", "edgelist"]),
        (skitter.merge, "merge_folders", ["merge", "{d}", "--out", "{d}/m"]),
    ],
)
def test_ctrl_c_is_exit_130_with_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    module: object,
    name: str,
    argv: list[str],
) -> None:
    (tmp_path / "links.tsv").write_text("source\ttarget\n")
    (tmp_path / "pages.jsonl").write_text("")
    monkeypatch.setattr(module, name, _interrupt)
    assert main([a.format(d=tmp_path) for a in argv]) == 130
    err = capsys.readouterr().err
    assert err == f"skitter {argv[0]}: interrupted\n"
