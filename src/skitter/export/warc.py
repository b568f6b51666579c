"""WARC 1.1 output: one ``request`` + one ``response`` record per HTTP exchange.

Files are named ``{prefix}-{YYYYMMDDhhmmss}-{serial:05d}.warc.gz`` (UTC time of creation, serial
counting on from the highest one already in the directory; WARC 1.1 Annex B; names, listing and
crash repair: :mod:`skitter.export.warc_files`) and start with a
``warcinfo`` record (WARC 1.1 §6.2). Every record is its own gzip member (WARC 1.1 Annex A,
"record-at-time compression"), so a reader can seek to any record and a file cut by a crash
can be repaired by dropping the last, incomplete member.

Records are serialised here (:func:`skitter.export.warc_record.warc_head`: the layout of
FastWARC's ``WarcRecord.write``, byte for byte, without its per-record object and copies; each
block hashed once for its digest, the payload once for its own). A record whose compressible
part is large (an uncompressed HTML body) is deflated whole, in one call, by libdeflate
(:func:`skitter.export.warc_record.gzip_whole`): at level 6 ≈ 89 µs for a 27 kB rust-doc page
against ≈ 117 µs through FastWARC's ``GzipWriter`` (whose zlib-rs state is allocated and
zeroed again, ≈ 0.5 MB, for every member) and ≈ 180 µs through :mod:`zlib`, for the same size
or 0.3% less. Records over 1 MiB (a 10 MB page) are deflated as a stream by the
``GzipWriter``, calling ``finish()`` after each record so each becomes its own member (no
whole copy of the block). Small records (requests, warcinfo, revisits) and responses whose
body is already content-encoded (gzip, br, zstd: deflate cannot shrink them) are made into a
gzip member here (:func:`skitter.export.warc_record.gzip_member`): the WARC and HTTP headers
deflated (by ISA-L: under 4 KiB it costs half of zlib's set-up for 2 bytes more a record), an
already-compressed body *stored* (deflate stored blocks, level 0), which gives the same file
size as deflating it at level 6 for a fifth of the CPU. The uncompressed record bytes are
the same either way.

Crash safety (see :mod:`skitter.export.base`): both members of an exchange are appended with one
``os.write``; :meth:`WarcWriter.repair` cuts a partial last member, and a ``request`` record left
without its ``response``.

Stored HTTP messages:

* request block (WARC 1.1 §6.5): ``GET /path?query HTTP/1.1``, the request headers as sent with
  ``Host`` first, then an empty line.
* response block (WARC 1.1 §6.3): ``HTTP/{version} {status} {reason}``, the response headers in
  wire order, an empty line, then :attr:`Response.raw_body` (still content-encoded, as received).
  The fetcher removes chunked transfer coding, so the stored body is *not* chunked; a
  ``Transfer-Encoding`` header is therefore stored renamed to
  ``X-Skitter-Orig-Transfer-Encoding`` (else WARC readers would try to de-chunk a plain body).
  ``Content-Encoding`` and ``Content-Length`` are kept as the server sent them (the latter may
  not match the stored body for HEAD answers or truncated bodies).
* ``WARC-Block-Digest`` is the SHA-1 of the block and ``WARC-Payload-Digest`` the SHA-1 of the
  entity body as stored (``raw_body``), both ``sha1:`` + base32, as warcio computes them.
"""

from __future__ import annotations

import hashlib
import io
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from fastwarc.stream_io import GzipWriter

from skitter import __version__
from skitter.export.base import AppendFile, Closing
from skitter.export.warc_files import file_name, list_files, repair_newest
from skitter.export.warc_record import (
    EMPTY_SHA1,
    ISAL_LEVELS,
    ORIG_TRANSFER_ENCODING,
    REVISIT_PROFILES,
    SMALL_DEFLATE_BYTES,
    WHOLE_DEFLATE_MAX_BYTES,
    WarcRevisit,
    _body_is_compressed,
    _clean,
    build_request_block,
    build_response_head,
    gzip_member,
    gzip_whole,
    record_id_pair,
    sha1_label,
    warc_date,
    warc_date_at,
    warc_head,
)
from skitter.models import Response

__all__ = [
    "DEFAULT_SOFTWARE",
    "ORIG_TRANSFER_ENCODING",
    "RECORD_WRITTEN_PAYLOAD_BYTES",
    "REVISIT_PROFILES",
    "RecordWritten",
    "WarcRevisit",
    "WarcWriter",
    "WarcWritten",
    "build_request_block",
    "build_response_head",
    "warc_date",
]

