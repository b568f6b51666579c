"""Compact JSON for the files and pipes written on every page: pages.jsonl rows, the
``--processes`` hand-off lines, the checkpoint.

:func:`encode` gives the bytes of ``json.dumps(obj, ensure_ascii=False, separators=(",",
":"))`` in UTF-8 (RFC 8259), by msgspec at a tenth of json's CPU; :func:`decode` reads any
JSON text json reads. Pure functions, no I/O.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

__all__ = ["decode", "encode"]

_ENCODER = msgspec.json.Encoder()


def encode(obj: Any) -> bytes:
    """``obj`` as compact UTF-8 JSON, no trailing newline.

    What UTF-8 cannot hold (a lone surrogate) and keys msgspec refuses (``None``, ``True``,
    floats: json writes them as text) take json's path, with non-ASCII characters escaped
    (``\\uXXXX``: still valid JSON, read back the same by :func:`decode`).

    Raises:
        TypeError: ``obj`` holds something JSON cannot represent.
        ValueError: a NaN or infinite float reached json's path with ``allow_nan`` off (never:
            json's default allows them).
    """
    try:
        return _ENCODER.encode(obj)
    except (UnicodeEncodeError, TypeError):
        return json.dumps(obj, separators=(",", ":")).encode("ascii")


def decode(data: bytes | str) -> Any:
    """The value of the JSON text ``data`` (msgspec; what it refuses but json reads, such
    as escaped lone surrogates, by json).

    Raises:
        ValueError: ``data`` is not JSON.
    """
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        return json.loads(data)
