"""The file-type and self-tuning flags as parsed into settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from skitter.autotune import AutoLimit, FixedLimit, concurrency_limit, share_memory
from skitter.cli import build_parser
from skitter.cli.common import settings_from_args
from skitter.cli.focus_flags import AUTO_CONCURRENCY_MAX
from skitter.errors import ConfigError
from skitter.settings import CrawlSettings, FocusSettings
from skitter.state import settings_from_dict, settings_to_dict


def parse(tmp_path: Path, *flags: str) -> CrawlSettings:
    args = build_parser().parse_args(["crawl", "http://a.test/", "--out", str(tmp_path), *flags])
    return settings_from_args(args)


def test_lists_are_normalised_and_deduplicated(tmp_path: Path) -> None:
    s = parse(
        tmp_path,
        *("--accept-type", "Application/PDF", "--accept-type", "application/pdf"),
        *("--reject-type", "image/*", "--accept-ext", ".PDF", "--reject-ext", "zip"),
        *("--save-files", "files"),
    )
    f = s.focus
    assert f.accept_types == ("application/pdf",) and f.reject_types == ("image/*",)
    assert f.accept_exts == ("pdf",) and f.reject_exts == ("zip",) and f.save_files == "files"
    assert settings_from_dict(settings_to_dict(s)).focus == f  # state.json round trip


def test_auto_with_and_without_a_number(tmp_path: Path) -> None:
    s = parse(tmp_path, "--concurrency", "auto")
    assert s.focus.concurrency_auto and s.politeness.concurrency == AUTO_CONCURRENCY_MAX
    assert isinstance(concurrency_limit(s), AutoLimit)
    s = parse(tmp_path, "--concurrency", "40", "--concurrency", "auto", "--timeout", "auto")
    assert s.politeness.concurrency == 40 and s.focus.timeout_auto
    assert s.fetch.timeout_s == 30.0
    s = parse(tmp_path, "--timeout", "auto", "--timeout", "9")
    assert s.focus.timeout_auto and s.fetch.timeout_s == 9.0 and s.fetch.read_timeout_s == 9.0
    s = parse(tmp_path, "--concurrency", "12")
    assert not s.focus.concurrency_auto and s.politeness.concurrency == 12
    limit = concurrency_limit(s)
    assert isinstance(limit, FixedLimit) and limit.value == 12
    assert parse(tmp_path).focus == FocusSettings()


def test_memory_is_shared_out_between_processes() -> None:
    f = share_memory(FocusSettings(max_memory_bytes=1000), 3)
    assert f.max_memory_bytes == 333
    assert share_memory(FocusSettings(), 2).max_memory_bytes > 0


def test_warc_level_flag(tmp_path: Path) -> None:
    assert parse(tmp_path).warc_level == 2  # ISA-L (issue 16: a third of 6's CPU)
    s = parse(tmp_path, "--warc-level", "6")
    assert s.warc_level == 6
    assert settings_from_dict(settings_to_dict(s)).warc_level == 6  # kept in state.json
    for bad in ("0", "10", "x"):
        with pytest.raises(SystemExit):
            parse(tmp_path, "--warc-level", bad)
    with pytest.raises(ConfigError, match=r"warc_level must be a gzip level 1 \.\. 9"):
        CrawlSettings(out_dir=str(tmp_path), warc_level=10)


def test_warc_level_without_warc_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--warc-level has no effect with --no-warc"):
        parse(tmp_path, "--no-warc", "--warc-level", "3")
    assert not parse(tmp_path, "--no-warc").warc  # --no-warc alone is fine
    # on resume: a crawl started with --no-warc (the stored settings) refuses it too
    base = parse(tmp_path, "--no-warc")
    args = build_parser().parse_args(
        ["crawl", "--resume", "--out", str(tmp_path), "--warc-level", "3"]
    )
    with pytest.raises(ConfigError, match=r"^--warc-level has no effect"):
        settings_from_args(args, base)
    assert (
        settings_from_args(
            build_parser().parse_args(["crawl", "--resume", "--out", str(tmp_path)]), base
        ).warc
        is False
    )
