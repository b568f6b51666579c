"""HTTP fetching: the :class:`Fetcher` port, its aiohttp adapter, resolver and decoding.

- :class:`Fetcher` (``base``): ``fetch(request, method=, max_body_bytes=) -> Response``, one hop.
- :class:`AiohttpFetcher` (``aiohttp``): the implementation used by the crawler.
- :class:`SkitterResolver` (``resolver``): ``--resolve`` map, DNS cache, private-address guard.
- :class:`ContentDecoder` (``decode``): streaming Content-Encoding decoding with a size cap.
"""

from __future__ import annotations

from skitter.fetch.aiohttp import AiohttpFetcher
from skitter.fetch.base import Fetcher
from skitter.fetch.decode import ACCEPT_ENCODING, ContentDecoder, parse_content_encoding
from skitter.fetch.resolver import SkitterResolver

__all__ = [
    "ACCEPT_ENCODING",
    "AiohttpFetcher",
    "ContentDecoder",
    "Fetcher",
    "SkitterResolver",
    "parse_content_encoding",
]
