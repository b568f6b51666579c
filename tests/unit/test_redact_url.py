"""A Redis URL's password is never kept: :func:`skitter.settings.redact_url` and where it is
applied (state.json's settings, the resume check)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from skitter.settings import CrawlSettings, redact_url
from skitter.state import check_resume_compatible, settings_from_dict, settings_to_dict


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("redis://:secret@h:6379/0", "redis://:***@h:6379/0"),
        ("rediss://user:se:cr@et@h:6380/2", "rediss://user:***@h:6380/2"),
        ("redis://secret@h/0", "redis://***@h/0"),
        ("redis+cluster://:pw@a:1,b:2", "redis+cluster://:***@a:1,b:2"),
        ("redis://h:6379/0", "redis://h:6379/0"),
        ("sqlite", "sqlite"),
        ("memory", "memory"),
    ],
)
def test_redact_url(url: str, want: str) -> None:
    assert redact_url(url) == want


def test_state_keeps_no_password_and_resume_accepts_the_full_url() -> None:
    s = CrawlSettings(
        out_dir="o", seeds=("http://a.test/",), frontier="redis://:secret@127.0.0.1:1/0"
    )
    d = settings_to_dict(s)
    assert d["frontier"] == "redis://:***@127.0.0.1:1/0"
    assert "secret" not in repr(d)
    stored = settings_from_dict(d)
    check_resume_compatible(stored, s)  # the same crawl, its password given again
    with pytest.raises(Exception, match="--frontier differs"):
        check_resume_compatible(stored, replace(s, frontier="redis://:secret@127.0.0.1:2/0"))
