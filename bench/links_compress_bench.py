"""What ``--links-compress zstd`` saves and costs, replayed from a crawl's links.tsv.

    .venv/bin/python bench/links_compress_bench.py OUT/links.tsv [--pages-per-frame 800]

The rows are written again, one page (a run of rows with the same source) per call, through
the crawler's own writers: :class:`skitter.export.links.LinksWriter` (links.tsv) and
:class:`skitter.export.linkfile.ZstdLinksWriter` (links.tsv.zst, a checkpoint every
``--pages-per-frame`` pages: the crawl checkpoints every 2 s, so at 400 pages/s about 800).
Prints the bytes of both files and the CPU seconds (process time) each writer took, per page.
The file is read up to its last whole line (a crawl may still be writing it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from skitter.export.linkfile import ZstdLinksWriter, open_links
from skitter.export.links import LinksWriter


def pages(path: str) -> list[str]:
    """The rows of ``path`` grouped by page (runs of one source), as text blocks."""
    out: list[str] = []
    block: list[str] = []
    src = None
    with open_links(path, "rt") as f:
        next(f, None)
        for line in f:
            if not line.endswith("\n"):
                break
            s = line.split("\t", 1)[0]
            if s != src and block:
                out.append("".join(block))
                block = []
            src = s
            block.append(line)
    if block:
        out.append("".join(block))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("links")
    ap.add_argument("--pages-per-frame", type=int, default=800)
    a = ap.parse_args()
    blocks = pages(a.links)
    rows = sum(b.count("\n") for b in blocks)
    with tempfile.TemporaryDirectory() as d:
        res = {}
        for name, cls in (("links.tsv", LinksWriter), ("links.tsv.zst", ZstdLinksWriter)):
            path = os.path.join(d, name)
            t0 = time.process_time()
            w = cls(path)
            for i, b in enumerate(blocks, 1):
                w.write_text(b)
                if i % a.pages_per_frame == 0:
                    w.offset()  # a checkpoint
            w.close()
            res[name] = (os.path.getsize(path), time.process_time() - t0)
        with open_links(os.path.join(d, "links.tsv.zst")) as f, open(
            os.path.join(d, "links.tsv"), "rb"
        ) as g:
            assert f.read() == g.read(), "links.tsv.zst does not decode to links.tsv"
    (pb, pc), (zb, zc) = res["links.tsv"], res["links.tsv.zst"]
    n = len(blocks)
    print(f"{n:,} pages, {rows:,} rows; frame every {a.pages_per_frame} pages")
    print(f"links.tsv     {pb:>13,} bytes  {pb / n:>8,.0f} B/page  CPU {pc / n * 1e6:7.1f} µs/page")
    print(f"links.tsv.zst {zb:>13,} bytes  {zb / n:>8,.0f} B/page  CPU {zc / n * 1e6:7.1f} µs/page")
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"ratio {pb / zb:.1f}x, saves {(pb - zb) / 2**20:,.1f} MiB ({1 - zb / pb:.1%}); "
          f"extra CPU {(zc - pc) / n * 1e6:.1f} µs/page; load {load}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
