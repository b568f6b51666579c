"""Command-line rules checked in-process: seeds, output flags, --resolve names, --config,
settings validation, help texts, summary and progress lines (issue 9)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from skitter.cli import build_parser, main
from skitter.cli.common import (
    EXIT_CODES,
    duration,
    exit_code,
    no_seed_answered,
    read_seeds,
    resolve,
    summary_lines,
)
from skitter.cli.config import apply_config
from skitter.errors import ConfigError
from skitter.seeds import seed_url
from skitter.settings import CrawlSettings, FetchSettings, PolitenessSettings, ScopeSettings

# ------------------------------------------------------------------ fault 3: seed spellings


@pytest.mark.parametrize(
    "seed",
    [
        "mailto:a@b.test",
        "MAILTO:a@b.test",
        "tel:+1-555-0100",
        "javascript:alert(1)",
        "data:text/html,x",
        "ftp://a.test/",
        "file:///etc/passwd",
        "urn:isbn:0451450523",
        "news:comp.lang.python",
        "",
        "   ",
    ],
)
def test_non_http_scheme_seed_is_refused(seed: str) -> None:
    with pytest.raises(ConfigError, match="not an http"):
        seed_url(seed)


@pytest.mark.parametrize(
    "seed, url",
    [
        ("a.test", "https://a.test/"),
        ("a.test/docs/x", "https://a.test/docs/x"),
        ("a.test:8080", "https://a.test:8080/"),
        ("a.test:8080/path?q=1", "https://a.test:8080/path?q=1"),
        ("localhost:3000", "https://localhost:3000/"),
        ("mail:25", "https://mail:25/"),  # digits after the colon: a port, not a scheme
        ("[::1]:8080/x", "https://[::1]:8080/x"),
        ("http://a.test:81/", "http://a.test:81/"),
        ("HTTPS://A.test/", "HTTPS://A.test/"),
        # odd but valid hosts, kept (the bare names below that are no host name are not)
        ("exa_mple.test", "https://exa_mple.test/"),
        ("xn--bcher-kva.test", "https://xn--bcher-kva.test/"),
        ("bücher.test/a b", "https://bücher.test/a b"),
        ("127.0.0.1:8093", "https://127.0.0.1:8093/"),
        ("[::1]", "https://[::1]/"),
    ],
)
def test_seed_spellings_keep_host_and_port(seed: str, url: str) -> None:
    assert seed_url(seed) == url


# --------------------------------------------------- fault 12: seeds-file line numbers, stdin


def test_seeds_file_bad_line_names_its_number(tmp_path: Path) -> None:
    f = tmp_path / "seeds.txt"
    f.write_text("# header\na.test\n\nmailto:x@a.test\nb.test\n")
    with pytest.raises(ConfigError, match=r"seeds\.txt line 4: not an http"):
        read_seeds(argparse.Namespace(seeds_file=str(f)))


@pytest.mark.parametrize(
    "seed", ["-", "*", "*.example.org", "a..b", "*.a.test:8080", "-:80", "a.test\tb", "//-/"]
)
def test_bare_names_that_are_no_host_name_are_refused(seed: str) -> None:
    # the WHATWG parser takes https://*.example.org/ and https://-/: a bare seed must be a name
    with pytest.raises(ConfigError, match="not an http"):
        seed_url(seed)


def test_seeds_file_comment_after_a_seed_is_not_part_of_it(tmp_path: Path) -> None:
    # "URL  # note" once became the seed http://a.test:8093/%20%20 (a 404 page), silently
    f = tmp_path / "seeds.txt"
    f.write_text("http://a.test:8093/  # home\nb.test\t# second\nhttp://c.test/x#frag\n")
    assert read_seeds(argparse.Namespace(seeds_file=str(f))) == [
        "http://a.test:8093/",
        "https://b.test/",
        "http://c.test/x#frag",
    ]


def test_seeds_file_dash_reads_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("a.test\n# c\nhttp://b.test/x\n\n"))
    assert read_seeds(argparse.Namespace(seeds_file="-")) == [
        "https://a.test/",
        "http://b.test/x",
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("ok.test\nnot a seed\n"))
    with pytest.raises(ConfigError, match=r"\(stdin\) line 2"):
        read_seeds(argparse.Namespace(seeds_file="-"))


# ------------------------------------------------------------- fault 5: one output-flag rule


def test_output_flag_rule(capsys: pytest.CaptureFixture[str]) -> None:
    p = build_parser()
    a = p.parse_args(["check-links", "x.test", "-o", "report.html"])
    assert a.output == "report.html" and "out" not in vars(a)  # a file, not a folder
    a = p.parse_args(["check-links", "x.test", "--out", "d"])
    assert a.out == "d" and "output" not in vars(a)
    with pytest.raises(SystemExit) as e:  # crawl writes a folder: -o is refused in one line
        p.parse_args(["crawl", "x.test", "-o", "d"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "use --out DIR" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "command",
    [
        ["crawl", "x.test"],
        ["crawl", "--resume"],
        ["fetch", "--urls", "list.txt"],
        ["extract", "a.warc.gz"],
        ["check-links", "x.test"],
        ["merge", "crawl-1"],
        ["worker", "redis://127.0.0.1:1/0"],
    ],
)
def test_an_empty_out_is_one_flag_error(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # --out "" (an unset variable) was "CrawlSettings.out_dir must be a folder path", and
    # `skitter merge X --out ""` merged into the current folder (Path("") is ".")
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([*command, "--out", ""])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"skitter {command[0]}: error: argument --out{'/-o' if command[0] == 'worker' else ''}: "
        "an output folder name is needed, got ''"
    ]


def test_a_crawl_killed_before_its_state_can_start_again(tmp_path: Path) -> None:
    # kill -9 between the folder's write probe and state.json left .write-test (or
    # state.json.tmp): resume said "state.json missing", the same command "not empty"
    from skitter.errors import StateError
    from skitter.state import prepare_new_out_dir

    out = tmp_path / "crawl"
    out.mkdir()
    (out / ".write-test").write_bytes(b"")
    (out / "state.json.tmp").write_text('{"format": 2, "sett')
    prepare_new_out_dir(out)  # accepted
    assert [f.name for f in out.iterdir()] == ["state.json.tmp"]  # the probe is removed
    (out / "notes.txt").write_text("mine")
    with pytest.raises(StateError, match="is not empty"):
        prepare_new_out_dir(out)


# ---------------------------------------------------------- fault 6: --resolve IDNA and case


@pytest.mark.parametrize(
    "text, host",
    [
        ("dócs.test:80:127.0.0.1", "xn--dcs-gna.test"),
        ("DÓCS.Test:80:127.0.0.1", "xn--dcs-gna.test"),
        ("Example.TEST:443:127.0.0.1", "example.test"),
        ("xn--dcs-gna.test:80:127.0.0.1", "xn--dcs-gna.test"),
        ("bücher.example:8080:[::1]", "xn--bcher-kva.example"),
    ],
)
def test_resolve_names_follow_url_host_rules(text: str, host: str) -> None:
    assert resolve(text)[0] == host
    from skitter.urls import hostname

    # the same name as in the URL the crawler will connect to
    assert hostname(f"http://{text.split(':', 1)[0]}/") == host


def test_library_resolve_names_follow_url_host_rules() -> None:
    f = FetchSettings(resolve={("DÓCS.test", 80): "127.0.0.1"})
    assert f.resolve == {("xn--dcs-gna.test", 80): "127.0.0.1"}


# ---------------------------------------------------------- fault 10: settings validation


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: CrawlSettings(out_dir="o", seeds="http://a.test/"), "not str"),  # type: ignore[arg-type]
        (lambda: CrawlSettings(out_dir="o", seeds=("mailto:a@b.test",)), "not an http"),
        (lambda: CrawlSettings(out_dir="o", seeds=("ftp://a.test/",)), "not an http"),
        (lambda: CrawlSettings(out_dir="o", max_pages=0), "max_pages"),
        (lambda: CrawlSettings(out_dir="o", processes=0), "processes"),
        (lambda: CrawlSettings(out_dir="o", max_time_s=0), "max_time_s"),
        (lambda: CrawlSettings(out_dir=""), "out_dir"),
        (lambda: PolitenessSettings(delay_s=-1), "delay_s"),
        (lambda: PolitenessSettings(delay_s=float("nan")), "delay_s"),
        (lambda: PolitenessSettings(concurrency=0), "concurrency"),
        (lambda: PolitenessSettings(retries=1.5), "retries"),  # type: ignore[arg-type]
        (lambda: FetchSettings(timeout_s=0), "timeout_s"),
        (lambda: FetchSettings(user_agent=" "), "user_agent"),
        (lambda: FetchSettings(headers=(("X-A", "b\r\nX-Evil: 1"),)), "bad header"),
        (lambda: FetchSettings(proxy="notaproxy"), "proxy"),
        (lambda: FetchSettings(resolve={("a.test", 80): "not-an-ip"}), "resolve"),
        (lambda: ScopeSettings(scope="site"), "scope"),
        (lambda: ScopeSettings(include="a"), "not str"),  # type: ignore[arg-type]
        (lambda: ScopeSettings(exclude=("(",)), "bad regular expression"),
        (lambda: ScopeSettings(max_depth=-1), "max_depth"),
    ],
)
def test_library_settings_are_validated_as_the_cli_does(build: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build()  # type: ignore[operator]


def test_library_settings_accept_lists_and_bare_names() -> None:
    s = CrawlSettings(out_dir="o", seeds=["a.test", "http://b.test:81/x"])  # type: ignore[arg-type]
    assert s.seeds == ("https://a.test/", "http://b.test:81/x")


# ---------------------------------------------------------------------------- --config TOML


def _crawl_parser() -> argparse.ArgumentParser:
    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices["crawl"]
    return parser


def test_config_file_keys_and_command_line_wins(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'seeds = ["a.test"]\nout = "crawl-1"\nmax-depth = 3\ndelay = 0.5\n'
        'header = ["X-A: b"]\nrandom_wait = true\nmax-time = "20m"\nscope = "domain"\n'
    )
    p = build_parser()
    args = p.parse_args(["crawl", "--delay", "2", "--config", str(cfg)])
    apply_config(args, _crawl_parser(), str(cfg))
    assert args.delay == 2.0  # the command line wins
    assert args.max_depth == 3 and args.out == "crawl-1" and args.seeds == ["a.test"]
    assert args.header == [("X-A", "b")] and args.random_wait is True
    assert args.max_time == 1200.0 and args.scope == "domain"


@pytest.mark.parametrize(
    "text, message",
    [
        ("delay = 1\n\nmax_dept = 3\n", "line 3: unknown key 'max_dept'"),
        ("delay = -1\n", "line 1: delay: must be a finite number"),
        ("scope = 'site'\n", "line 1: scope: invalid choice"),
        ("delay = 1\nrandom-wait = 'yes'\n", "line 2: random-wait: expected true or false"),
        ("resume = true\n", "unknown key 'resume'"),
        ("delay = \n", "line 1"),  # TOML syntax error names its line
    ],
)
def test_config_file_errors_name_key_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    rc = main(["crawl", "--out", str(tmp_path / "o"), "a.test", "--config", str(cfg)])
    err = capsys.readouterr().err
    assert rc == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1


def test_config_file_missing_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["crawl", "a.test", "--config", str(tmp_path / "none.toml")])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot read config file" in err and "No such file" in err


# ---------------------------------------------------------------- fault 11: help and exits


@pytest.mark.parametrize("command", ["crawl", "check-links"])
def test_help_has_examples_every_exit_code_and_flag_help(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "examples:" in text and f"skitter {command} " in text
    for code in ("130", "2", "1", "4", "0"):
        assert f" {code} " in text.split("exit codes", 1)[1]
    assert "no seed got any HTTP response" in text
    for flag, words in [
        ("--include", "follow only URLs matching"),
        ("--exclude", "never follow URLs matching"),
        ("--max-links-per-page", "first N links"),
        ("--max-seed-links", "seed pages"),
        ("--follow-nofollow", "rel=nofollow"),
        ("--header", "every request"),
        ("--proxy", "HTTP proxy"),
        ("--scope", "registered domains"),
        ("--config", "TOML"),
        ("--max-time", "20m"),
        ("--max-redirects", "redirect hops"),
        ("--random-wait", "0.5 to 1.5"),
        ("--log-file", "FILE"),
        ("--stats-interval", "default 60"),
    ]:
        assert flag in text and words in text, flag


def test_exit_code_precedence() -> None:
    assert exit_code(0, 4, 1) == 1
    assert exit_code(4, 0) == 4
    assert exit_code(4, 2, 1) == 2
    assert exit_code(2, 130) == 130
    assert exit_code() == 0
    assert "130" in EXIT_CODES


@pytest.mark.parametrize(
    "text, seconds",
    [("90", 90.0), ("30s", 30.0), ("20m", 1200.0), ("2h", 7200.0), ("1.5h", 5400.0)],
)
def test_max_time_durations(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["0", "-5", "5x", "m", "inf"])
def test_bad_max_time(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


# ---------------------------------------------- fault 7: summary from report.json totals


def test_summary_counts_are_report_totals() -> None:
    # a 2xx record cut off as body_too_large: report.json counts it in ok AND errors
    totals = {
        "records": 2,
        "ok": 1,
        "errors": 1,
        "by_status": {"200": 1, "404": 1},
        "by_error": {"body_too_large": 1},
        "robots_disallowed": 1,
        "elapsed_s": 2.0,
        "pages_per_s": 1.0,
    }
    (line,) = summary_lines(totals)
    assert line.startswith("2 pages: 1 ok (2xx), 0 redirects (3xx), 1 client error (4xx)")
    assert "1 error (body_too_large 1)" in line
    assert "; 1 more URL blocked by robots.txt" in line  # singular
    totals["robots_disallowed"] = 2
    assert "2 more URLs blocked" in summary_lines(totals)[0]
    one = {"records": 1, "ok": 1, "errors": 0, "by_status": {"301": 1}}
    assert summary_lines(one)[0].startswith("1 page: 1 ok (2xx), 1 redirect (3xx)")
    from skitter.cli.progress import stats_line

    assert stats_line(1, 0.5, 0, 1, 1) == (
        "skitter: stats: 1 page (0.5 pages/s), 0 queued, 1 in flight, 1 error"
    )


def test_no_seed_answered() -> None:
    assert no_seed_answered({"by_status": {}, "robots_disallowed": 0, "records": 2})
    assert not no_seed_answered({"by_status": {"503": 1}, "robots_disallowed": 0})
    # every URL refused by robots.txt: no page got an answer (exit 4, issue 9 fault 2)
    assert no_seed_answered({"by_status": {}, "robots_disallowed": 1})


# ------------------------------------------------------------ fault 12: progress lines


def test_progress_display_fits_80_columns_and_shows_queue() -> None:
    """The terminal display (skitter.status.terminal, also for --processes and check-links)
    never draws past an 80-column terminal and always shows queued and in flight."""
    from rich.console import Console

    from skitter.status.source import HostRow, Totals
    from skitter.status.terminal import render

    big = 123_456_789
    rows = [HostRow("h" * 70 + f"{i}.test", fetched=big, avg_s=1.5, errors=i) for i in range(6)]
    for t in (
        Totals(fetched=big, ok=big, errors=big, queued=big, in_flight=512, hosts=big),
        Totals(fetched=9, queued=4, in_flight=2, target=20),  # a link check: the end is known
    ):
        c = Console(width=80, record=True, color_system=None, force_terminal=False)
        c.print(render(t, 12345.6, rows))
        out = c.export_text()
        assert all(len(line) <= 80 for line in out.splitlines()), out
        flat = " ".join(out.split())
        assert f"{t.queued:,} queued" in flat and f"{t.in_flight:,} in flight" in flat, out


# ------------------------------------------------------------------ --random-wait


def test_random_wait_jitters_the_delay_never_the_crawl_delay() -> None:
    import random

    from skitter.politeness import RANDOM_WAIT_RANGE, next_allowed_at, random_wait_factor

    assert random_wait_factor(False) == 1.0
    random.seed(9)
    factors = [random_wait_factor(True) for _ in range(2000)]
    assert RANDOM_WAIT_RANGE == (0.5, 1.5)
    assert all(0.5 <= f <= 1.5 for f in factors)
    assert min(factors) < 0.6 and max(factors) > 1.4  # the whole range is used
    assert next_allowed_at(10.0, 2.0, None, 30.0, jitter=0.5) == 11.0
    assert next_allowed_at(10.0, 2.0, None, 30.0, jitter=1.5) == 13.0
    # a robots.txt Crawl-delay is a floor the jitter never goes under
    assert next_allowed_at(10.0, 2.0, 5.0, 30.0, jitter=0.5) == 15.0


def test_random_wait_and_max_redirects_flags_reach_settings(tmp_path: Path) -> None:
    from skitter.cli.common import settings_from_args

    args = build_parser().parse_args(
        ["crawl", "a.test", "--out", str(tmp_path / "o"), "--random-wait",
         "--max-redirects", "3", "--max-time", "2h"]
    )  # fmt: skip
    s = settings_from_args(args)
    assert s.politeness.random_wait is True and s.fetch.max_redirects == 3
    assert s.max_time_s == 7200.0


# --------------------------------------------------------- fault 1: a log file that fills up


def test_log_file_write_failure_is_one_warning(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from skitter.logs import log_request, setup_logging

    if not Path("/dev/full").exists():
        pytest.fail("/dev/full is needed (it fails every write with ENOSPC)")
    setup_logging(False, "/dev/full")
    try:
        log_request("GET", "http://a.test/", 200, 10, 0.01, 1)
        log_request("GET", "http://a.test/b", 200, 10, 0.01, 1)
        logging.getLogger("skitter").warning("still here")
    finally:
        setup_logging(False, None)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Logging error" not in err
    warn = [x for x in err.splitlines() if "cannot write log file" in x]
    assert warn == [
        "skitter: warning: cannot write log file /dev/full: No space left on device; "
        "no more log lines go there"
    ]
    assert "WARNING p0 still here" in err  # stderr logging goes on
