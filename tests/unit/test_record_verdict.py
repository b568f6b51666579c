"""crawl's report.json verdicts use the link checker's vocabulary."""

from __future__ import annotations

import pytest

from skitter.checklinks import record_verdict


@pytest.mark.parametrize(
    "status, error, detail, first_hop, verdict",
    [
        (200, None, None, None, "ok"),
        (200, None, None, 301, "redirected"),
        (200, None, None, 302, "ok"),
        (404, None, None, 302, "broken"),
        (404, None, None, None, "broken"),
        (410, None, None, None, "broken"),
        (403, None, None, None, "unverified"),
        (429, None, "rate limited (429): gave up after 3 attempts", None, "unverified"),
        (999, None, None, None, "unverified"),
        (301, None, "already crawled", None, "redirected"),
        (302, None, "out of scope (offsite)", None, "ok"),
        (302, None, "redirect without Location", None, "broken"),
        (None, "dns", "x", None, "broken"),
        (None, "timeout", "x", None, "broken"),
        (None, "robots_unreachable", "x", None, "unverified"),
        (None, "blocked_address", "x", None, "excluded"),
        (None, "body_too_large", "decoded body over 10 MiB (HTTP status 200)", None, "ok"),
        (500, None, None, None, "broken"),
    ],
)
def test_record_verdict(
    status: int | None, error: str | None, detail: str | None, first_hop: int | None, verdict: str
) -> None:
    assert record_verdict(status, error, detail, first_hop) == verdict
