"""Serve the bundled demo site on 127.0.0.1 (aiohttp), with one redirect.

Usage: python demo/serve.py [--port N] [--port-file FILE] [--root DIR]
Prints the port; writes it to --port-file when given; stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web


def make_app(root: Path) -> web.Application:
    """An app serving ``root`` as static files; ``/old-guide.html`` → 301 to ``/guide/``."""

    async def old_guide(request: web.Request) -> web.StreamResponse:
        raise web.HTTPMovedPermanently("/guide/index.html")

    async def index(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(root / "index.html")

    app = web.Application()
    app.router.add_get("/old-guide.html", old_guide)
    app.router.add_get("/", index)
    app.router.add_static("/", root, show_index=False)
    return app


async def serve(root: Path, port: int, port_file: str | None) -> None:
    runner = web.AppRunner(make_app(root), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    real_port = runner.addresses[0][1]
    print(real_port, flush=True)
    if port_file:
        Path(port_file).write_text(str(real_port))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


class DemoServer:
    """This script in a subprocess, for demos and benchmarks: ``port = server.start()`` …
    ``server.stop()`` (or ``with DemoServer(root) as port:``). Listens on 127.0.0.1 only.

    Args:
        root: the folder to serve (default: the bundled demo site).
    Raises:
        RuntimeError: from :meth:`start`, if the server did not report a port in 20 s.
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or Path(__file__).parent / "site"
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> int:
        """Start the server; returns its port once it listens."""
        self._tmp = tempfile.TemporaryDirectory()
        port_file = Path(self._tmp.name) / "port"
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "--root", str(self.root), "--port-file", str(port_file)],
            stdout=subprocess.DEVNULL,
        )
        for _ in range(200):  # bounded: 20 s
            if port_file.exists() and port_file.read_text():
                return int(port_file.read_text())
            if self._proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("the local server did not start")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then wait); idempotent."""
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
            self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> int:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--root", default=str(Path(__file__).parent / "site"))
    a = ap.parse_args()
    asyncio.run(serve(Path(a.root), a.port, a.port_file))


if __name__ == "__main__":
    main()
