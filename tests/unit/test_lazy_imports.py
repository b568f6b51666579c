"""A plain ``skitter crawl`` (no --frontier redis, no --status-port) must not import the
optional-mode modules: Redis, the aiohttp status server, the other commands' modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

OPTIONAL = (
    "redis",
    "aiohttp.web",
    "skitter.status.server",
    "skitter.distributed",
    "skitter.frontier.redis",
    "skitter.cli.check_links",
    "skitter.cli.control",
    "skitter.cli.worker",
    "skitter.cli.status",
    "tldextract",  # the Public Suffix List: for --scope domain only
    "requests",
)

SCRIPT = """
import json, sys
from skitter.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _crawl_modules(tmp_path: Path, *flags: str) -> tuple[int, set[str]]:
    # seed on a closed loopback port: the whole crawl path runs (components, crawler, end
    # files) and ends with exit code 4 (no seed answered)
    argv = ["crawl", "http://127.0.0.1:9/", "--out", str(tmp_path / "out"), "--quiet",
            "--max-pages", "1", "--retries", "0", *flags]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *argv], capture_output=True, text=True, timeout=120
    )
    last = done.stdout.strip().splitlines()[-1]
    result = json.loads(last)
    return int(result["code"]), set(result["modules"])


def _optional_loaded(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == o or m.startswith(o + ".") for o in OPTIONAL))


def test_plain_crawl_one_process_imports_no_optional_module(tmp_path: Path) -> None:
    code, modules = _crawl_modules(tmp_path, "--processes", "1")
    assert code == 4  # the crawl really ran to its end
    assert "skitter.crawler" in modules and "skitter.cli.crawl" in modules
    assert _optional_loaded(modules) == []


def test_plain_crawl_many_processes_imports_no_optional_module(tmp_path: Path) -> None:
    code, modules = _crawl_modules(tmp_path, "--processes", "2")
    assert code == 4
    assert "skitter.processes" in modules
    assert _optional_loaded(modules) == []


def test_crawl_help_builds_only_the_crawl_parser() -> None:
    script = (
        "import sys\nfrom skitter.cli import main\n"
        "try:\n    main(['crawl', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('skitter.cli.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert "--max-pages" in done.stdout
    listed = done.stdout.strip().splitlines()[-1]
    assert "skitter.cli.check_links" not in listed and "skitter.cli.crawl" in listed


def test_top_level_help_still_lists_every_command() -> None:
    from skitter.cli import COMMANDS, build_parser

    text = build_parser().format_help()
    for name in COMMANDS:
        assert name in text


def test_crawl_command_module_does_not_import_the_crawler() -> None:
    """Importing the crawl command (or the coordinator of --processes) does not import the
    crawler, its HTTP client or its event loop: they are imported where used (a one-process
    crawl, each crawler process after the fork)."""
    script = (
        "import json, sys\nimport skitter.cli.crawl, skitter.processes, skitter.merge\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "skitter.processes" in modules
    assert not {"skitter.crawler", "aiohttp", "asyncio", "skitter.checklinks", "rich"} & modules


MERGE_SCRIPT = """
import json, os, sys
from skitter.shard_merge import Merger
step = Merger.step
def dump(self):
    if not os.environ.get("DUMPED"):  # the first merge: the crawler processes are running
        os.environ["DUMPED"] = "1"
        with open(sys.argv[1], "w") as f:
            json.dump(sorted(sys.modules), f)
    return step(self)
Merger.step = dump
from skitter.cli import main
sys.exit(main(sys.argv[2:]))
"""

#: What only a crawler process needs: the HTTP client, the parser, the WARC writer, the
#: frontier's SQLite, the metrics, the event loop.
CRAWLER_ONLY = {
    "skitter.crawler", "skitter.worker", "skitter.shard_peers", "skitter.fetch", "aiohttp",
    "asyncio", "selectolax", "resiliparse", "fastwarc", "isal", "sqlite3", "rbloom",
    "prometheus_client", "skitter.status.metrics", "skitter.duplicates", "skitter.export.warc",
}  # fmt: skip


def test_coordinator_imports_no_crawler_module(tmp_path: Path) -> None:
    """The coordinator of --processes runs the crawl without the crawler's modules (each crawler
    process imports them after the fork): every page a process maps counts in its resident
    set, and the tree's summed RSS is what --processes costs the machine."""
    at_merge = tmp_path / "modules.json"
    argv = ["crawl", "http://127.0.0.1:9/", "--out", str(tmp_path / "out"), "--quiet",
            "--max-pages", "1", "--retries", "0", "--processes", "2"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", MERGE_SCRIPT, str(at_merge), *argv],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr  # the crawl ran: no seed answered
    modules = set(json.loads(at_merge.read_text()))
    assert "skitter.processes" in modules and "skitter.shard_merge" in modules
    loaded = {m for m in modules if m.split(".")[0] in CRAWLER_ONLY or m in CRAWLER_ONLY}
    loaded |= {m for m in modules if any(m.startswith(c + ".") for c in CRAWLER_ONLY)}
    assert loaded == set()
    assert _optional_loaded(modules) == []
    # issue 16: nor OpenSSL (hashlib: ~4 MiB resident) nor importlib.abc (~3 MiB: it loads
    # importlib.resources, zipfile, lzma...): skitter._native and skitter.urls take CPython's
    # own SHA-256 and BLAKE2b
    assert {"_hashlib", "hashlib", "importlib.abc"} & modules == set()
