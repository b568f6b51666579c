"""A real ``redis-server`` for tests: free loopback port, temporary folder, AOF on.

:class:`RedisServer` starts Debian's ``redis-server`` bound to 127.0.0.1 with
``appendonly yes`` (``appendfsync`` chosen per test, ``always`` by default), ``save ''``
(no RDB snapshots: the AOF is the only persistence) and ``maxmemory-policy noeviction``.
Fault helpers: :meth:`RedisServer.kill9` (SIGKILL, no shutdown save) and
:meth:`RedisServer.start` again on the same folder and port (restart from the AOF).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["RedisCluster3", "RedisServer", "free_port", "redis_server_binary"]


def redis_server_binary() -> str | None:
    """Path of ``redis-server`` (PATH or /usr/bin, /usr/sbin), or None."""
    for cand in (shutil.which("redis-server"), "/usr/bin/redis-server", "/usr/sbin/redis-server"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def free_cluster_port() -> int:
    """A port P <= 55535 with P and its cluster bus port P + 10000 free on 127.0.0.1.

    Raises:
        RuntimeError: none found in 200 tries.
    """
    rnd = random.Random()
    for _ in range(200):
        port = rnd.randrange(20000, 55536)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


def _ping(port: int, password: str | None) -> bool:
    """One RESP PING on a fresh connection; True on +PONG (or NOAUTH: it is up)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            if password is not None:
                s.sendall(f"AUTH {password}\r\n".encode())
                s.recv(64)
            s.sendall(b"PING\r\n")
            reply = s.recv(64)
    except OSError:
        return False
    return reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH")


class RedisServer:
    """One ``redis-server`` process owned by a test.

    Args:
        workdir: folder for the AOF, the log and the config (created).
        appendfsync: ``always`` (every write on disk before the reply) or ``everysec``.
        password: ``requirepass`` value, or None for none.
        maxmemory_policy: e.g. ``noeviction`` (default) or ``allkeys-lru`` (refusal tests).
        extra: further ``--name value`` pairs (e.g. ``["--cluster-enabled", "yes"]``).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        appendfsync: str = "always",
        password: str | None = None,
        maxmemory_policy: str = "noeviction",
        extra: list[str] | None = None,
    ) -> None:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed (run `make sysdeps`)")
        self.binary = binary
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.appendfsync = appendfsync
        self.password = password
        self.maxmemory_policy = maxmemory_policy
        self.extra = list(extra or [])
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0`` (with the password when one is set)."""
        auth = f":{self.password}@" if self.password is not None else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def _args(self) -> list[str]:
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.workdir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--maxmemory-policy", self.maxmemory_policy,
            "--logfile", "redis.log",
            "--daemonize", "no",
            "--protected-mode", "yes",
        ]  # fmt: skip
        if self.password is not None:
            args += ["--requirepass", self.password]
        return args + self.extra

    def start(self, attempts: int = 5) -> None:
        """Start (or restart on the same folder and port, loading the AOF); wait until up.

        Raises:
            RuntimeError: the server did not come up (its log's tail is in the message).
        """
        assert self.proc is None, "already running"
        for _ in range(attempts):
            if not self.port:
                cluster = "--cluster-enabled" in self.extra
                self.port = free_cluster_port() if cluster else free_port()
            self.proc = subprocess.Popen(
                self._args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            for _ in range(500):  # bounded: 500 x 20 ms
                if self.proc.poll() is not None:
                    break
                if _ping(self.port, self.password):
                    return
                time.sleep(0.02)
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            log = self.workdir / "redis.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            if "Address already in use" not in tail:
                raise RuntimeError(f"redis-server did not start: {tail}")
            self.port = 0  # another process took the port: pick another
        raise RuntimeError("redis-server did not start: no free port")

    def kill9(self) -> None:
        """SIGKILL the server (no shutdown, nothing flushed beyond what appendfsync did)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def restart(self) -> None:
        """``kill -9`` then start again on the same folder and port (reloads the AOF)."""
        self.kill9()
        self.start()

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL if it lingers)."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


class RedisCluster3:
    """Three ``redis-server`` masters on loopback forming one Redis Cluster (no replicas;
    ``cluster-announce-ip 127.0.0.1``, so no client ever leaves loopback)."""

    def __init__(self, workdir: Path) -> None:
        self.servers = [
            RedisServer(
                workdir / f"n{i}",
                extra=[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-announce-ip",
                    "127.0.0.1",
                ],
            )
            for i in range(3)
        ]

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3``."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{s.port}" for s in self.servers)

    def start(self) -> None:
        """Start the nodes, assign the 16384 slots, wait until the cluster state is ok.

        Raises:
            RuntimeError: the cluster did not form.
        """
        for s in self.servers:
            s.start()
        cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
        nodes = [f"127.0.0.1:{s.port}" for s in self.servers]
        subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
        for _ in range(500):  # bounded: 500 x 20 ms
            states = [
                subprocess.run(
                    [cli, "-p", str(s.port), "cluster", "info"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                ).stdout
                for s in self.servers
            ]
            if all("cluster_state:ok" in st for st in states):
                return
            time.sleep(0.02)
        raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")

    def stop(self) -> None:
        """Stop every node."""
        for s in self.servers:
            s.stop()
