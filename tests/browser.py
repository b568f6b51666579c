"""Headless Debian Chromium driven over the Chrome DevTools Protocol (aiohttp websocket).

Launched so it cannot leave the machine: every name resolves to nothing except 127.0.0.1
(--host-resolver-rules), no proxy, no background networking, a throw-away profile. The
:class:`Browser` records every request the page makes (``requests``) and every uncaught script
error (``exceptions``), so tests can check that nothing left loopback and nothing threw.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


#: URL prefixes that stay on this machine.
LOCAL_PREFIXES = ("http://127.0.0.1:", "http://localhost:", "data:", "about:", "file:")


class Browser:
    """One headless Chromium with one page target. Use ``async with Browser() as b``."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.exceptions: list[str] = []
        self.console_errors: list[str] = []
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: dict[str, asyncio.Event] = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._profile = tempfile.mkdtemp(prefix="skitter-chromium-")
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Browser:
        assert CHROMIUM, "chromium is not installed (make sysdeps)"
        self._proc = await asyncio.create_subprocess_exec(
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--no-first-run",
            "--no-default-browser-check",
            "--no-proxy-server",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            f"--user-data-dir={self._profile}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "--window-size=1280,900",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert self._proc.stderr is not None
        ws_url = ""
        for _ in range(200):  # bounded: Chromium prints this line first thing
            line = (await asyncio.wait_for(self._proc.stderr.readline(), 30)).decode()
            if not line:
                break
            if line.startswith("DevTools listening on "):
                ws_url = line.split(" ", 3)[3].strip()
                break
        assert ws_url, "chromium did not start its DevTools endpoint"
        asyncio.get_running_loop().create_task(self._drain(self._proc.stderr))
        self._session = aiohttp.ClientSession()
        port = ws_url.split(":")[2].split("/")[0]
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as r:
            targets = await r.json(content_type=None)
        page = next(t for t in targets if t["type"] == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        for domain in ("Page", "Runtime", "Network", "Log"):
            await self.send(f"{domain}.enable")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    @staticmethod
    async def _drain(stream: asyncio.StreamReader) -> None:
        with contextlib.suppress(Exception):
            while await stream.readline():
                pass

    async def _read(self) -> None:
        assert self._ws is not None
        async for msg in self._ws:
            data = json.loads(msg.data)
            if "id" in data:
                fut = self._pending.pop(data["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(data)
                continue
            method, params = data.get("method"), data.get("params", {})
            if method == "Network.requestWillBeSent":
                self.requests.append(params["request"]["url"])
            elif method == "Runtime.exceptionThrown":
                d = params["exceptionDetails"]
                self.exceptions.append(
                    d.get("exception", {}).get("description") or d.get("text", "")
                )
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                self.console_errors.append(str(params.get("args")))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                self.console_errors.append(params["entry"].get("text", ""))
            if method in self._events:
                self._events[method].set()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call a CDP method; returns its ``result``.

        Raises:
            AssertionError: the browser answered with an error.
        """
        assert self._ws is not None
        i = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[i] = fut
        await self._ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
        data = await asyncio.wait_for(fut, 60)
        assert "error" not in data, data["error"]
        return data.get("result", {})  # type: ignore[no-any-return]

    async def goto(self, url: str) -> None:
        """Navigate and wait for the load event."""
        loaded = self._events["Page.loadEventFired"] = asyncio.Event()
        await self.send("Page.navigate", url=url)
        await asyncio.wait_for(loaded.wait(), 60)

    async def eval(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (promises awaited)."""
        r = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        assert "exceptionDetails" not in r, r["exceptionDetails"]
        return r["result"].get("value")

    async def wait_for(self, expression: str, polls: int = 600) -> Any:
        """Evaluate ``expression`` every 50 ms until truthy (at most ``polls`` times: 30 s)."""
        for _ in range(polls):
            v = await self.eval(expression)
            if v:
                return v
            await asyncio.sleep(0.05)
        raise AssertionError(f"never true: {expression}")

    def outside_requests(self) -> list[str]:
        """Requests to anything but loopback (data: and about: URLs are not network)."""
        return [u for u in self.requests if not u.startswith(LOCAL_PREFIXES)]


def chromium_available() -> bool:
    """Whether a Chromium binary is on PATH."""
    return CHROMIUM is not None and Path(CHROMIUM).exists()
