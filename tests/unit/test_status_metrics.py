"""CrawlMetrics: names, labels, counts, per-crawl registry, textfile output."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import REGISTRY
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from skitter import __version__
from skitter.status.metrics import CrawlMetrics, status_class


def samples(m: CrawlMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(m.text()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_status_class() -> None:
    assert [status_class(s) for s in (100, 200, 299, 301, 404, 503, 999, 42)] == [
        "1xx", "2xx", "2xx", "3xx", "4xx", "5xx", "other", "other",
    ]  # fmt: skip


def test_records_counted_by_class_kind_bytes_retries_duration() -> None:
    m = CrawlMetrics()
    m.observe_record(200, None, 1000, 0.02, 1)
    m.observe_record(200, None, 500, 0.3, 3)
    m.observe_record(404, None, 0, 0.01, 1)
    m.observe_record(None, "timeout", 0, 30.0, 2)
    m.observe_links({"queued": 5, "seen": 2, "scope": 0})
    m.observe_robots("allowed", 3)
    m.observe_robots("disallowed")
    m.set_frontier(queued=7, leased=2, active_hosts=3, in_backoff=1)
    s = samples(m)
    assert s[("skitter_fetches_total", (("status_class", "2xx"),))] == 2
    assert s[("skitter_fetches_total", (("status_class", "4xx"),))] == 1
    assert s[("skitter_fetch_errors_total", (("kind", "timeout"),))] == 1
    assert s[("skitter_bytes_total", ())] == 1500
    assert s[("skitter_retries_total", ())] == 3
    assert s[("skitter_link_decisions_total", (("decision", "queued"),))] == 5
    assert s[("skitter_link_decisions_total", (("decision", "seen"),))] == 2
    assert ("skitter_link_decisions_total", (("decision", "scope"),)) not in s
    assert s[("skitter_robots_decisions_total", (("decision", "allowed"),))] == 3
    assert s[("skitter_robots_decisions_total", (("decision", "disallowed"),))] == 1
    assert s[("skitter_queued_urls", ())] == 7
    assert s[("skitter_leased_requests", ())] == 2
    assert s[("skitter_active_hosts", ())] == 3
    assert s[("skitter_hosts_in_backoff", ())] == 1
    assert s[("skitter_fetch_duration_seconds_count", ())] == 4
    assert s[("skitter_fetch_duration_seconds_sum", ())] == 30.33
    assert s[("skitter_fetch_duration_seconds_bucket", (("le", "0.025"),))] == 2
    assert s[("skitter_fetch_duration_seconds_bucket", (("le", "0.5"),))] == 3
    assert s[("skitter_fetch_duration_seconds_bucket", (("le", "+Inf"),))] == 4
    assert s[("skitter_info", (("version", __version__),))] == 1


def test_registry_is_per_crawl_and_no_host_labels() -> None:
    a, b = CrawlMetrics(), CrawlMetrics()
    a.observe_record(200, None, 10, 0.1, 1)
    assert ("skitter_fetches_total", (("status_class", "2xx"),)) not in samples(b)
    assert REGISTRY.get_sample_value("skitter_fetches_total", {"status_class": "2xx"}) is None
    labels = {k for fam in text_string_to_metric_families(a.text()) for s in fam.samples
              for k in s.labels}  # fmt: skip
    assert labels <= {"status_class", "kind", "decision", "le", "version"}


def test_write_textfile_atomic_and_from_output(tmp_path: Path) -> None:
    rows = [
        {"status": 200, "bytes": 10, "elapsed_s": 0.1, "attempts": 1, "error": None},
        {"status": 500, "bytes": 3, "elapsed_s": 0.2, "attempts": 3, "error": None},
        {"status": None, "bytes": 0, "elapsed_s": 1.0, "attempts": 1, "error": "dns"},
    ]
    pages = "".join(json.dumps(r) + "\n" for r in rows) + '{"status": 2'  # crash-cut last line
    (tmp_path / "pages.jsonl").write_text(pages)
    (tmp_path / "report.json").write_text(
        json.dumps({"totals": {"by_decision": {"queued": 4}, "robots_disallowed": 2}})
    )
    m = CrawlMetrics.from_output(tmp_path)
    m.write_textfile(tmp_path / "metrics.prom")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    text = (tmp_path / "metrics.prom").read_text()
    assert text == m.text()
    s = samples(m)
    assert s[("skitter_fetches_total", (("status_class", "2xx"),))] == 1
    assert s[("skitter_fetches_total", (("status_class", "5xx"),))] == 1
    assert s[("skitter_fetch_errors_total", (("kind", "dns"),))] == 1
    assert s[("skitter_retries_total", ())] == 2
    assert s[("skitter_bytes_total", ())] == 13
    assert s[("skitter_link_decisions_total", (("decision", "queued"),))] == 4
    assert s[("skitter_robots_decisions_total", (("decision", "disallowed"),))] == 2


def test_from_output_of_missing_folder_is_empty(tmp_path: Path) -> None:
    s = samples(CrawlMetrics.from_output(tmp_path / "nothing"))
    assert s[("skitter_bytes_total", ())] == 0
    assert not any(k[0] == "skitter_fetches_total" for k in s)


def test_counts_added_at_once_equal_records_observed_one_by_one(tmp_path: Path) -> None:
    """RecordCounts (plain-Python tallies, added at once) and observe_record per record give
    the same exposition, and the duration histogram the same text as prometheus-client's
    Histogram (bucket edges included: a value on a bound falls in that bucket)."""
    from prometheus_client import CollectorRegistry, Histogram

    from skitter.report.rows import iter_page_rows
    from skitter.status.metrics import DURATION_BUCKETS_S, RecordCounts

    records = [
        (200, None, 10, 0.005, 1), (301, None, 0, 0.01, 2), (404, None, 3, 0.1, 1),
        (None, "timeout", 0, 30.0, 3), (503, "http_5xx", 5, 60.0, 1), (200, None, 7, 61.5, 1),
        (999, None, 1, 0.0, 1), (200, None, 2, -1.0, 1),
    ]  # fmt: skip
    one = CrawlMetrics()
    for r in records:
        one.observe_record(*r)
    keys = ("status", "error", "bytes", "elapsed_s", "attempts")
    (tmp_path / "pages.jsonl").write_text(
        "".join(json.dumps(dict(zip(keys, r, strict=True))) + "\n" for r in records)
    )
    counts = RecordCounts()
    for row in iter_page_rows(tmp_path / "pages.jsonl"):
        counts.add_row(row)
    assert counts.fetches == {"2xx": 3, "3xx": 1, "4xx": 1, "5xx": 1, "other": 1}
    assert counts.durations[0] == 2 and counts.durations[-1] == 1  # 0.0 and 0.005; 61.5
    added = CrawlMetrics()
    added.add_counts(counts)
    assert added.text() == one.text()
    assert CrawlMetrics.from_output(tmp_path).text() == one.text()
    reg = CollectorRegistry()
    h = Histogram("skitter_fetch_duration_seconds", "Whole fetch time of a record",
                  buckets=DURATION_BUCKETS_S, registry=reg)  # fmt: skip
    for r in records:
        if r[3] >= 0:
            h.observe(r[3])
    want = [ln for ln in generate_latest(reg).decode().splitlines() if "_created" not in ln]
    got = [ln for ln in one.text().splitlines() if "skitter_fetch_duration_seconds" in ln]
    assert got == want
