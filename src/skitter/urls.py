"""URL parsing, joining and canonical form (WHATWG URL via ada-url).

SEED VERSION: the urls helper replaces this with the full module; signatures are fixed.
"""

from __future__ import annotations

import ada_url


def join(base: str, href: str, encoding: str = "utf-8") -> str | None:
    """Resolve ``href`` against ``base`` per the WHATWG URL Standard; None if invalid."""
    try:
        return str(ada_url.URL(href, base=base).href)
    except ValueError:
        return None
