"""skitter.compact_json: json.dumps' compact UTF-8 bytes, by msgspec, with json's fallbacks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skitter import compact_json


@pytest.mark.parametrize(
    "obj",
    [
        {"url": "http://a.test/é", "status": 200, "elapsed_s": 0.084, "error": None},
        [1, 2**63, -(2**63), True, None, "tab\there", {"k": []}],
        {1: "int keys become text", "x": "€ and 日本"},
    ],
)
def test_encode_is_json_dumps_compact_in_utf8(obj: Any) -> None:
    want = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    assert compact_json.encode(obj) == want
    assert compact_json.decode(want) == json.loads(want)


def test_what_msgspec_refuses_takes_json_escaped() -> None:
    odd = {"detail": "bad \udc80 surrogate", "é": 1}
    line = compact_json.encode(odd)
    assert line == json.dumps(odd, separators=(",", ":")).encode("ascii")
    assert compact_json.decode(line) == odd  # the escaped surrogate is read back
    assert compact_json.encode({None: 1, 1.5: 2}) == b'{"null":1,"1.5":2}'


def test_decode_raises_value_error_on_bad_json() -> None:
    with pytest.raises(ValueError):
        compact_json.decode(b'{"cut')
