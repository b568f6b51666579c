"""The URL-seen test of the Redis frontier: exact (64-bit fingerprints) or a Bloom filter.

* ``exact`` (default): each URL's 64-bit fingerprint, 8 bytes, appended to one of the
  shard's ``seen:B`` strings; never drops a new URL.
* ``bloom:RATE`` (``--seen bloom:0.001``): one bit string per shard (``{CRAWL:s}:bloom``),
  ``k`` bits per URL set with ``SETBIT`` inside the add script (Redis 7 as Debian ships it has
  no RedisBloom module). Sized for ``capacity`` URLs (``--seen-capacity``, default
  :data:`DEFAULT_CAPACITY`) spread over the shards: ``m = ceil(-n ln RATE / (ln 2)^2)`` bits
  and ``k = round(m / n * ln 2)`` for the ``n = ceil(capacity / shards)`` URLs of one shard
  (Bloom 1970; Kirsch and Mitzenmacher 2006 for the ``k`` positions from one 64-bit hash).
  A new URL is taken for seen (dropped, never fetched) with probability about RATE once the
  crawl has seen ``capacity`` URLs, less before, more past it:
  ``(1 - exp(-k n / m))^k`` for ``n`` URLs in a shard.

The choice is made when the crawl is created and kept in Redis (``{CRAWL}:frontier`` field
``seen``, :meth:`SeenSpec.encode`): joining workers use the crawl's, whatever they ask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from skitter.frontier.redis_codec import _fp8
from skitter.settings import parse_seen

__all__ = ["DEFAULT_CAPACITY", "SeenSpec", "parse_seen"]

#: URLs a Bloom filter is sized for when ``--seen-capacity`` is not given.
DEFAULT_CAPACITY = 10_000_000

#: Largest Redis string, in bits (512 MB).
MAX_BITS = 2**32


@dataclass(frozen=True, slots=True)
class SeenSpec:
    """How a crawl's URL-seen test works.

    Attributes:
        k: bits per URL of the Bloom filter; 0 = exact.
        bits: bits of each shard's Bloom filter (m); 0 = exact.
    """

    k: int = 0
    bits: int = 0

    @property
    def bloom(self) -> bool:
        """True for a Bloom filter."""
        return self.k > 0

    @classmethod
    def for_rate(cls, rate: float | None, capacity: int, shards: int) -> SeenSpec:
        """The spec of ``--seen`` (its :func:`parse_seen` rate; None = exact) for
        ``capacity`` URLs over ``shards`` shards.

        Raises:
            ValueError: capacity < 1, or a filter past Redis's 512 MB string per shard.
        """
        if rate is None:
            return cls()
        if capacity < 1:
            raise ValueError(f"--seen-capacity must be >= 1, got {capacity}")
        n = math.ceil(capacity / shards)
        m = math.ceil(-n * math.log(rate) / math.log(2) ** 2)
        if m > MAX_BITS:
            raise ValueError(
                f"--seen-capacity {capacity} at that rate needs {m} bits per shard, more than "
                "a Redis string holds (2^32): lower the capacity or raise the rate"
            )
        return cls(max(1, round(m / n * math.log(2))), m)

    def encode(self) -> str:
        """``exact`` or ``bloom:K:BITS`` (what Redis keeps)."""
        return f"bloom:{self.k}:{self.bits}" if self.bloom else "exact"

    @classmethod
    def decode(cls, text: str) -> SeenSpec:
        """Inverse of :meth:`encode`. Raises ValueError on anything else."""
        if text == "exact":
            return cls()
        kind, k, bits = text.split(":")
        if kind != "bloom" or int(k) < 1 or not 1 <= int(bits) <= MAX_BITS:
            raise ValueError(f"bad seen spec {text!r}")
        return cls(int(k), int(bits))

    def positions(self, fp: int) -> list[int]:
        """The ``k`` bit positions of fingerprint ``fp`` (enhanced double hashing:
        ``h1 + i*h2 + i*i`` mod ``bits``, h1 and h2 the halves of the 64-bit fingerprint)."""
        fp &= 0xFFFFFFFFFFFFFFFF
        h1, h2 = fp >> 32, fp & 0xFFFFFFFF
        return [(h1 + i * h2 + i * i) % self.bits for i in range(self.k)]

    def args(self, fp: int, buckets: int) -> tuple[bytes | str, int | str]:
        """The two add/mark_done script arguments of a fingerprint: exact -> (its 8 bytes,
        its bucket); Bloom -> (its positions, comma-separated, ``b``)."""
        if self.bloom:
            return ",".join(map(str, self.positions(fp))), "b"
        return _fp8(fp), (fp & 0xFFFFFFFFFFFFFFFF) % buckets

    def expected_rate(self, n: int) -> float:
        """Probability that a new URL is taken for seen in a shard holding ``n`` URLs."""
        if not self.bloom:
            return 0.0
        return float((1.0 - math.exp(-self.k * n / self.bits)) ** self.k)