#: ``software`` field of the warcinfo record unless given.
DEFAULT_SOFTWARE = f"Skitter/{__version__}"

_WARC_FORMAT = "WARC File Format 1.1"
_CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
_REQUEST_TYPE = "application/http;msgtype=request"
_RESPONSE_TYPE = "application/http;msgtype=response"
#: Compressible bytes from which a record goes through FastWARC's gzip (fixed cost ≈ 60 µs,
#: ≈ 17 ns/byte) rather than :func:`gzip_member` (ISA-L below that: ≈ 9 µs).
_FASTWARC_GZIP_MIN_BYTES = SMALL_DEFLATE_BYTES
#: what ends every record, after its block (WARC 1.1 §4)
_RECORD_END = b"\r\n\r\n"


@dataclass(frozen=True, slots=True)
class WarcWritten:
    """Where one exchange went.

    Attributes:
        path: the WARC file.
        offset: byte offset of the request record's gzip member in ``path``.
        length: compressed bytes of both members (request + response).
        response_offset: byte offset of the response record's gzip member (for CDX indexes).
        request_id / response_id: the ``WARC-Record-ID`` values (``<urn:uuid:...>``).
        date: the ``WARC-Date`` of both records as written (see :func:`warc_date`).
    """

    path: str
    offset: int
    length: int
    response_offset: int
    request_id: str
    response_id: str
    date: str = ""


#: Payload bytes given in :attr:`RecordWritten.block` when the record has a payload digest:
#: none (an index needs the HTTP head; a copy of the payload cost ≈ 5 µs a 27 kB page).
RECORD_WRITTEN_PAYLOAD_BYTES = 0


@dataclass(frozen=True, slots=True)
class RecordWritten:
    """What a CDX(J) index needs of one ``response`` or ``revisit`` record just written
    (given to the writer's ``on_record`` hook, e.g. :class:`skitter.offline.cdxj.CrawlIndexer`,
    so that an index is made without reading the file back).

    Attributes:
        record_type: "response" or "revisit".
        target_uri: its ``WARC-Target-URI``.
        date: its ``WARC-Date`` as written (:func:`warc_date`).
        block: its block (HTTP status line and headers, then the payload as stored), only
            the HTTP head when ``payload_digest`` is set (:data:`RECORD_WRITTEN_PAYLOAD_BYTES`
            of payload: an index needs the head; a copy of a 10 MB body was a jump in memory).
        payload_digest: its ``WARC-Payload-Digest`` value, or None when it has none.
        offset: byte offset of its gzip member in the file; length: the member's bytes.
    """

    record_type: str
    target_uri: str
    date: str
    block: bytes
    payload_digest: str | None
    offset: int
    length: int


