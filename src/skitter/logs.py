"""Skitter's log: where it goes, its line format, and the per-request line.

Loggers (all under ``skitter``):

* ``skitter.request``  -- one INFO line per HTTP request made (robots.txt included):
  ``METHOD url status bytes ms attempt=N`` (status ``-`` and the error kind when there was
  no response);
* ``skitter.politeness`` -- INFO lines for each politeness decision: a delay and its cause
  (``--delay``, robots.txt ``Crawl-delay``, ``--random-wait``), a retry backoff, a
  robots.txt outcome;
* ``skitter`` -- warnings and errors.

Every line reads ``TIME LEVEL pK MESSAGE`` (UTC ISO 8601 time to the millisecond, ``pK``
the crawler process: ``p0`` for a single process). Logs go to stderr (``-v`` shows INFO,
else WARNING and up) and, with ``--log-file FILE``, to that file at INFO level too; never
to stdout, which carries reports only.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skitter.fetch.base import Fetcher
    from skitter.models import Request, Response

__all__ = [
    "LOG_FORMAT",
    "LoggedFetcher",
    "log_request",
    "logged",
    "politeness",
    "request_log",
    "set_process_index",
    "setup_logging",
]

#: Line format of every handler set up by :func:`setup_logging`.
LOG_FORMAT = "%(asctime)s %(levelname)s p%(skitter_process)s %(message)s"

request_log = logging.getLogger("skitter.request")
politeness = logging.getLogger("skitter.politeness")

_process_index = 0


class _Formatter(logging.Formatter):
    """UTC times with milliseconds and the crawler process index."""

    def format(self, record: logging.LogRecord) -> str:
        record.skitter_process = _process_index
        return super().format(record)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        t = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{t}.{int(record.msecs):03d}Z"


class _LogFile(logging.FileHandler):
    """``--log-file``: a write failure (disk full...) is reported once in one line on
    stderr, never as a logging traceback; the crawl goes on (the log is not its output)."""

    failed = False

    def handleError(self, record: logging.LogRecord) -> None:
        if not self.failed:
            self.failed = True
            exc = sys.exc_info()[1]
            cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            print(f"skitter: warning: cannot write log file {self.baseFilename}: {cause}; "
                  "no more log lines go there", file=sys.stderr)  # fmt: skip

    def close(self) -> None:
        # the lines it still held are lost, as the warning said
        with contextlib.suppress(OSError):
            super().close()


def setup_logging(
    verbose: bool = False, log_file: str | None = None, process_index: int = 0
) -> None:
    """Configure the ``skitter`` loggers (idempotent: earlier handlers are replaced).

    Args:
        verbose: stderr shows INFO (requests, politeness) rather than WARNING and up.
        log_file: also append every line at INFO level to this file.
        process_index: the ``pK`` of this process's lines (``--processes``: 0..N-1).

    Raises:
        OSError: ``log_file`` cannot be opened for appending.
    """
    global _process_index
    _process_index = process_index
    root = logging.getLogger("skitter")
    for h in list(root.handlers):
        root.removeHandler(h)
        if isinstance(h, logging.FileHandler):
            h.close()
    formatter = _Formatter(LOG_FORMAT)
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(logging.INFO if verbose else logging.WARNING)
    err.setFormatter(formatter)
    root.addHandler(err)
    level = logging.INFO if verbose else logging.WARNING
    if log_file:
        fh = _LogFile(log_file, encoding="utf-8", delay=False)
        fh.setLevel(logging.INFO)
        fh.setFormatter(formatter)
        root.addHandler(fh)
        level = logging.INFO
    root.setLevel(level)


def set_process_index(index: int) -> None:
    """Make this process's log lines say ``p{index}`` (a crawler process of ``--processes``)."""
    global _process_index
    _process_index = index


def log_request(
    method: str,
    url: str,
    status: int | None,
    nbytes: int,
    elapsed_s: float,
    attempt: int,
    error: str | None = None,
) -> None:
    """Log one HTTP request on ``skitter.request`` (INFO):
    ``METHOD url status bytes ms attempt=N`` -- status ``-`` then ``error=KIND`` when the
    request got no response. Costs one level check when INFO is off."""
    if not request_log.isEnabledFor(logging.INFO):
        return
    st = "-" if status is None else str(status)
    tail = f" error={error}" if error else ""
    request_log.info(
        "%s %s %s %d %d attempt=%d%s",
        method,
        url,
        st,
        nbytes,
        round(elapsed_s * 1000),
        attempt,
        tail,
    )


class LoggedFetcher:
    """A :class:`~skitter.fetch.base.Fetcher` that logs each request it makes
    (:func:`log_request`) with the attempt number of the lease it serves."""

    __slots__ = ("_attempt", "_inner")

    def __init__(self, inner: Fetcher, attempt: int) -> None:
        self._inner = inner
        self._attempt = attempt

    async def fetch(self, request: Request, *, method: str = "GET", **kw: Any) -> Response:
        """:meth:`Fetcher.fetch`, then one log line (status, bytes, ms; or the error kind).

        Raises:
            FetchError: as the wrapped fetcher.
        """
        from skitter.errors import FetchError

        started = time.perf_counter()
        try:
            resp = await self._inner.fetch(request, method=method, **kw)
        except FetchError as exc:
            log_request(method, request.url, None, exc.bytes_read,
                        time.perf_counter() - started, self._attempt, exc.kind)  # fmt: skip
            raise
        log_request(method, request.url, resp.status, len(resp.body),
                    time.perf_counter() - started, self._attempt)  # fmt: skip
        return resp

    async def aclose(self) -> None:
        """Close the wrapped fetcher."""
        await self._inner.aclose()


def logged(fetcher: Fetcher, attempt: int) -> Fetcher:
    """``fetcher`` logging each request as attempt ``attempt`` when ``skitter.request`` logs
    at INFO (``-v``, ``--log-file``); else ``fetcher`` itself (no cost)."""
    if request_log.isEnabledFor(logging.INFO):
        return LoggedFetcher(fetcher, attempt)
    return fetcher
