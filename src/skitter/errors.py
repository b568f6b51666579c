"""Skitter's exception tree.

::

    SkitterError
    ├── ConfigError          bad flag, setting or file (CLI: one line, exit 2)
    ├── StateError           output folder unusable / incompatible (CLI: exit 2)
    ├── FetchError           .kind is the stable error kind written to pages.jsonl
    │   ├── FetchTimeout     (also TimeoutError)          kind "timeout"
    │   ├── ConnectError     (also OSError)               kind "dns", "connect", "tls",
    │   │                                                 "blocked_address"
    │   ├── TooManyRedirects                              kind "too_many_redirects"
    │   ├── BodyTooLarge                                  kind "body_too_large"
    │   └── ProtocolError    bad framing, failed decoding kind "protocol"
    ├── FrontierError        backend failure (sqlite locked, corrupt state)
    ├── HookError            a user hook raised, with CrawlHooks(errors="stop")
    └── OutputError          an output or state file could not be written (disk full,
                             EIO, EROFS, EDQUOT): CLI one line naming the file, exit 1

HTTP 4xx/5xx are responses, never exceptions.
"""

from __future__ import annotations

__all__ = [
    "BodyTooLarge",
    "ConfigError",
    "ConnectError",
    "FetchError",
    "FetchTimeout",
    "FrontierError",
    "HookError",
    "OutputError",
    "ProtocolError",
    "SkitterError",
    "StateError",
    "TooManyRedirects",
]

#: The stable error kinds that may appear in pages.jsonl ``error``.
ERROR_KINDS = (
    "timeout",
    "dns",
    "connect",
    "tls",
    "too_many_redirects",
    "body_too_large",
    "protocol",
    "robots_unreachable",
    "blocked_address",
)


class SkitterError(Exception):
    """Base of every error Skitter raises on purpose."""


class ConfigError(SkitterError):
    """A bad flag, setting or input file; the CLI prints it on one line and exits 2."""


class StateError(SkitterError):
    """The output folder cannot be used (non-empty without --resume, incompatible format...)."""


class FrontierError(SkitterError):
    """The frontier backend failed (database locked or corrupt)."""


class HookError(SkitterError):
    """A user hook raised while ``CrawlHooks(errors="stop")``: the crawl stopped.

    Attributes:
        hook: the hook's name ("on_page", "on_error", "link_filter").
        url: the URL of the record (or the page of the link) it was called for.
        original: the exception the hook raised (also ``__cause__``).
    """

    def __init__(self, hook: str, url: str, original: BaseException) -> None:
        super().__init__(f"hook {hook} raised for {url}: {type(original).__name__}: {original}")
        self.hook = hook
        self.url = url
        self.original = original


class OutputError(SkitterError):
    """An output or state file could not be written (disk full, I/O error, read-only or
    over quota); what was recorded before stays usable and the crawl can be resumed.

    Attributes:
        path: the file that could not be written.
        cause: the operating system's (or SQLite's) reason, e.g. "No space left on device".
    """

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"cannot write {path}: {cause}")
        self.path = path
        self.cause = cause

    @classmethod
    def from_os_error(cls, exc: OSError, path: str | None = None) -> OutputError:
        """From an :class:`OSError` (its own file name unless ``path`` is given)."""
        name = path or exc.filename or "?"
        return cls(str(name), exc.strerror or str(exc))


class FetchError(SkitterError):
    """A fetch failed without an HTTP response.

    Attributes:
        kind: one of :data:`ERROR_KINDS` (stable, written to pages.jsonl).
        detail: human-readable detail (written as ``error_detail``).
        bytes_read: decoded body bytes read before the failure (0 if none).
    """

    kind = "protocol"

    def __init__(self, detail: str, *, kind: str | None = None, bytes_read: int = 0) -> None:
        super().__init__(detail)
        if kind is not None:
            self.kind = kind
        self.detail = detail
        self.bytes_read = bytes_read


class FetchTimeout(FetchError, TimeoutError):
    """A deadline fired: connect, idle read, or the whole-fetch deadline (see ``detail``)."""

    kind = "timeout"


class ConnectError(FetchError, OSError):
    """DNS failure, refused/reset connection, TLS failure or a blocked address (see ``kind``)."""

    kind = "connect"


class TooManyRedirects(FetchError):
    """More redirect hops than allowed, or a redirect loop."""

    kind = "too_many_redirects"


class BodyTooLarge(FetchError):
    """The decoded body exceeded ``max_body_bytes``; the fetch was aborted."""

    kind = "body_too_large"


class ProtocolError(FetchError):
    """Bad HTTP framing, an incomplete body, or content that failed to decode."""

    kind = "protocol"