class WarcWriter(Closing):
    """Writes HTTP exchanges to rotating, per-record-gzipped WARC 1.1 files.

    Args:
        directory: where the ``.warc.gz`` files go (created if missing).
        prefix: file name prefix; also the warcinfo ``isPartOf`` unless ``is_part_of`` is given.
        max_bytes: rotate to a new file before a write that would make the current one larger
            than this (bytes). A single exchange larger than that still goes into one file.
        software: warcinfo ``software`` field.
        is_part_of: warcinfo ``isPartOf`` field (default: ``prefix``).
        compression_level: gzip level (1-9) of each member; 1-3 are ISA-L's deflate
            (:data:`skitter.export.warc_record.ISAL_LEVELS`: on 27 kB rust-doc pages served
            uncompressed, level 2 ≈ 26 µs a record against ≈ 89 µs at 6, for ≈ 16% more
            compressed bytes), 4-9 libdeflate's (FastWARC's streaming zlib-rs over 1 MiB;
            ISA-L's level 2 for records of less than 4 KiB to deflate). The crawl's default
            is 2 (:attr:`skitter.settings.CrawlSettings.warc_level`), this class's 6.
        warcinfo_fields: extra ``(name, value)`` fields for each warcinfo record.
        clock: returns Unix time in seconds; used for file names and default ``WARC-Date``.
        on_file_done: called as ``(path, final)`` once a file is complete: rotated away from
            (``final`` False) or closed (True); e.g. to write its CDXJ index
            (:class:`skitter.offline.cdxj.CrawlIndexer`).
        on_record: called as ``(path, RecordWritten)`` after each response or revisit record
            is written (after the warcinfo record, every record of a file this writer made
            goes through it); e.g. to index it as it is written.

    Files are created lazily (the first on the first :meth:`write_exchange`); an existing file
    is never appended to. Not thread-safe; one writer per directory and prefix.

    Raises:
        ValueError: ``max_bytes`` < 1, bad ``compression_level`` or a prefix containing a path
            separator.
        OSError: the directory cannot be created.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        prefix: str = "skitter",
        max_bytes: int = 1024**3,
        software: str = DEFAULT_SOFTWARE,
        is_part_of: str | None = None,
        compression_level: int = 6,
        warcinfo_fields: Sequence[tuple[str, str]] = (),
        clock: Callable[[], float] = time.time,
        on_file_done: Callable[[str, bool], None] | None = None,
        on_record: Callable[[str, RecordWritten], None] | None = None,
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        if not 1 <= compression_level <= 9:
            raise ValueError(f"compression_level must be 1..9, got {compression_level}")
        if not prefix or "/" in prefix or os.sep in prefix:
            raise ValueError(f"bad WARC file prefix {prefix!r}")
        self.directory = os.fspath(directory)
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.software = software
        self.is_part_of = is_part_of if is_part_of is not None else prefix
        self.compression_level = compression_level
        self.warcinfo_fields = tuple(warcinfo_fields)
        self._clock = clock
        self._on_file_done = on_file_done
        self._on_record = on_record
        os.makedirs(self.directory, exist_ok=True)
        existing = list_files(self.directory, prefix)
        self._serial = existing[-1][0] + 1 if existing else 0
        self._file: AppendFile | None = None
        self._size = 0  # bytes of the current file: this writer is its only writer (no fstat)
        self._exchanges_in_file = 0
        self._files: list[str] = []
        self._closed = False
        # FastWARC's streaming gzip, for records over WHOLE_DEFLATE_MAX_BYTES (made when
        # first needed: its deflate state is ≈ 0.5 MB)
        self._buf = io.BytesIO()
        self._gz: GzipWriter | None = None

    # -- properties -------------------------------------------------------------------------

    @property
    def files(self) -> list[str]:
        """Paths of the files this writer created, oldest first (a copy)."""
        return list(self._files)

    @property
    def current_path(self) -> str | None:
        """The file being written, or None before the first write / after close."""
        return self._file.path if self._file is not None else None

    def offset(self) -> int:
        """Size in bytes of the current file (0 before the first write / after close)."""
        return self._file.offset() if self._file is not None else 0

    # -- writing ----------------------------------------------------------------------------

    def write_exchange(
        self,
        request_url: str,
        response: Response,
        request_headers_block: bytes | None = None,
        *,
        ip: str | None = None,
        method: str = "GET",
        fetched_at: float | None = None,
        truncated: str | None = None,
        revisit: WarcRevisit | None = None,
        payload_sha1: bytes | None = None,
    ) -> WarcWritten:
        """Append a ``request`` and a ``response`` (or ``revisit``) record for one exchange.

        Both records share ``WARC-Target-URI`` (``request_url``) and ``WARC-Date``, point at each
        other with ``WARC-Concurrent-To`` (WARC 1.1 §5.7) and carry ``WARC-IP-Address`` when
        known. Both gzip members go to the file in one ``os.write``; the file is rotated first
        if the write would take it over ``max_bytes``.

        Args:
            request_url: the URL requested (``WARC-Target-URI``).
            response: the response; its ``headers``, ``raw_body``, ``status``, ``reason``,
                ``http_version`` and ``request_headers`` are stored.
            request_headers_block: the exact request bytes as sent (request line, headers, empty
                line); if None it is built by :func:`build_request_block` from
                ``response.request_headers``.
            ip: server IP address (``WARC-IP-Address``); default ``response.peer_ip``.
            method: HTTP method for the built request line.
            fetched_at: Unix time in seconds of the request (``WARC-Date``, microseconds);
                default: the clock's now.
            truncated: ``WARC-Truncated`` reason for the response (WARC 1.1: "length", "time",
                "disconnect", "unspecified") if ``raw_body`` is incomplete.
            revisit: write a ``revisit`` record instead of the response (WARC 1.1 §6.7): its
                block is the HTTP status line and headers only (the payload is left out),
                with ``WARC-Profile``, ``WARC-Refers-To-Target-URI``, ``WARC-Refers-To-Date``
                (and ``WARC-Refers-To`` when known); ``WARC-Payload-Digest`` is the SHA-1 of
                ``raw_body`` (for identical-payload-digest, that of the earlier capture,
                which the caller checked is equal) and is left out for a 304 without body.
            payload_sha1: the SHA-1 digest (20 bytes) of ``raw_body`` when the caller has it
                (the duplicate stage computed it): not computed again. None: computed here.

        Returns:
            Where the records went (:class:`WarcWritten`).

        Raises:
            ValueError: the writer is closed.
            OSError: a file could not be created or written (no partial exchange is left).
        """
        if self._closed:
            raise ValueError("write to a closed WarcWriter")
        date = warc_date_at(self._clock() if fetched_at is None else fetched_at)
        ip = ip if ip is not None else response.peer_ip
        req_id, resp_id = record_id_pair()

        if request_headers_block is None:
            req_block = build_request_block(request_url, response.request_headers, method=method)
        else:
            req_block = request_headers_block
            if not req_block.endswith(b"\r\n\r\n"):
                req_block += b"\r\n" if req_block.endswith(b"\r\n") else b"\r\n\r\n"
        resp_head = build_response_head(response)
        payload = response.raw_body

        common = [("WARC-Target-URI", request_url)]
        if ip:
            common.append(("WARC-IP-Address", ip))
        req_fields = [
            *common,
            ("WARC-Concurrent-To", resp_id),
            ("Content-Type", _REQUEST_TYPE),
            ("WARC-Payload-Digest", EMPTY_SHA1),
        ]
        resp_fields = [
            *common,
            ("WARC-Concurrent-To", req_id),
            ("Content-Type", _RESPONSE_TYPE),
        ]
        if truncated:
            resp_fields.append(("WARC-Truncated", truncated))
        label = sha1_label(payload_sha1 or hashlib.sha1(payload).digest())
        # as written: a response always has one, a revisit of an empty payload (a 304) none
        digest = label if revisit is None or payload else None
        if revisit is not None:
            profile = REVISIT_PROFILES.get(revisit.profile)
            if profile is None:
                raise ValueError(f"unknown revisit profile {revisit.profile!r}")
            resp_fields += [
                ("WARC-Profile", profile),
                ("WARC-Refers-To-Target-URI", revisit.refers_to_uri),
                ("WARC-Refers-To-Date", revisit.refers_to_date),
            ]
            if revisit.refers_to_id:
                resp_fields.append(("WARC-Refers-To", revisit.refers_to_id))

        req_parts = self._encode("request", req_id, date, req_fields, req_block)
        if revisit is None:
            resp_fields.append(("WARC-Payload-Digest", label))
            resp_parts = self._encode(
                "response",
                resp_id,
                date,
                resp_fields,
                resp_head,
                payload,
                store_payload=len(payload) > 0 and _body_is_compressed(response),
            )
        else:  # the block has no payload, the digest names it
            if digest is not None:
                resp_fields.append(("WARC-Payload-Digest", label))
            resp_parts = self._encode("revisit", resp_id, date, resp_fields, resp_head)
        req_len = sum(map(len, req_parts))
        data = b"".join(req_parts + resp_parts)

        file, start = self._file_for(len(data))
        file.write(data)
        self._size = start + len(data)
        self._exchanges_in_file += 1
        written = WarcWritten(
            path=file.path,
            offset=start,
            length=len(data),
            response_offset=start + req_len,
            request_id=req_id,
            response_id=resp_id,
            date=date,
        )
        if self._on_record is not None:
            self._on_record(
                file.path,
                RecordWritten(
                    "response" if revisit is None else "revisit",
                    request_url,
                    date,
                    resp_head,  # (a response always has a payload digest)
                    digest,
                    written.response_offset,
                    len(data) - req_len,
                ),
            )
        return written

    def _encode(
        self,
        record_type: str,
        record_id: str,
        date: str,
        fields: list[tuple[str, str]],
        head: bytes,
        payload: bytes = b"",
        *,
        store_payload: bool = False,
    ) -> list[bytes | memoryview]:
        """One record as the pieces of one complete gzip member (see the module doc): its
        block is ``head`` + ``payload``; ``fields`` are its named fields after
        ``Content-Length`` (:func:`warc_head`), ``WARC-Block-Digest`` is added here. FastWARC's
        gzip for large compressible blocks, else :func:`gzip_member`; with ``store_payload``
        the payload (already compressed) goes in stored deflate blocks. ``fields`` is
        extended."""
        sha1 = hashlib.sha1(head)
        if payload:
            sha1.update(payload)
        fields.append(("WARC-Block-Digest", sha1_label(sha1.digest())))
        length = len(head) + len(payload)
        warc = warc_head(record_type, record_id, date, length, fields)
        level = self.compression_level
        stored = len(payload) if store_payload else 0
        if level in ISAL_LEVELS or length - stored < _FASTWARC_GZIP_MIN_BYTES:
            if stored:
                return gzip_member((warc, head), level, payload, _RECORD_END)
            return gzip_member((warc, head, payload, _RECORD_END), level)
        if length <= WHOLE_DEFLATE_MAX_BYTES:
            whole = gzip_whole((warc, head, payload, _RECORD_END), level)
            if whole is not None:
                return [memoryview(whole)]
        return self._stream_member(warc, head, payload)

    def _stream_member(self, warc: bytes, head: bytes, payload: bytes) -> list[bytes | memoryview]:
        """One record as one gzip member, deflated as a stream by FastWARC's ``GzipWriter``
        (``finish()`` ends the member): no copy of a large block (10 MB pages)."""
        try:
            gz = self._gz
            if gz is None:
                gz = self._gz = GzipWriter(self._buf, compression_level=self.compression_level)
            gz.write(warc)
            gz.write(head)
            gz.write(payload)
            gz.write(_RECORD_END)
            gz.finish()
            data = self._buf.getvalue()
        except BaseException:
            # The compressor may hold half a member: start over with a fresh one.
            self._buf = io.BytesIO()
            self._gz = None
            raise
        self._buf.seek(0)
        self._buf.truncate()
        return [data]

    def _file_for(self, nbytes: int) -> tuple[AppendFile, int]:
        """The file the next ``nbytes`` go to, rotating or creating as needed, and its size."""
        if self._file is not None:
            size = self._size
            if self._exchanges_in_file == 0 or size + nbytes <= self.max_bytes:
                return self._file, size
            self._file.close()
            self._done(self._file.path, False)
            self._file = None
        self._file = self._open_next()
        self._size = self._file.offset()
        return self._file, self._size

    def _open_next(self) -> AppendFile:
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(self._clock()))
        while True:
            name = file_name(self.prefix, stamp, self._serial)
            path = os.path.join(self.directory, name)
            self._serial += 1
            try:
                file = AppendFile(path, exclusive=True)
            except FileExistsError:
                continue
            break
        fields = [
            ("software", self.software),
            ("format", _WARC_FORMAT),
            ("conformsTo", _CONFORMS_TO),
            ("isPartOf", self.is_part_of),
            *self.warcinfo_fields,
        ]
        block = "".join(f"{_clean(k)}: {_clean(v)}\r\n" for k, v in fields).encode("utf-8")
        try:
            info = self._encode(
                "warcinfo",
                record_id_pair()[0],
                warc_date(datetime.fromtimestamp(self._clock(), tz=UTC)),
                [("WARC-Filename", name), ("Content-Type", "application/warc-fields")],
                block,
            )
            file.write(b"".join(info))
        except BaseException:
            file.close()
            raise
        self._files.append(path)
        self._exchanges_in_file = 0
        return file

    # -- lifecycle --------------------------------------------------------------------------

    def sync(self) -> None:
        """``fsync`` the current file (call at checkpoints); no-op before the first write.

        Raises:
            OSError: fsync failed.
        """
        if self._file is not None:
            self._file.sync()

    def close(self) -> None:
        """Sync and close the current file; idempotent. Later writes raise ValueError."""
        if self._closed:
            return
        self._closed = True
        if self._file is not None:
            self._file.close()
            self._done(self._file.path, True)
            self._file = None
        if self._gz is not None:
            self._gz.close()

    def _done(self, path: str, final: bool) -> None:
        if self._on_file_done is not None:
            self._on_file_done(path, final)

    # -- recovery ---------------------------------------------------------------------------

    @classmethod
    def repair(
        cls, directory: str | os.PathLike[str], *, prefix: str = "skitter"
    ) -> list[tuple[str, int]]:
        """Make the newest ``{prefix}-*.warc.gz`` file in ``directory`` valid after a crash.

        Scans its gzip members (``zlib`` with ``wbits=31``, following ``unused_data``) and
        truncates it at the end of the last complete member whose content starts like a WARC
        record; if that last record is a ``request`` (its ``response`` was lost), it is cut too.
        A file left without any complete record is deleted. Only the newest file (highest
        serial) can be partial: files are never reopened, and rotation happens between writes.
        (:func:`skitter.export.warc_files.repair_newest`.)

        Returns:
            ``[(path, bytes_cut)]`` for the file changed, or ``[]`` if nothing was cut.

        Raises:
            OSError: the directory or file cannot be read, truncated or removed.
        """
        return repair_newest(directory, prefix)
