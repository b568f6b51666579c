"""metrics.prom and report.html at the end of a --processes crawl killed (-9) and resumed:
their counts are those of the merged pages.jsonl (read at the end, not carried over)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from skitter.report import TABLE_CAP, read_output, render
from skitter.status.metrics import status_class
from tests.e2e.test_cli import arun_cli
from tests.e2e.test_kill_resume import build_site, records
from tests.e2e.test_links_zstd import args
from tests.integration.site import Site


async def wait_shard_records(out: Path, n: int, proc: asyncio.subprocess.Process) -> None:
    """Until the crawler processes' journals hold ``n`` records (or the crawl ends)."""
    for _ in range(6000):  # bounded: 60 s
        got = sum(
            p.read_bytes().count(b"\n") for p in out.glob("shards/*/pages.jsonl") if p.exists()
        )
        if got >= n or proc.returncode is not None:
            return
        await asyncio.sleep(0.01)


def metric_samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(path.read_text()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.mark.slow
async def test_end_files_count_the_merged_records_after_kill_and_resume(
    site: Site, tmp_path: Path
) -> None:
    build_site(site)
    out = tmp_path / "out"
    proc = await asyncio.create_subprocess_exec(
        # (--delay: the kill comes well before the end; one host: one process crawls it)
        sys.executable, "-m", "skitter", *args(site, out, "--processes", "2", "--delay", "0.01"),
        stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    await wait_shard_records(out, 60, proc)
    assert proc.returncode is None, "the crawl ended before its kill"
    proc.send_signal(signal.SIGKILL)  # the crawler processes die with it (PDEATHSIG)
    await proc.wait()
    code, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--quiet", timeout=120)
    assert code == 0, err
    recs = records(out)
    assert len(recs) > 60 and len({r["url"] for r in recs}) == len(recs)
    m = metric_samples(out / "metrics.prom")
    fetches = Counter(status_class(r["status"]) for r in recs if isinstance(r["status"], int))
    assert fetches["4xx"] > 0 and fetches["2xx"] > 0  # the site's missing pages, its pages
    assert {
        k[1][0][1]: int(v) for k, v in m.items() if k[0] == "skitter_fetches_total"
    } == dict(fetches)
    errors = Counter(str(r["error"]) for r in recs if r["error"])
    assert {
        k[1][0][1]: int(v) for k, v in m.items() if k[0] == "skitter_fetch_errors_total"
    } == dict(errors)
    assert m[("skitter_bytes_total", ())] == sum(int(r["bytes"] or 0) for r in recs)  # type: ignore[call-overload]
    assert m[("skitter_fetch_duration_seconds_count", ())] == len(recs)
    assert m[("skitter_retries_total", ())] == sum(int(r["attempts"]) - 1 for r in recs)  # type: ignore[call-overload]
    # report.html: rendered from the same files as a fresh `skitter report` would
    data = read_output(out, TABLE_CAP)
    assert data.records == len(recs)
    assert data.by_status == Counter(str(r["status"]) for r in recs)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html == render(data, title=out.resolve().name)
    # killed after the end, before its end files: a resume writes them (and crawls nothing)
    (out / "metrics.prom").unlink()
    (out / "report.html").unlink()
    pages = (out / "pages.jsonl").read_bytes()
    code, _, err = await arun_cli("crawl", "--resume", "--out", str(out), "--quiet", timeout=120)
    assert code == 0 and "nothing to resume" in err
    assert (out / "pages.jsonl").read_bytes() == pages
    assert metric_samples(out / "metrics.prom") == m
    assert (out / "report.html").read_text(encoding="utf-8") == html
