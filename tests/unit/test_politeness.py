"""Tests for skitter.politeness: Retry-After, host spacing, retry decisions."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skitter.politeness import (
    BACKOFF_MAX_S,
    HostPolicy,
    RetryDecision,
    backoff_s,
    next_allowed_at,
    parse_retry_after,
    retry_decision,
)
from skitter.settings import PolitenessSettings

NOW = datetime(2015, 10, 21, 7, 0, 0, tzinfo=UTC).timestamp()

# --------------------------------------------------------------------------- Retry-After


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        ("  0 ", 0.0),
        ("-5", 0.0),
        ("1.5", 1.5),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 28 * 60.0),  # RFC 9110 §10.2.3 example
        ("Wednesday, 21-Oct-15 07:00:30 GMT", 30.0),  # obsolete RFC 850 form
        ("Wed, 21 Oct 2015 06:00:00 GMT", 0.0),  # in the past
        ("Wed, 21 Oct 2015 07:01:00 -0000", 60.0),  # no zone information: UTC
        ("Wed, 21 Oct 2015 09:01:00 +0200", 60.0),
        (None, None),
        ("", None),
        ("soon", None),
        ("12 seconds", None),
        ("0x10", None),
        ("Wed, 32 Oct 2015 07:28:00 GMT", None),
        ("inf", None),
        ("nan", None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    got = parse_retry_after(value, NOW)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


@given(st.text(max_size=40))
def test_parse_retry_after_never_raises_nor_goes_negative(value: str) -> None:
    got = parse_retry_after(value, NOW)
    assert got is None or got >= 0.0


@given(st.integers(min_value=0, max_value=10**6))
def test_parse_retry_after_date_round_trip(delta: int) -> None:
    date = format_datetime(datetime.fromtimestamp(NOW + delta, UTC), usegmt=True)
    assert parse_retry_after(date, NOW) == pytest.approx(float(delta))


# --------------------------------------------------------------------------- spacing


@pytest.mark.parametrize(
    ("delay", "crawl_delay", "cap", "expected"),
    [
        (1.0, None, 30.0, 101.0),
        (1.0, 5.0, 30.0, 105.0),
        (10.0, 5.0, 30.0, 110.0),  # the larger of the two
        (1.0, 120.0, 30.0, 130.0),  # Crawl-delay capped
        (0.0, 0.0, 30.0, 100.0),
        (40.0, 120.0, 30.0, 140.0),  # the cap applies to Crawl-delay only
    ],
)
def test_next_allowed_at(
    delay: float, crawl_delay: float | None, cap: float, expected: float
) -> None:
    assert next_allowed_at(100.0, delay, crawl_delay, cap) == expected


@given(
    st.floats(0, 1e6),
    st.floats(0, 100),
    st.none() | st.floats(0, 1e4),
    st.floats(0, 100),
)
def test_next_allowed_at_bounds(
    end: float, delay: float, crawl_delay: float | None, cap: float
) -> None:
    at = next_allowed_at(end, delay, crawl_delay, cap)
    assert at >= end + delay
    assert at <= end + max(delay, cap)


# --------------------------------------------------------------------------- retries


def test_backoff_doubles_and_caps() -> None:
    assert [backoff_s(n) for n in range(1, 8)] == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert backoff_s(10_000) == BACKOFF_MAX_S


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_retryable_statuses(status: int) -> None:
    d = retry_decision(
        status, None, attempts=1, retries=2, retry_after_s=None, max_retry_after_s=60
    )
    assert d == RetryDecision(True, 2.0, f"http_{status}")


@pytest.mark.parametrize("kind", ["timeout", "connect", "protocol"])
def test_retryable_error_kinds(kind: str) -> None:
    d = retry_decision(None, kind, attempts=2, retries=2, retry_after_s=None, max_retry_after_s=60)
    assert d == RetryDecision(True, 4.0, kind)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (200, None),
        (404, None),
        (403, None),
        (501, None),
        (301, None),
        (None, "dns"),
        (None, "tls"),
        (None, "too_many_redirects"),
        (None, "body_too_large"),
        (None, "blocked_address"),
        (None, "robots_unreachable"),
        (None, None),
    ],
)
def test_not_retryable(status: int | None, kind: str | None) -> None:
    d = retry_decision(status, kind, attempts=1, retries=5, retry_after_s=1.0, max_retry_after_s=60)
    assert d == RetryDecision(False, 0.0, "not_retryable")


def test_incomplete_body_with_status_is_retried_as_protocol() -> None:
    d = retry_decision(200, "protocol", 1, 2, None, 60)
    assert d.retry and d.reason == "protocol"


def test_attempts_count_includes_the_failed_one() -> None:
    # retries=2 → up to 3 attempts in total: after the 1st and 2nd failure we retry.
    assert retry_decision(503, None, 1, 2, None, 60).retry
    assert retry_decision(503, None, 2, 2, None, 60).retry
    assert retry_decision(503, None, 3, 2, None, 60) == RetryDecision(
        False, 0.0, "retries_exhausted"
    )
    assert retry_decision(503, None, 1, 0, None, 60).reason == "retries_exhausted"


def test_retry_after_is_used_and_capped() -> None:
    assert retry_decision(429, None, 1, 2, 7.0, 60) == RetryDecision(True, 7.0, "http_429")
    assert retry_decision(503, None, 1, 2, 0.0, 60) == RetryDecision(True, 0.0, "http_503")
    assert retry_decision(503, None, 1, 2, 60.0, 60).retry
    assert retry_decision(429, None, 1, 2, 61.0, 60) == RetryDecision(
        False, 0.0, "retry_after_too_long"
    )


@given(st.integers(1, 50), st.integers(0, 10))
def test_retry_wait_is_bounded(attempts: int, retries: int) -> None:
    d = retry_decision(503, None, attempts, retries, None, 60)
    assert d.retry is (attempts <= retries)
    assert 0.0 <= d.wait_s <= BACKOFF_MAX_S


def test_host_policy_binds_settings() -> None:
    policy = HostPolicy.from_settings(
        PolitenessSettings(delay_s=2.0, max_crawl_delay_s=10.0, retries=1, max_retry_after_s=5.0)
    )
    assert policy.next_allowed_at(50.0) == 52.0
    assert policy.next_allowed_at(50.0, 100.0) == 60.0
    assert policy.retry(503, None, 1) == RetryDecision(True, 2.0, "http_503")
    assert policy.retry(503, None, 2).reason == "retries_exhausted"
    assert policy.retry(429, None, 1, 6.0).reason == "retry_after_too_long"
