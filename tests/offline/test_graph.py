"""``skitter graph``: merged edges, host graph, the three formats, PageRank."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from skitter.export.links import LinkRow, LinksWriter
from skitter.offline.graph import load_graph, pagerank

pytestmark = pytest.mark.timeout(60)

A, B, C, X = "http://a.test/", "http://a.test/b", "http://a.test:8080/c", "https://x.test/"


def _links(d: Path) -> Path:
    rows = [
        LinkRow(A, B, "", "", "a", False, "queued"),  # first anchor empty
        LinkRow(A, B, "top", "to\tb", "a", False, "seen"),  # same edge again: count 2
        LinkRow(A, B, "", "again", "a", False, "seen"),
        LinkRow(A, B, "", "nf", "a", True, "nofollow"),  # nofollow: another edge
        LinkRow(A, C, "", "c", "a", False, "scope"),
        LinkRow(B, A, "", "", "redirect", False, "seen"),
        LinkRow(C, X, "", "x", "a", False, "scope"),
        LinkRow(C, "mailto:me@a.test", "", "mail", "a", False, "scheme"),
    ]
    with LinksWriter(d / "links.tsv") as w:
        w.write_rows(rows)
    return d


def _dense_pagerank(n: int, edges: list[tuple[int, int, float]]) -> np.ndarray:
    m = np.zeros((n, n))
    for s, t, w in edges:
        m[t, s] += w
    out = m.sum(axis=0)
    r = np.full(n, 1 / n)
    for _ in range(1000):
        nxt = np.zeros(n)
        for j in range(n):
            if out[j] == 0:
                nxt += 0.85 * r[j] / n
            else:
                nxt += 0.85 * r[j] * m[:, j] / out[j]
        nxt += 0.15 / n
        r = nxt / nxt.sum()
    return r


def test_edges_merged_with_count_anchor_kind_nofollow(tmp_path: Path) -> None:
    g = load_graph(_links(tmp_path))
    edges = {
        (g.nodes[s], g.nodes[d], g.kinds[k], nf): (c, a)
        for s, d, k, nf, c, a in zip(
            g.src, g.dst, g.kind, g.nofollow, g.count, g.anchor, strict=True
        )
    }
    assert edges == {
        (A, B, "a", False): (3, "to\tb"),
        (A, B, "a", True): (1, "nf"),
        (A, C, "a", False): (1, "c"),
        (B, A, "redirect", False): (1, ""),
        (C, X, "a", False): (1, "x"),
    }
    hosts = load_graph(tmp_path, hosts=True)
    assert sorted(hosts.nodes) == ["a.test", "a.test:8080", "x.test"]
    ab = [c for s, d, c in zip(hosts.src, hosts.dst, hosts.count, strict=True)
          if hosts.nodes[s] == hosts.nodes[d] == "a.test"]  # fmt: skip
    assert sum(ab) == 5


def test_pagerank_equals_the_dense_power_iteration(tmp_path: Path) -> None:
    g = load_graph(_links(tmp_path))
    r = pagerank(g)
    edges = [
        (int(s), int(d), float(c))
        for s, d, c, nf in zip(g.src, g.dst, g.count, g.nofollow, strict=True)
        if not nf
    ]
    want = _dense_pagerank(len(g.nodes), edges)
    assert np.allclose(r, want, atol=1e-8)
    assert r.sum() == pytest.approx(1.0)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skitter", "graph", *args], capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_formats(tmp_path: Path) -> None:
    d = _links(tmp_path)
    proc = _cli(str(d))
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0] == "source\ttarget\tkind\tnofollow\tcount\tanchor"
    assert f"{A}\t{B}\ta\t0\t3\tto\\tb" in lines and len(lines) == 6
    proc = _cli(str(d), "--format", "graphml", "--rank")
    assert proc.returncode == 0
    root = ET.fromstring(proc.stdout)
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    assert len(root.findall(".//g:node", ns)) == 4
    assert len(root.findall(".//g:edge", ns)) == 5
    ranks = [float(e.text or 0) for e in root.findall(".//g:data[@key='pagerank']", ns)]
    assert sum(ranks) == pytest.approx(1.0)
    assert _cli(str(d), "--format", "parquet").returncode == 2
    out = tmp_path / "g.parquet"
    proc = _cli(str(d), "--format", "parquet", "--rank", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    t = pq.read_table(out).to_pylist()
    assert {"source": A, "target": B, "kind": "a", "nofollow": False, "count": 3,
            "anchor": "to\tb"} in t  # fmt: skip
    nodes = pq.read_table(tmp_path / "g.nodes.parquet").to_pylist()
    assert {n["node"] for n in nodes} == {A, B, C, X}
    assert _cli(str(tmp_path / "missing")).returncode == 2


def test_output_errors_are_named_and_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`-o` into a missing folder names that file (not "no links.tsv"); stdout closed by the
    reader (`| head`) ends quietly with exit 1, no "Broken pipe" error line."""
    d = _links(tmp_path)
    proc = _cli(str(d), "-o", str(tmp_path / "nodir" / "g.tsv"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [  # checked before the graph is read
        f"skitter: error: --output {tmp_path / 'nodir' / 'g.tsv'}: folder "
        f"{tmp_path / 'nodir'} does not exist"
    ]
    big = tmp_path / "big"
    big.mkdir()
    with LinksWriter(big / "links.tsv") as w:  # far more than a pipe buffer (64 KiB)
        w.write_rows(LinkRow(f"{A}p{i}", B, "", "x" * 50, "a", False, "queued")
                     for i in range(20_000))  # fmt: skip
    p = subprocess.Popen(
        [sys.executable, "-m", "skitter", "graph", str(big)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert p.stdout is not None and p.stderr is not None
    p.stdout.read(100)
    p.stdout.close()  # the reader goes away, as `head` does
    err = p.stderr.read()
    p.stderr.close()
    assert p.wait(timeout=60) == 1
    assert err == b""


def test_output_over_the_folders_own_files_is_refused(tmp_path: Path) -> None:
    """`-o DIR/links.tsv` used to replace the crawl's link graph with the edge list."""
    d = _links(tmp_path)
    before = (d / "links.tsv").read_bytes()
    for target in ("links.tsv", "pages.jsonl"):
        proc = _cli(str(d), "-o", str(d / target))
        assert proc.returncode == 2
        assert proc.stderr.splitlines() == [f"skitter: error: -o would replace {d / target} of {d}"]
    assert (d / "links.tsv").read_bytes() == before
    assert not (d / "pages.jsonl").exists()
    proc = _cli(str(d), "-o", str(d / "g.tsv"))
    assert proc.returncode == 0 and (d / "g.tsv").read_text().startswith("source\ttarget")
def test_output_into_a_missing_folder_is_named_before_reading(tmp_path: Path) -> None:
    """-o FILE is checked before the graph is read, as check-links checks it; a write failure
    names the file, not "no links.tsv" (which the folder has)."""
    (tmp_path / "crawl").mkdir()
    d = _links(tmp_path / "crawl")
    for fmt in ("edgelist", "graphml", "parquet"):
        target = tmp_path / "nodir" / f"g.{fmt}"
        proc = _cli(str(d), "--format", fmt, "-o", str(target))
        assert proc.returncode == 2
        assert proc.stderr == (
            f"skitter: error: --output {target}: folder {target.parent} does not exist\n"
        )
        assert proc.stdout == ""
    proc = _cli(str(d), "-o", str(tmp_path))  # a folder, not a file
    assert (proc.returncode, proc.stderr) == (
        2,
        f"skitter: error: --output {tmp_path} is a folder; give a file name\n",
    )
    assert _cli(str(tmp_path / "nolinks")).stderr.startswith("skitter: error: no links.tsv in ")


def test_write_failure_names_the_output(tmp_path: Path) -> None:
    """A full disk while writing (/dev/full) names the file written, or stdout."""
    d = _links(tmp_path)
    proc = _cli(str(d), "-o", "/dev/full")
    full_line = "skitter: error: No space left on device: "
    assert (proc.returncode, proc.stderr) == (2, full_line + "/dev/full\n")
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "skitter", "graph", str(d)], stdout=full,
            stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    assert (proc.returncode, proc.stderr) == (2, full_line + "stdout\n")
