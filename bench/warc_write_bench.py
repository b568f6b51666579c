"""CPU of WARC writing per exchange: real exchanges replayed through ``WarcWriter``.

    python bench/warc_write_bench.py WARC_FILE [--exchanges N] [--stride K] [--level L]
        [--no-index] [--repeat R] [--identity]

Reads up to ``--exchanges`` request/response pairs from ``WARC_FILE`` (every ``--stride``-th
one: a sample spread over a whole crawl, e.g. of rust-doc; or a crawl of the
shared benchmark web: gzip-encoded HTML of ≈ 34 KB), rebuilds the :class:`Response` the fetcher
gave (status line and headers as received, body still content-encoded, request headers as
sent), then writes them all through :class:`skitter.export.warc.WarcWriter` with the crawl's
:class:`skitter.offline.cdxj.CrawlIndexer` hooks (as ``skitter crawl`` does), ``--repeat``
times, each into a fresh folder. Prints one JSON line: the CPU time (:func:`os.times`) per
exchange (one request + one response record) in µs, the best and the median of the repeats
(user + system CPU of the writes; the user part; the final close, its fsync and the last
CDXJ, apart), and the output bytes per exchange. ``--identity`` stores the decoded body instead
(a server that does not compress: the body is deflated in the WARC). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import zlib

from fastwarc.warc import ArchiveIterator, WarcRecordType

from skitter.export.warc import ORIG_TRANSFER_ENCODING, WarcWriter
from skitter.models import Response
from skitter.offline.cdxj import CrawlIndexer


def _parse_head(head: bytes) -> tuple[str, int, str, tuple[tuple[str, str], ...]]:
    """(HTTP version, status, reason, headers) of a stored response head."""
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    status, _, reason = rest.partition(" ")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers.append((name.strip(), value.strip()))
    return version.removeprefix("HTTP/"), int(status), reason, tuple(headers)


def load(path: str, limit: int, identity: bool, stride: int = 1) -> list[tuple[str, Response]]:
    """Up to ``limit`` (url, Response) pairs of ``path``'s request/response records (every
    ``stride``-th response)."""
    seen = 0
    out: list[tuple[str, Response]] = []
    requests: dict[str, tuple[tuple[str, str], ...]] = {}
    with open(path, "rb") as f:
        it = ArchiveIterator(
            f, record_types=WarcRecordType.request | WarcRecordType.response, parse_http=False
        )
        for rec in it:
            block = rec.reader.read()
            if rec.record_type == WarcRecordType.request:
                lines = block.decode("latin-1").split("\r\n")[1:]
                hdrs = tuple(
                    (k.strip(), v.strip())
                    for k, _, v in (line.partition(":") for line in lines if ":" in line)
                )
                requests[rec.headers["WARC-Concurrent-To"]] = hdrs
                continue
            seen += 1
            if (seen - 1) % stride:
                requests.pop(rec.headers["WARC-Record-ID"], None)
                continue
            cut = block.find(b"\r\n\r\n") + 4
            head, body = block[:cut], block[cut:]
            head = head.replace(ORIG_TRANSFER_ENCODING.encode(), b"Transfer-Encoding")
            version, status, reason, headers = _parse_head(head)
            if identity and body[:2] == b"\x1f\x8b":
                body = zlib.decompress(body, wbits=31)
                headers = tuple((k, v) for k, v in headers if k.lower() != "content-encoding")
                head = b"".join(
                    line + b"\r\n"
                    for line in head.split(b"\r\n")
                    if line and not line.lower().startswith(b"content-encoding:")
                )
                head += b"\r\n"
            rid = rec.headers["WARC-Record-ID"]
            url = rec.headers["WARC-Target-URI"]
            resp = Response(
                url=url,
                status=status,
                reason=reason,
                headers=headers,
                raw_body=body,
                http_version=version,
                request_headers=requests.pop(rid, ()),
                peer_ip=rec.headers.get("WARC-IP-Address"),
                raw_head=head,
            )
            out.append((url, resp))
            if len(out) >= limit:
                break
    return out


def run_once(
    exchanges: list[tuple[str, Response]], level: int, index: bool
) -> tuple[float, float, float, int]:
    """(user CPU s, system CPU s of the writes, CPU s of the final close, output bytes) of
    writing ``exchanges`` into a fresh folder."""
    work = tempfile.mkdtemp(prefix="warc-bench-")
    try:
        indexer = CrawlIndexer() if index else None
        writer = WarcWriter(
            work,
            compression_level=level,
            on_file_done=indexer,
            on_record=indexer.on_record if indexer is not None else None,
        )
        gc.collect()
        t0 = os.times()
        for url, resp in exchanges:
            writer.write_exchange(url, resp, ip=resp.peer_ip)
        t1 = os.times()
        writer.close()
        t2 = os.times()
        size = sum(os.path.getsize(os.path.join(work, n)) for n in os.listdir(work))
        close = t2.user + t2.system - t1.user - t1.system
        return t1.user - t0.user, t1.system - t0.system, close, size
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _loadavg() -> list[str]:
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("warc", help="a WARC file of a crawl to replay")
    ap.add_argument("--exchanges", type=int, default=3000)
    ap.add_argument("--stride", type=int, default=1, help="every K-th exchange")
    ap.add_argument("--level", type=int, default=6, help="--warc-level (1-9)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-index", action="store_true", help="without the CDXJ hooks")
    ap.add_argument("--identity", action="store_true", help="store decoded bodies")
    a = ap.parse_args()
    try:
        exchanges = load(a.warc, a.exchanges, a.identity, max(1, a.stride))
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not exchanges:
        print(f"error: no response records in {a.warc}", file=sys.stderr)
        return 1
    runs = [run_once(exchanges, a.level, not a.no_index) for _ in range(a.repeat)]
    n = len(exchanges)
    per = sorted((user + sys_) / n * 1e6 for user, sys_, _, _ in runs)
    user = statistics.median(r[0] / n * 1e6 for r in runs)
    close = statistics.median(r[2] / n * 1e6 for r in runs)
    body = sum(len(r.raw_body) for _, r in exchanges) / len(exchanges)
    print(
        json.dumps(
            {
                "exchanges": len(exchanges),
                "level": a.level,
                "index": not a.no_index,
                "identity": a.identity,
                "body_bytes": round(body),
                "us_per_exchange_best": round(per[0], 1),
                "us_per_exchange_median": round(statistics.median(per), 1),
                "us_user_median": round(user, 1),
                "us_close_median": round(close, 1),
                "out_bytes_per_exchange": round(runs[0][3] / n),
                "loadavg": _loadavg(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
