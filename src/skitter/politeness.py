"""Politeness arithmetic: per-host spacing, Retry-After and retry/backoff decisions.

Pure functions (no clock, no I/O): callers pass the current time in. All times and
durations are in seconds (floats); absolute times are on whatever clock the caller uses
(``time.monotonic()`` for scheduling, epoch seconds for :func:`parse_retry_after`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

from skitter.settings import PolitenessSettings

__all__ = [
    "BACKOFF_BASE_S",
    "BACKOFF_MAX_S",
    "RANDOM_WAIT_RANGE",
    "RETRYABLE_ERROR_KINDS",
    "RETRYABLE_STATUSES",
    "HostPolicy",
    "RetryDecision",
    "backoff_s",
    "next_allowed_at",
    "parse_retry_after",
    "random_wait_factor",
    "retry_decision",
]

#: HTTP statuses worth retrying: Too Many Requests and transient server errors.
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})

#: FetchError kinds worth retrying ("protocol" covers incomplete bodies / resets mid-body).
RETRYABLE_ERROR_KINDS = frozenset({"timeout", "connect", "protocol"})

#: First backoff wait, in seconds; doubles per attempt.
BACKOFF_BASE_S = 2.0

#: Longest backoff wait, in seconds.
BACKOFF_MAX_S = 60.0

_DELTA_SECONDS = re.compile(r"[+-]?\d+(?:\.\d*)?")


def parse_retry_after(value: str | None, now_epoch: float) -> float | None:
    """Seconds to wait according to a Retry-After header value (RFC 9110 §10.2.3).

    Args:
        value: the header value: delta-seconds (``"120"``) or an HTTP-date
            (``"Wed, 21 Oct 2015 07:28:00 GMT"``, parsed with
            :func:`email.utils.parsedate_to_datetime`; a date without a zone is UTC).
        now_epoch: the current time as Unix epoch seconds (for HTTP-dates).

    Returns:
        The wait in seconds, never negative (a negative delta or a date in the past
        gives 0.0), or None if ``value`` is None, empty or unparseable. Leniency beyond
        the RFC: a sign or a fractional part on delta-seconds is accepted.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if _DELTA_SECONDS.fullmatch(value):
        seconds = float(value)
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        wait = when.timestamp() - now_epoch
    except (OverflowError, OSError, ValueError):
        return None
    return max(0.0, wait)


#: ``--random-wait``: the delay is multiplied by a factor drawn uniformly from this range
#: (wget's jitter), never the robots.txt Crawl-delay.
RANDOM_WAIT_RANGE = (0.5, 1.5)


def random_wait_factor(enabled: bool) -> float:
    """The ``--random-wait`` factor for one delay: uniform in :data:`RANDOM_WAIT_RANGE`
    when ``enabled``, else 1.0."""
    if not enabled:
        return 1.0
    import random

    return random.uniform(*RANDOM_WAIT_RANGE)


def next_allowed_at(
    end_time: float,
    delay_s: float,
    crawl_delay_s: float | None,
    max_crawl_delay_s: float,
    jitter: float = 1.0,
) -> float:
    """When the next request to a host may start.

    ``end_time + max(delay_s * jitter, min(crawl_delay_s, max_crawl_delay_s))``: the
    configured delay (times the ``--random-wait`` factor ``jitter``), or the robots.txt
    Crawl-delay if larger, capped at ``max_crawl_delay_s`` (Crawl-delay is a non-standard
    record, RFC 9309 §2.2.4; it is never shortened by the jitter).

    Args:
        end_time: when the previous request to the host finished (clock seconds).
        delay_s: configured delay between requests to one host, seconds.
        crawl_delay_s: the host's robots.txt Crawl-delay in seconds, or None.
        max_crawl_delay_s: cap applied to ``crawl_delay_s``, seconds.
    """
    wait = delay_s * jitter
    if crawl_delay_s is not None:
        wait = max(wait, min(crawl_delay_s, max_crawl_delay_s))
    return end_time + max(0.0, wait)


