"""``--save-files DIR``: each accepted response body as a file under ``DIR/host/path``.

The layout is wget's ``-x`` (``--force-directories``): ``http://h.test/a/b.pdf`` →
``DIR/h.test/a/b.pdf``; a directory URL (path ending in ``/``) → ``.../index.html``; a
non-default port → ``h.test+8080``; a query → ``name@query``.

Names are made safe (:func:`safe_relpath`): segments are percent-decoded, then ``.``/``..``
(also spelled ``%2e%2e``), ``/`` and ``\\`` inside a segment, control characters and the
characters Windows refuses (``<>:"|?*``) are percent-encoded again; a segment longer than
:data:`MAX_NAME_BYTES` is cut and given a hash of the URL. Every path is checked to stay
inside DIR after resolving symbolic links; one that would not is refused.

Collisions: two URLs never share a file, even on a case-insensitive file system. The saver
keeps ``DIR/.skitter-files.tsv`` (URL, relative path; one line per file, appended after the
file is in place; the processes of a ``--processes`` crawl share it, their hosts differ):
a name already taken by another URL -- compared case-folded, and a file
where a directory is needed or the reverse -- gets ``~HASH`` (of the URL) before its
extension. The same URL always gets the same file (a resumed crawl overwrites its own).

Crash safety: a file is written to a temporary file in ``DIR/.skitter-tmp/`` (named for the
writing process; those of dead processes are removed when a saver opens), flushed, then
renamed into place (``os.replace``); the worker saves the file before it writes the page's
pages.jsonl record, so every recorded result has its file and a refetched one replaces it
whole.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from skitter.errors import ConfigError

__all__ = ["MANIFEST", "MAX_NAME_BYTES", "TMP_DIR", "FileSaver", "check_root", "safe_relpath"]

log = logging.getLogger("skitter")

#: The saver's list of written files (URL TAB relative path), in DIR.
MANIFEST = ".skitter-files.tsv"
#: Folder of files being written (renamed into place when complete), in DIR.
TMP_DIR = ".skitter-tmp"
#: Longest file or folder name written, in UTF-8 bytes (file systems allow 255).
MAX_NAME_BYTES = 200
_UNSAFE = set('<>:"|?*\\/') | {chr(c) for c in range(32)} | {"\x7f"}
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _hash(url: str, n: int = 0) -> str:
    return hashlib.sha1(f"{url}#{n}".encode()).hexdigest()[:10]


def _safe_segment(raw: str, url: str) -> str:
    """One path segment (still percent-encoded as in the URL) as a safe file name."""
    name = unquote(raw, errors="replace")
    name = "".join(quote(c, safe="") if c in _UNSAFE or c == "%" else c for c in name)
    if name in (".", ".."):
        name = name.replace(".", "%2E")
    if name.endswith((" ", ".")):  # Windows drops them: keep the name distinct
        name = name[:-1] + quote(name[-1], safe="")
    if len(name.encode()) > MAX_NAME_BYTES:
        _stem, dot, ext = name.rpartition(".")
        ext = ext if dot and len(ext.encode()) <= 16 else ""
        keep = name.encode()[: MAX_NAME_BYTES - 40].decode("utf-8", errors="ignore")
        name = f"{keep}~{_hash(url)}" + (f".{ext}" if ext else "")
    return name


def safe_relpath(url: str) -> tuple[str, ...] | None:
    """The path parts under DIR for ``url`` (wget ``-x`` layout, made safe; see the module
    doc), or None for a URL without a host or not http(s).

    ``http://H/a/%2e%2e/b`` → ``("h", "a", "%2E%2E", "b")``; ``http://h/`` →
    ``("h", "index.html")``.
    """
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not host:
        return None
    top = _safe_segment(host, url)
    if port is not None and port != _DEFAULT_PORTS[parts.scheme]:
        top += f"+{port}"
    segs = parts.path.split("/")[1:] or [""]
    out = [top]
    for i, s in enumerate(segs):
        last = i == len(segs) - 1
        if not s:
            if last:
                out.append("index.html")
            continue  # an empty segment ("//") adds no folder
        out.append(_safe_segment(s, url))
    if parts.query:
        q = _safe_segment(parts.query, url)
        out[-1] = _safe_segment(f"{out[-1]}@{q}", url)
    return tuple(out)


def _with_suffix(name: str, tag: str) -> str:
    stem, dot, ext = name.rpartition(".")
    if dot and stem:
        return f"{stem}~{tag}.{ext}"
    return f"{name}~{tag}"


class FileSaver:
    """Writes bodies under ``root`` (see the module doc).

    Args:
        root: DIR (created if missing).
    Raises:
        OSError: DIR cannot be created or its manifest read.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._real_root = self.root.resolve()
        self._by_url: dict[str, str] = {}
        self._files: dict[str, str] = {}  # case-folded relative path -> URL
        self._dirs: set[str] = set()  # case-folded folder paths
        self._manifest_path = self.root / MANIFEST
        self._torn = False
        self._tmp = self.root / TMP_DIR
        self._tmp.mkdir(exist_ok=True)
        self._clear_dead_tmp()
        self._n = 0
        self._load()
        self._manifest = open(self._manifest_path, "a", encoding="utf-8")  # noqa: SIM115

    def _clear_dead_tmp(self) -> None:
        """Remove temporary files left by processes that no longer run (a crash)."""
        for p in self._tmp.iterdir():
            pid = p.name.split("-", 1)[0]
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                p.unlink(missing_ok=True)
            except OSError:
                pass  # alive, someone else's

    def _load(self) -> None:
        try:
            data = self._manifest_path.read_bytes()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        # a torn last line (a crash while appending) is ignored and ended with a newline
        # before the next append (not truncated: another process may be appending)
        self._torn = end < len(data)
        for line in data[:end].decode("utf-8", errors="replace").splitlines():
            url, sep, rel = line.partition("\t")
            if sep:
                self._take(url, rel)

    def _take(self, url: str, rel: str) -> None:
        self._by_url[url] = rel
        key = rel.casefold()
        self._files[key] = url
        parts = key.split("/")
        for i in range(1, len(parts)):
            self._dirs.add("/".join(parts[:i]))

    def _clash(self, url: str, parts: tuple[str, ...]) -> int | None:
        """Index of the first part of ``parts`` that clashes with a taken name (a folder
        that is another URL's file, or a file name taken by another URL or by a folder;
        case-folded), or None."""
        folded = [p.casefold() for p in parts]
        for i in range(1, len(folded)):
            if "/".join(folded[:i]) in self._files:
                return i - 1
        key = "/".join(folded)
        if self._files.get(key, url) != url or key in self._dirs:
            return len(parts) - 1
        return None

    def path_for(self, url: str) -> Path | None:
        """Where ``url``'s body goes (the same path every time), or None if the URL cannot
        be saved safely (no host, or its path would leave DIR)."""
        rel = self._by_url.get(url)
        if rel is None:
            parts = safe_relpath(url)
            if parts is None:
                return None
            candidate = parts
            for n in range(len(parts) * 4 + 4):  # each round renames one clashing part
                i = self._clash(url, candidate)
                if i is None:
                    break
                named = _with_suffix(candidate[i], _hash(url, n))
                candidate = (*candidate[:i], named, *candidate[i + 1 :])
            else:
                return None
            rel = "/".join(candidate)
        target = self.root / rel
        try:
            real = target.parent.resolve() / target.name
        except OSError:
            return None
        if not real.is_relative_to(self._real_root) or real == self._real_root:
            log.warning("not saving %s: %s would be outside %s", url, real, self._real_root)
            return None
        return target

    def save(self, url: str, body: bytes) -> Path | None:
        """Write ``body`` as ``url``'s file (atomic); returns its path, or None if refused
        (see :meth:`path_for`) or not writable (logged)."""
        target = self.path_for(url)
        if target is None:
            return None
        self._n += 1
        tmp = self._tmp / f"{os.getpid()}-{self._n}.tmp"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or (target.exists() and not target.is_file()):
                log.warning("not saving %s: %s exists and is not a plain file", url, target)
                return None
            with open(tmp, "wb") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            log.warning("cannot save %s to %s: %s", url, target, exc)
            tmp.unlink(missing_ok=True)
            return None
        if url not in self._by_url:
            rel = target.relative_to(self.root).as_posix()
            self._take(url, rel)
            self._manifest.write(("\n" if self._torn else "") + f"{url}\t{rel}\n")
            self._torn = False
            self._manifest.flush()
        return target

    def close(self) -> None:
        """Close the manifest."""
        self._manifest.close()


def check_root(root: str | os.PathLike[str]) -> None:
    """Make sure ``--save-files`` DIR is usable before a crawl starts: it is created (with
    its parents) if missing and its manifest opened for appending, as the saver will.

    Raises:
        ConfigError: DIR cannot be created or written (one line naming the flag).
    """
    try:
        FileSaver(root).close()
    except OSError as exc:
        raise ConfigError(
            f"--save-files {os.fspath(root)}: cannot write there: {exc.strerror or exc}"
        ) from None
