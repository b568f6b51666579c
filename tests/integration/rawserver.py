"""A raw-bytes HTTP test server on 127.0.0.1 for misbehaving-server tests.

Each route writes exactly the bytes it is given (with optional sleeps), so tests can produce
framing that real servers and aiohttp.web refuse to: truncated bodies, split chunk terminators,
raw non-ASCII header bytes, one byte per second forever, never closing.

Example::

    async with RawServer() as srv:
        srv.route("/t1", [head(200, [("Content-Length", "5000")]), b"x" * 1200])  # then close
        srv.route("/slow", drip(b"HTTP/1.1 200 OK\\r\\nX-Pad: ", b"a", interval_s=0.25))
        srv.route("/", response(200, body=b"fast"), host="fast.example.test")  # virtual host
        url = srv.url("/t1")                      # http://127.0.0.1:PORT/t1
        ...
        assert srv.requests("/t1")[0].header("user-agent")

Routes are matched on (Host header without port, lower-case) then on the request target
(exact, then without the query); a route registered with ``host=None`` matches any host.
Unknown targets get a 404. After a route's actions the connection is closed unless the
route was registered with ``keep_alive=True`` (then the next request on it is served).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "Action",
    "Handler",
    "LogEntry",
    "RawConnection",
    "RawRequest",
    "RawServer",
    "chunked",
    "drip",
    "head",
    "response",
]

#: A route step: bytes are written (and drained), a float is a sleep in seconds.
Action = bytes | float


@dataclass(frozen=True, slots=True)
class RawRequest:
    """One parsed request.

    Attributes:
        time: ``time.monotonic()`` when the request head was complete.
        method: request method, e.g. "GET".
        target: the request target exactly as sent (path and query, raw bytes as latin-1).
        headers: (name, value) pairs in wire order, latin-1 decoded.
        host: the Host header, lower-case, port removed ("" if absent).
        body: request body (Content-Length only).
        conn: number of the TCP connection it came on (1, 2, ... in accept order).
    """

    time: float
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    host: str
    body: bytes = b""
    conn: int = 0

    @property
    def path(self) -> str:
        """Alias of :attr:`target`."""
        return self.target

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        low = name.lower()
        for k, v in self.headers:
            if k.lower() == low:
                return v
        return None


#: Access-log entries are the parsed requests.
LogEntry = RawRequest


class RawConnection:
    """The client connection a handler writes to."""

    def __init__(
        self, writer: asyncio.StreamWriter, reader: asyncio.StreamReader | None = None
    ) -> None:
        self._writer = writer
        self._reader = reader
        #: Set True in a handler to serve another request on this connection afterwards.
        self.keep_alive = False

    async def write(self, data: bytes) -> None:
        """Write ``data`` and wait until it is handed to the kernel."""
        self._writer.write(data)
        await self._writer.drain()

    async def sleep(self, seconds: float) -> None:
        """Pause for ``seconds``."""
        await asyncio.sleep(seconds)

    async def drip(self, data: bytes, interval_s: float) -> None:
        """Write ``data`` one byte at a time, sleeping ``interval_s`` seconds before each."""
        for i in range(len(data)):
            await asyncio.sleep(interval_s)
            await self.write(data[i : i + 1])

    def peer_closed(self) -> bool:
        """True once the client has closed (or half-closed) its side of the connection."""
        return self._writer.transport.is_closing() or (
            self._reader is not None and self._reader.at_eof()
        )

    def abort(self) -> None:
        """Drop the connection at once (TCP RST where the OS allows)."""
        self._writer.transport.abort()


#: A route handler: receives the request and the connection, writes whatever it likes.
Handler = Callable[[RawRequest, RawConnection], Awaitable[None]]


def head(
    status: int = 200,
    headers: Iterable[tuple[str, str] | tuple[bytes, bytes]] = (),
    *,
    reason: str | None = None,
    version: str = "HTTP/1.1",
) -> bytes:
    """A status line plus header lines plus the blank line, CRLF-terminated.

    Header names/values may be ``str`` (encoded latin-1) or raw ``bytes``.
    """
    if reason is None:
        reason = {200: "OK", 301: "Moved Permanently", 302: "Found", 404: "Not Found"}.get(
            status, "Status"
        )
    out = [f"{version} {status} {reason}\r\n".encode("latin-1")]
    for name, value in headers:
        n = name if isinstance(name, bytes) else name.encode("latin-1")
        v = value if isinstance(value, bytes) else value.encode("latin-1")
        out.append(n + b": " + v + b"\r\n")
    out.append(b"\r\n")
    return b"".join(out)


def response(
    status: int = 200,
    headers: Iterable[tuple[str, str] | tuple[bytes, bytes]] = (),
    body: bytes = b"",
    *,
    reason: str | None = None,
    content_length: bool = True,
) -> bytes:
    """A complete response; adds ``Content-Length`` (unless told not to) after ``headers``."""
    hs = list(headers)
    if content_length:
        hs.append(("Content-Length", str(len(body))))
    return head(status, hs, reason=reason) + body


def chunked(*chunks: bytes, last: bool = True) -> bytes:
    """Chunked transfer coding of ``chunks``; ``last`` appends the ``0\\r\\n\\r\\n`` terminator."""
    out = [b"%x\r\n%s\r\n" % (len(c), c) for c in chunks if c]
    if last:
        out.append(b"0\r\n\r\n")
    return b"".join(out)


def drip(prefix: bytes, unit: bytes, *, interval_s: float = 1.0) -> Handler:
    """A handler writing ``prefix`` at once, then ``unit`` every ``interval_s`` s forever."""

    async def handler(_req: RawRequest, conn: RawConnection) -> None:
        await conn.write(prefix)
        while True:
            await asyncio.sleep(interval_s)
            await conn.write(unit)

    return handler


def _actions_handler(actions: Sequence[Action]) -> Handler:
    async def handler(_req: RawRequest, conn: RawConnection) -> None:
        for step in actions:
            if isinstance(step, bytes):
                await conn.write(step)
            else:
                await asyncio.sleep(step)

    return handler


class RawServer:
    """A TCP server on ``host``:0 serving routes of raw bytes; keeps an access log.

    Attributes:
        log: every request received, in arrival order.
        port: the bound port (after :meth:`start`).
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.log: list[RawRequest] = []
        self._routes: dict[tuple[str | None, str], tuple[Handler, bool]] = {}
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._conns = 0

    def route(
        self,
        target: str,
        handler: Handler | Sequence[Action] | bytes,
        *,
        host: str | None = None,
        keep_alive: bool = False,
    ) -> None:
        """Serve ``target`` (e.g. "/a?b=1" or "/a") with ``handler``.

        Args:
            handler: an async ``(request, connection)`` callable, a sequence of actions
                (bytes to write, floats to sleep), or one bytes object to write.
            host: only for requests whose Host (without port) is this name; None = any host.
            keep_alive: keep the connection open for another request after the handler.
        """
        if isinstance(handler, bytes):
            fn = _actions_handler([handler])
        elif callable(handler):
            fn = handler
        else:
            fn = _actions_handler(list(handler))
        self._routes[(host.lower() if host else None, target)] = (fn, keep_alive)

    def url(self, target: str = "/", host: str | None = None) -> str:
        """``http://{host or 127.0.0.1}:{port}{target}``."""
        return f"http://{host or self.host}:{self.port}{target}"

    def hosts(self) -> set[str]:
        """Every virtual host name that has a route (for ``settings_for``'s resolve map)."""
        return {h for h, _ in self._routes if h is not None}

    def requests(self, target: str | None = None, host: str | None = None) -> list[RawRequest]:
        """Logged requests, filtered by exact target and/or host."""
        return [
            r
            for r in self.log
            if (target is None or r.target == target) and (host is None or r.host == host)
        ]

    async def start(self) -> RawServer:
        """Bind to ``host``:0 and start serving."""
        self._server = await asyncio.start_server(self._on_client, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        """Stop listening, cancel running handlers and close every connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        for w in list(self._writers):
            w.transport.abort()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> RawServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _find(self, host: str, target: str) -> tuple[Handler, bool] | None:
        path = target.split("?", 1)[0]
        for key in ((host, target), (host, path), (None, target), (None, path)):
            if key in self._routes:
                return self._routes[key]
        return None

    async def _read_request(self, reader: asyncio.StreamReader, conn: int = 0) -> RawRequest | None:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return None
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) < 3:
            return None
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
        host = next((v for k, v in headers if k.lower() == "host"), "")
        if host.startswith("["):
            host = host[: host.find("]") + 1]
        else:
            host = host.rsplit(":", 1)[0] if ":" in host else host
        length = next((v for k, v in headers if k.lower() == "content-length"), "0")
        body = b""
        if length.isdigit() and int(length) > 0:
            body = await reader.readexactly(int(length))
        return RawRequest(
            time=time.monotonic(),
            method=parts[0],
            target=parts[1],
            headers=tuple(headers),
            host=host.lower(),
            body=body,
            conn=conn,
        )

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self._conns += 1
        conn_no = self._conns
        try:
            while True:
                req = await self._read_request(reader, conn_no)
                if req is None:
                    break
                self.log.append(req)
                conn = RawConnection(writer, reader)
                found = self._find(req.host, req.target)
                if found is None:
                    await conn.write(
                        response(
                            404, [("Connection", "close")], b"not found: " + req.target.encode()
                        )
                    )
                    break
                handler, keep_alive = found
                conn.keep_alive = keep_alive
                await handler(req, conn)
                if not conn.keep_alive:
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
