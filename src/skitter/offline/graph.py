"""The link graph of a crawl (or an extract): edge list, GraphML or Parquet, with PageRank.

Input: ``links.tsv`` of an output folder (a crawl's or ``skitter extract``'s). Every row with
an http(s) target is an edge (``scheme`` rows, e.g. ``mailto:``, are not); redirects are edges of
kind ``redirect``. Nodes are page URLs, or with ``hosts`` the host keys (host plus non-default
port) of both ends.

Edges are merged: rows with the same (source, target, kind, nofollow) become one edge with a
``count``; its ``anchor`` is the first non-empty anchor text among them (page graph only).

PageRank (``rank``): the power iteration of Page & Brin with damping 0.85 on the graph whose
edge weights are the merged counts (nofollow edges pass no rank, as search engines treat
them); a node without out-links spreads its rank over all nodes; iterated until the L1 change
is below ``1e-10`` (at most 200 rounds), on a :mod:`scipy.sparse` matrix. Ranks sum to 1.

Memory: the node strings, a dict of them, and ~20 bytes per row (numpy arrays), so ~1-2 GB for
10 M rows with a few million distinct URLs.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO
from xml.sax.saxutils import escape as xml_escape

import numpy as np
import numpy.typing as npt

from skitter.export.linkfile import links_file, open_links
from skitter.export.links import unescape

__all__ = ["FORMATS", "Graph", "load_graph", "pagerank", "write_edgelist", "write_graphml"]

#: Output formats of ``skitter graph``.
FORMATS = ("edgelist", "graphml", "parquet")

_DAMPING = 0.85
_TOL = 1e-10
_MAX_ITER = 200


@dataclass(slots=True)
class Graph:
    """A merged link graph.

    Attributes:
        nodes: node names (URLs or host keys), index = node id.
        src, dst: node ids of each edge (int32 arrays of equal length).
        kind: kind name of each edge, as an index into ``kinds``.
        kinds: the link kinds ("a", "redirect", ...).
        nofollow: bool array.
        count: links merged into each edge (int64 array).
        anchor: anchor text of each edge ("" if none, or for a host graph).
        rank: PageRank per node (float64 array) once :func:`pagerank` has run, else None.
    """

    nodes: list[str]
    src: npt.NDArray[np.int32]
    dst: npt.NDArray[np.int32]
    kind: npt.NDArray[np.int16]
    kinds: list[str]
    nofollow: npt.NDArray[np.bool_]
    count: npt.NDArray[np.int64]
    anchor: list[str]
    rank: npt.NDArray[np.float64] | None = None

    @property
    def edges(self) -> int:
        """Number of merged edges."""
        return len(self.src)


def _host(url: str) -> str:
    # canonical http(s) URLs: "scheme://host[:port]/..." with the host already lower-cased
    rest = url.split("://", 1)[-1]
    end = len(rest)
    for sep in "/?#":
        i = rest.find(sep)
        if 0 <= i < end:
            end = i
    return rest[:end]


def _rows(path: str) -> Iterator[list[str]]:
    with open_links(path, "rt") as f:
        first = True
        for line in f:
            if first:
                first = False
                if line.startswith("source\t"):
                    continue
            if not line.endswith("\n"):
                return  # a partial last line (crash)
            fields = line[:-1].split("\t")
            if len(fields) != 7:
                continue
            yield fields


def load_graph(out_dir: str | os.PathLike[str], *, hosts: bool = False) -> Graph:
    """Read ``OUT_DIR/links.tsv`` (or links.tsv.zst) and merge it into a :class:`Graph`
    (see the module doc).

    Raises:
        FileNotFoundError / OSError: no readable links.tsv in ``out_dir``.
    """
    path = os.fspath(links_file(out_dir))
    ids: dict[str, int] = {}
    nodes: list[str] = []
    kind_ids: dict[str, int] = {}
    anchor_ids: dict[str, int] = {"": 0}
    anchors: list[str] = [""]
    src, dst, kind, nof, anc = array("i"), array("i"), array("h"), array("b"), array("i")
    for fields in _rows(path):
        source, target, _frag, anchor, k, nofollow, decision = fields
        if decision == "scheme" or not target.startswith(("http://", "https://")):
            continue
        if "\\" in source:
            source = unescape(source)
        if "\\" in target:
            target = unescape(target)
        if hosts:
            source, target, anchor = _host(source), _host(target), ""
        for name in (source, target):
            if name not in ids:
                ids[name] = len(nodes)
                nodes.append(name)
        src.append(ids[source])
        dst.append(ids[target])
        kid = kind_ids.get(k)
        if kid is None:
            kid = kind_ids[k] = len(kind_ids)
        kind.append(kid)
        nof.append(nofollow == "1")
        aid = anchor_ids.get(anchor)
        if aid is None:
            if "\\" in anchor:
                anchor = unescape(anchor)
            aid = anchor_ids[anchor] = len(anchors)
            anchors.append(anchor)
        anc.append(aid)
    s = np.frombuffer(src, dtype=np.int32) if src else np.zeros(0, np.int32)
    d = np.frombuffer(dst, dtype=np.int32) if dst else np.zeros(0, np.int32)
    kd = np.frombuffer(kind, dtype=np.int16) if kind else np.zeros(0, np.int16)
    nf = np.frombuffer(nof, dtype=np.int8).astype(bool) if nof else np.zeros(0, bool)
    an = np.frombuffer(anc, dtype=np.int32) if anc else np.zeros(0, np.int32)
    # merge: group by (src, dst, kind, nofollow); in each group, non-empty anchors first,
    # then file order (lexsort is stable)
    order = np.lexsort((an == 0, nf, kd, d, s))
    s, d, kd, nf, an = s[order], d[order], kd[order], nf[order], an[order]
    if len(s):
        new = np.ones(len(s), dtype=bool)
        new[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1]) | (kd[1:] != kd[:-1]) | (nf[1:] != nf[:-1])
        starts = np.flatnonzero(new)
        count = np.diff(np.append(starts, len(s))).astype(np.int64)
    else:
        starts = np.zeros(0, dtype=np.int64)
        count = np.zeros(0, dtype=np.int64)
    return Graph(
        nodes=nodes,
        src=s[starts],
        dst=d[starts],
        kind=kd[starts],
        kinds=list(kind_ids),
        nofollow=nf[starts],
        count=count,
        anchor=[anchors[i] for i in an[starts].tolist()],
    )


def pagerank(g: Graph) -> npt.NDArray[np.float64]:
    """PageRank of every node (see the module doc); also stored in ``g.rank``.

    Returns:
        float64 array indexed by node id, summing to 1 (empty for an empty graph).
    """
    from scipy import sparse

    n = len(g.nodes)
    if n == 0:
        g.rank = np.zeros(0)
        return g.rank
    keep = ~g.nofollow
    w = g.count[keep].astype(np.float64)
    rows, cols = g.src[keep], g.dst[keep]
    out_w = np.bincount(rows, weights=w, minlength=n)
    norm = np.divide(w, out_w[rows], out=np.zeros_like(w), where=out_w[rows] > 0)
    # m[j, i] = share of i's rank going to j
    m = sparse.csr_matrix((norm, (cols, rows)), shape=(n, n))
    dangling = out_w == 0
    r = np.full(n, 1.0 / n)
    for _ in range(_MAX_ITER):
        spread = _DAMPING * r[dangling].sum() / n
        nxt = _DAMPING * (m @ r) + spread + (1.0 - _DAMPING) / n
        nxt /= nxt.sum()
        done = float(np.abs(nxt - r).sum()) < _TOL
        r = nxt
        if done:
            break
    g.rank = r
    return r


def _edges(g: Graph) -> Iterator[tuple[int, int, int, bool, int, str]]:
    """``(source id, target id, kind id, nofollow, count, anchor)`` of each edge, in order."""
    return zip(
        g.src.tolist(),
        g.dst.tolist(),
        g.kind.tolist(),
        g.nofollow.tolist(),
        g.count.tolist(),
        g.anchor,
        strict=True,
    )


def write_edgelist(g: Graph, out: IO[str]) -> None:
    """Tab-separated edges with a header ``source target kind nofollow count anchor``
    (fields escaped as in links.tsv)."""
    from skitter.export.links import escape

    out.write("source\ttarget\tkind\tnofollow\tcount\tanchor\n")
    nodes, kinds = g.nodes, g.kinds
    for s, d, k, nf, c, a in _edges(g):
        out.write(
            f"{escape(nodes[s])}\t{escape(nodes[d])}\t{kinds[k]}\t{int(nf)}\t{c}\t{escape(a)}\n"
        )


def write_node_ranks(g: Graph, out: IO[str]) -> None:
    """Tab-separated ``node pagerank`` lines with a header, highest rank first."""
    from skitter.export.links import escape

    assert g.rank is not None
    out.write("node\tpagerank\n")
    for i in np.argsort(-g.rank, kind="stable").tolist():
        out.write(f"{escape(g.nodes[i])}\t{g.rank[i]:.6e}\n")


def _xml(text: str) -> str:
    # XML 1.0 forbids most C0 controls even escaped: drop them
    cleaned = "".join(c for c in text if c >= " " or c in "\t\n\r")
    return xml_escape(cleaned, {'"': "&quot;"})


def write_graphml(g: Graph, out: IO[str]) -> None:
    """GraphML (http://graphml.graphdrawing.org/): a directed graph, nodes ``n{id}`` with
    ``url`` (or ``host``) and, after :func:`pagerank`, ``pagerank``; edges with ``kind``,
    ``nofollow``, ``count`` and ``anchor``."""
    out.write(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
        '<key id="name" for="node" attr.name="name" attr.type="string"/>\n'
        '<key id="pagerank" for="node" attr.name="pagerank" attr.type="double"/>\n'
        '<key id="kind" for="edge" attr.name="kind" attr.type="string"/>\n'
        '<key id="nofollow" for="edge" attr.name="nofollow" attr.type="boolean"/>\n'
        '<key id="count" for="edge" attr.name="count" attr.type="long"/>\n'
        '<key id="anchor" for="edge" attr.name="anchor" attr.type="string"/>\n'
        '<graph id="links" edgedefault="directed">\n'
    )
    rank = g.rank.tolist() if g.rank is not None else None
    for i, name in enumerate(g.nodes):
        pr = f'<data key="pagerank">{rank[i]:.9e}</data>' if rank is not None else ""
        out.write(f'<node id="n{i}"><data key="name">{_xml(name)}</data>{pr}</node>\n')
    kinds = g.kinds
    for s, d, k, nf, c, a in _edges(g):
        anchor = f'<data key="anchor">{_xml(a)}</data>' if a else ""
        out.write(
            f'<edge source="n{s}" target="n{d}"><data key="kind">{_xml(kinds[k])}</data>'
            f'<data key="nofollow">{"true" if nf else "false"}</data>'
            f'<data key="count">{c}</data>{anchor}</edge>\n'
        )
    out.write("</graph>\n</graphml>\n")


def write_parquet(g: Graph, path: str) -> str | None:
    """Edges to ``path`` (columns source, target, kind, nofollow, count, anchor); after
    :func:`pagerank`, nodes (node, pagerank) to ``*.nodes.parquet`` beside it.

    Returns:
        The nodes file path, or None when there are no ranks.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    nodes = pa.array(g.nodes, type=pa.string())
    kinds = pa.array(g.kinds, type=pa.string())
    table = pa.table(
        {
            "source": nodes.take(pa.array(g.src)),
            "target": nodes.take(pa.array(g.dst)),
            "kind": kinds.take(pa.array(g.kind.astype(np.int32))),
            "nofollow": pa.array(g.nofollow),
            "count": pa.array(g.count),
            "anchor": pa.array(g.anchor, type=pa.string()),
        }
    )
    pq.write_table(table, path)
    if g.rank is None:
        return None
    nodes_path = nodes_path_for(path, "parquet")
    pq.write_table(pa.table({"node": nodes, "pagerank": pa.array(g.rank)}), nodes_path)
    return nodes_path


def nodes_path_for(path: str, ext: str) -> str:
    """``graph.parquet`` → ``graph.nodes.parquet`` (``ext`` is the nodes file's extension)."""
    base, _ = os.path.splitext(path)
    return f"{base}.nodes.{ext}"