def backoff_s(attempts: int) -> float:
    """Exponential backoff after ``attempts`` failed attempts: 2 s, 4 s, 8 s... capped at 60 s."""
    exponent = max(0, attempts - 1)
    if exponent >= 16:  # 2 * 2**16 is far beyond the cap; avoid huge ints
        return BACKOFF_MAX_S
    return min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2.0**exponent)


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """Whether to try a failed fetch again.

    Attributes:
        retry: True to schedule another attempt.
        wait_s: seconds to wait before it (0.0 when ``retry`` is False).
        reason: why: for a retry the cause ("http_503", "timeout"...); otherwise
            "not_retryable", "retries_exhausted" or "retry_after_too_long".
    """

    retry: bool
    wait_s: float
    reason: str


def retry_decision(
    status: int | None,
    error_kind: str | None,
    attempts: int,
    retries: int,
    retry_after_s: float | None,
    max_retry_after_s: float,
) -> RetryDecision:
    """Decide whether and when to retry a fetch.

    Retryable: a FetchError kind in :data:`RETRYABLE_ERROR_KINDS` (timeout, connect,
    protocol) or an HTTP status in :data:`RETRYABLE_STATUSES` (429, 500, 502, 503, 504),
    as long as ``attempts <= retries``. The wait is the Retry-After value when one was
    given (RFC 9110 §10.2.3; if it exceeds ``max_retry_after_s`` the URL is not
    retried, reason "retry_after_too_long"), else :func:`backoff_s`.

    Args:
        status: HTTP status of the response, or None if there was none.
        error_kind: :attr:`skitter.errors.FetchError.kind`, or None.
        attempts: attempts made so far, including the one that just failed (>= 1).
        retries: extra attempts allowed (PolitenessSettings.retries).
        retry_after_s: parsed Retry-After in seconds (see :func:`parse_retry_after`), or None.
        max_retry_after_s: longest Retry-After honoured, seconds.
    """
    if error_kind is not None and error_kind in RETRYABLE_ERROR_KINDS:
        cause = error_kind
    elif status is not None and status in RETRYABLE_STATUSES:
        cause = f"http_{status}"
    else:
        return RetryDecision(False, 0.0, "not_retryable")
    if attempts > retries:
        return RetryDecision(False, 0.0, "retries_exhausted")
    if retry_after_s is not None:
        if retry_after_s > max_retry_after_s:
            return RetryDecision(False, 0.0, "retry_after_too_long")
        return RetryDecision(True, max(0.0, retry_after_s), cause)
    return RetryDecision(True, backoff_s(attempts), cause)


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The politeness settings that apply to every host, with the decisions bound.

    Attributes:
        delay_s: seconds between the end of one request and the start of the next.
        max_crawl_delay_s: cap on a robots.txt Crawl-delay, seconds.
        retries: extra attempts for retryable failures.
        max_retry_after_s: longest Retry-After honoured, seconds.
    """

    delay_s: float = 1.0
    max_crawl_delay_s: float = 30.0
    retries: int = 2
    max_retry_after_s: float = 60.0

    @classmethod
    def from_settings(cls, settings: PolitenessSettings) -> HostPolicy:
        """Build from :class:`skitter.settings.PolitenessSettings`."""
        return cls(
            delay_s=settings.delay_s,
            max_crawl_delay_s=settings.max_crawl_delay_s,
            retries=settings.retries,
            max_retry_after_s=settings.max_retry_after_s,
        )

    def next_allowed_at(self, end_time: float, crawl_delay_s: float | None = None) -> float:
        """:func:`next_allowed_at` with this policy's delay and cap (clock seconds)."""
        return next_allowed_at(end_time, self.delay_s, crawl_delay_s, self.max_crawl_delay_s)

    def retry(
        self,
        status: int | None,
        error_kind: str | None,
        attempts: int,
        retry_after_s: float | None = None,
    ) -> RetryDecision:
        """:func:`retry_decision` with this policy's retries and Retry-After cap."""
        return retry_decision(
            status, error_kind, attempts, self.retries, retry_after_s, self.max_retry_after_s
        )
