"""skitter.urls.join against the WHATWG URL Standard's own test data (urltestdata.json).

The data file lives in the ``shared/data`` folder beside the repository checkout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ada_url
import pytest

from skitter.urls import join

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "urltestdata.json"

_ADA_PUNYCODE = (
    "ada-url accepts an invalid Punycode A-label; the WHATWG host parser (UTS #46 ToASCII "
    "with CheckHyphens=false, VerifyDnsLength=false) must fail on it"
)

#: Entries where ada-url (and so join) disagrees with the data: {index: reason}.
#: Each is asserted to *still* deviate, so a fixed upstream shows up as a failure here.
KNOWN_DEVIATIONS: dict[int, str] = {
    307: _ADA_PUNYCODE + " ('xn--pokxncvks')",
    308: _ADA_PUNYCODE + " ('xn--pokxncvks' after IPv4-looking labels)",
    310: _ADA_PUNYCODE + " ('XN--pokxncvks')",
    311: _ADA_PUNYCODE + " ('Xn--pokxncvks')",
    312: _ADA_PUNYCODE + " ('XN--pokxncvks' after IPv4-looking labels)",
    313: _ADA_PUNYCODE + " ('xN--pokxncvks' after IPv4-looking labels)",
    819: _ADA_PUNYCODE + " (empty 'xn--' label, file: URL)",
    901: _ADA_PUNYCODE + " (empty 'xn--' label)",
}


def _load() -> list[tuple[int, dict[str, Any]]]:
    if not DATA.is_file():
        return []
    data = json.loads(DATA.read_text(encoding="utf-8"))
    return [(i, e) for i, e in enumerate(data) if isinstance(e, dict)]


CASES = _load()


def _resolve(entry: dict[str, Any]) -> str | None:
    base = entry.get("base")
    if base is not None:
        return join(base, entry["input"])
    # No base: the input is parsed alone (join always needs a base).
    try:
        return str(ada_url.URL(entry["input"]).href)
    except (ValueError, UnicodeError):
        return None


def _expected(entry: dict[str, Any]) -> str | None:
    return None if entry.get("failure") else entry["href"]


@pytest.mark.parametrize(("index", "entry"), CASES, ids=[f"entry{i:04d}" for i, _ in CASES] or None)
def test_urltestdata(index: int, entry: dict[str, Any]) -> None:
    got = _resolve(entry)
    expected = _expected(entry)
    if index in KNOWN_DEVIATIONS:
        assert got != expected, (
            f"entry {index} now matches the standard; remove it from KNOWN_DEVIATIONS"
        )
    else:
        assert got == expected, (entry["input"], entry.get("base"))


def test_data_loaded_and_deviations_tiny() -> None:
    # never a silent skip: without ../shared the WHATWG URL tests must fail loudly
    assert DATA.is_file(), f"WHATWG URL test data not found at {DATA} (../shared missing?)"
    assert len(CASES) > 800
    assert len(KNOWN_DEVIATIONS) <= 10
    indices = {i for i, _ in CASES}
    assert set(KNOWN_DEVIATIONS) <= indices
