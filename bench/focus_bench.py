"""File-type focus on a loopback site with PDFs, images and HTML: what is saved, what is
fetched for the rejected types.

    python bench/focus_bench.py [--pages 40] [--port 18742] [--work DIR]

Writes a static site (HTML pages each linking to 2 PDFs and 2 large images, a few of them
under misleading extensions), serves it with its own nginx on 127.0.0.1:PORT (pid and logs
in the work folder; ``$bytes_sent`` per request in its access log), runs
``skitter crawl --accept-type application/pdf --save-files DIR`` on it (``--resolve``, no
/etc/hosts), stops nginx, and prints one JSON line: files saved and whether they are
byte-identical, body bytes the crawler kept per type, and bytes nginx sent per type (an
upper bound of what reached the crawler: the kernel's socket buffers take some before the
crawler closes the connection).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HOST = "pdfs.test"
PDF_ONLY = ("--accept-type", "application/pdf")
CONF = """worker_processes 1;
pid nginx.pid;
error_log error.log warn;
events {{ worker_connections 1024; }}
http {{
    types {{ text/html html; application/pdf pdf; image/png png; image/jpeg jpg; }}
    default_type application/octet-stream;
    log_format sent '$request_uri $status $bytes_sent $sent_http_content_type';
    access_log access.log sent;
    sendfile on;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server {{
        listen 127.0.0.1:{port} default_server;
        root sites/$host;
        index index.html;
        location /misc/ {{ types {{ }} default_type application/pdf; }}
        location / {{ try_files $uri $uri/ =404; }}
    }}
}}
"""


def build(work: Path, pages: int, port: int) -> dict[str, bytes]:
    """Write the site; returns {path: body} of every PDF (what --save-files must write)."""
    rng = random.Random(1)
    root = work / "sites" / HOST
    (root / "misc").mkdir(parents=True)
    (work / "tmp").mkdir()
    pdfs: dict[str, bytes] = {}
    for i in range(pages):
        links = [f"/p{i + 1}.html"] if i + 1 < pages else []
        for j in range(2):
            body = b"%PDF-1.4\n" + rng.randbytes(rng.randint(100_000, 600_000))
            # every 5th PDF sits under a misleading .html name in /misc/ (served as PDF)
            path = f"/misc/report{i}-{j}.html" if (i + j) % 5 == 0 else f"/doc{i}-{j}.pdf"
            (root / path.lstrip("/")).write_bytes(body)
            pdfs[path] = body
            links.append(path)
        for j in range(2):
            path = f"/img{i}-{j}.png"
            (root / path.lstrip("/")).write_bytes(rng.randbytes(rng.randint(1_000_000, 4_000_000)))
            links.append(path)
        items = "".join(f'<a href="{h}">{h}</a>\n' for h in links)
        name = "index.html" if i == 0 else f"p{i}.html"
        (root / name).write_text(f"<!doctype html><title>{i}</title>{items}")
    (work / "nginx.conf").write_text(CONF.format(port=port))
    return pdfs


#: Run in the child: counts the bytes read from every socket (socket.recv/recv_into).
CHILD = """
import socket, sys
got = [0]
_recv, _recv_into = socket.socket.recv, socket.socket.recv_into
def recv(self, *a):
    data = _recv(self, *a)
    got[0] += len(data)
    return data
def recv_into(self, *a):
    n = _recv_into(self, *a)
    got[0] += n
    return n
socket.socket.recv, socket.socket.recv_into = recv, recv_into
from skitter.cli import main
rc = main(sys.argv[1:])
print("SOCKET_BYTES", got[0])
sys.exit(rc)
"""


def crawl(args: list[str]) -> tuple[int, float, int]:
    """Run ``skitter crawl ARGS`` in a child Python; returns (exit code, wall seconds, bytes
    the crawler read from its sockets)."""
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-c", CHILD, "crawl", *args], capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - t0
    got = next(int(ln.split()[1]) for ln in p.stdout.splitlines() if ln.startswith("SOCKET_"))
    return p.returncode, wall, got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--port", type=int, default=18742)
    ap.add_argument("--work", type=Path, help="default: a new temporary folder")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="focus-bench-"))
    pdfs = build(work, a.pages, a.port)
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    subprocess.run([nginx, "-p", f"{work}/", "-c", "nginx.conf", "-e", "error.log"], check=True)
    try:
        time.sleep(0.3)
        out, files = work / "crawl", work / "files"
        common = [f"http://{HOST}:{a.port}/", "--resolve", f"{HOST}:{a.port}:127.0.0.1"]
        common += ["--resolve-only", "--delay", "0", "--host-concurrency", "4"]
        common += ["--processes", "1", "--quiet", "--no-warc"]
        rc, wall, rchar = crawl([*common, "--out", str(out), "--save-files", str(files), *PDF_ONLY])
        log_focus = (work / "access.log").read_text()
        (work / "access.log").write_text("")
        _, wall_all, rchar_all = crawl([*common, "--out", str(work / "crawl-all")])
    finally:
        pid = int((work / "nginx.pid").read_text())
        os.kill(pid, signal.SIGQUIT)
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    top = files / f"{HOST}+{a.port}"
    saved = {
        "/" + p.relative_to(top).as_posix(): p.read_bytes() for p in top.rglob("*") if p.is_file()
    }
    kept: Counter[str] = Counter()
    for line in (out / "pages.jsonl").read_text().splitlines():
        r = json.loads(line)
        kept[r.get("content_type") or "none"] += r["bytes"]
    sent: Counter[str] = Counter()
    size: Counter[str] = Counter()
    for line in log_focus.splitlines():
        uri, _status, nbytes, ctype = line.split(" ", 3)
        sent[ctype] += int(nbytes)
        f = work / "sites" / HOST / uri.lstrip("/")
        if f.is_file():
            size[ctype] += f.stat().st_size
    report = json.loads((out / "report.json").read_text())
    print(
        json.dumps(
            {
                "exit": rc,
                "wall_s": round(wall, 2),
                "crawler_socket_bytes": rchar,
                "unfocused_wall_s": round(wall_all, 2),
                "unfocused_crawler_socket_bytes": rchar_all,
                "pdfs_on_site": len(pdfs),
                "files_saved": len(saved),
                "identical": saved == pdfs,
                "focus": report.get("focus"),
                "body_bytes_kept_by_type": dict(kept),
                "bytes_nginx_sent_by_type": dict(sent),
                "file_bytes_by_type": dict(size),
            }
        )
    )
    return rc


if __name__ == "__main__":
    sys.exit(main())
