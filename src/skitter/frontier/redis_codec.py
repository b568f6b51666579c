"""How the Redis frontier writes a queued request: the queue member ``KEY16 attempts | JSON``
(:func:`encode_request`, :func:`decode_member`), its score's (priority, depth) level
(:func:`_pd`) and a fingerprint's 8-byte and 16-hex-digit forms (the URL-seen set, keys).
"""

from __future__ import annotations

import json
from typing import Any

from skitter.models import Hop, Request

__all__ = ["decode_member", "encode_request"]


def _fp16(fp: int) -> str:
    return f"{fp & 0xFFFFFFFFFFFFFFFF:016x}"


def _fp8(fp: int) -> bytes:
    return (fp & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")


def _pd(req: Request) -> int:
    """The (priority, depth) level of a request: ``(priority+512) * 1024 + depth``, clamped."""
    return (min(max(req.priority, -512), 511) + 512) * 1024 + min(max(req.depth, 0), 1023)


#: Field defaults of the JSON list after ``url`` (trailing defaults are left out).
_DEFAULTS: tuple[Any, ...] = (0, None, None, [], 0, 0)


def encode_request(req: Request) -> str:
    """JSON of a :class:`Request` (the queue member's tail): a list of its fields, trailing
    defaults left out (short members keep small host queues in Redis's compact listpack)."""
    fields: list[Any] = [
        req.url,
        req.depth,
        req.referer,
        req.origin_url,
        [[h.url, h.status] for h in req.redirects],
        req.priority,
        1 if req.check_only else 0,
    ]
    while len(fields) > 1 and fields[-1] == _DEFAULTS[len(fields) - 2]:
        fields.pop()
    return json.dumps(fields, separators=(",", ":"))


def decode_member(member: str) -> tuple[Request, int]:
    """(request, attempts) of a queue member ``KEY16 attempts | JSON``."""
    bar = member.index("|", 16)
    attempts = int(member[16:bar])
    fields = json.loads(member[bar + 1 :])
    fields += _DEFAULTS[len(fields) - 1 :]
    url, depth, referer, origin, redirects, priority, check = fields
    req = Request(
        url,
        depth,
        referer,
        origin,
        tuple(Hop(u, s) for u, s in redirects),
        priority,
        bool(check),
    )
    return req, attempts
