"""``skitter graph``: the link graph of an output folder as an edge list, GraphML or Parquet."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from skitter.cli.common import check_output_file, os_error_line
from skitter.errors import ConfigError


def add_parser(sub: Any) -> None:
    """The ``graph`` subcommand."""
    from skitter.offline.graph import FORMATS

    c = sub.add_parser(
        "graph",
        help="export the link graph of a crawl or extract (edge list, GraphML, Parquet)",
        description=(
            "Read OUT_DIR/links.tsv and write its page graph (or host graph with --hosts): "
            "repeated links merged into one edge with a count, kind, nofollow and anchor text. "
            "--rank adds PageRank to the nodes (GraphML: a node attribute; edge list and "
            "Parquet: -o g.tsv -> g.nodes.tsv, -o g.parquet -> g.nodes.parquet)."
        ),
    )
    c.add_argument("out_dir", metavar="OUT_DIR", help="a crawl's or extract's output folder")
    c.add_argument("--format", choices=FORMATS, default="edgelist", help="default: edgelist")
    c.add_argument("--hosts", action="store_true", help="host graph instead of page graph")
    c.add_argument("--rank", action="store_true", help="compute PageRank of the nodes")
    c.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")


#: files of the folder read (a crawl's, an extract's) that ``-o`` may not replace.
_FOLDER_FILES = ("links.tsv", "links.tsv.zst", "pages.jsonl", "report.json", "state.json")


def run(args: argparse.Namespace) -> int:
    """Run ``skitter graph``; returns the exit code."""
    from skitter.offline import graph as gr

    if args.format == "parquet" and not args.output:
        print("skitter: error: --format parquet needs -o FILE", file=sys.stderr)
        return 2
    if args.rank and args.format == "edgelist" and not args.output:
        print("skitter: error: --rank with an edge list needs -o FILE", file=sys.stderr)
        return 2
    if args.output:  # the folder's own files are never written over
        kept = {os.path.realpath(os.path.join(args.out_dir, n)) for n in _FOLDER_FILES}
        ranks = gr.nodes_path_for(args.output, "parquet" if args.format == "parquet" else "tsv")
        for path in (args.output, ranks):
            if os.path.realpath(path) in kept:
                print(f"skitter: error: -o would replace {path} of {args.out_dir}", file=sys.stderr)
                return 2
    try:
        if args.output:
            check_output_file(args.output)
    except ConfigError as exc:
        print(f"skitter: error: {exc}", file=sys.stderr)
        return 2
    try:
        t0 = time.monotonic()
        try:
            g = gr.load_graph(args.out_dir, hosts=args.hosts)
        except FileNotFoundError:
            print(f"skitter: error: no links.tsv in {args.out_dir}", file=sys.stderr)
            return 2
        t1 = time.monotonic()
        if args.rank:
            gr.pagerank(g)
        t2 = time.monotonic()
        extra = ""
        if args.format == "parquet":
            nodes = gr.write_parquet(g, args.output)
            extra = f", nodes: {nodes}" if nodes else ""
        elif args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                if args.format == "graphml":
                    gr.write_graphml(g, f)
                else:
                    gr.write_edgelist(g, f)
            if args.rank and args.format == "edgelist":
                nodes = gr.nodes_path_for(args.output, "tsv")
                with open(nodes, "w", encoding="utf-8") as f:
                    gr.write_node_ranks(g, f)
                extra = f", nodes: {nodes}"
        elif args.format == "graphml":
            gr.write_graphml(g, sys.stdout)
        else:
            gr.write_edgelist(g, sys.stdout)
    except BrokenPipeError:  # stdout closed early (`skitter graph ... | head`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the exit flush fails silently too
        return 1
    except OSError as exc:
        if exc.filename is None:  # a failed write() names no file: the one being written
            exc.filename = args.output or "stdout"
        print(os_error_line(exc), file=sys.stderr)
        return 2
    if args.output:
        rank = f", PageRank {t2 - t1:.2f} s" if args.rank else ""
        print(
            f"{len(g.nodes):,} nodes, {g.edges:,} edges (read {t1 - t0:.2f} s{rank}); "
            f"output: {args.output}{extra}",
            file=sys.stderr,
        )
    return 0
