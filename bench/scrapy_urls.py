"""../shared/bench/scrapy_bench.py, unchanged, plus the list of the pages it got.

    PY bench/scrapy_urls.py [scrapy_bench.py args...]      (PY: a Python that has Scrapy)

scrapy_bench.py writes only counts to $BENCH_OUT ("pages", "requests", "status_404",
"robots_forbidden", "finish_reason"): enough to compare with the site's manifest, not to say
which URLs were fetched. This wrapper imports it (from $SHARED_BENCH, default the
../shared/bench beside the repository), wraps its spider's parse_page (called once per 2xx HTML
response, the pages it counts) to also remember response.url, runs its main() with the same
arguments (same settings: robots obeyed, no delay, same concurrency), then writes the URLs, one
a line, to $BENCH_URLS when set. The extra cost is one list append per page.

$BENCH_HOSTS_FILE (optional, lines "ADDRESS HOST" like a synthweb's hosts.txt) is put in
Scrapy's DNS cache (scrapy.resolver.dnscache, read by its default resolver before any lookup),
so the site's hosts resolve without /etc/hosts (bench/run_redis_bench.sh uses it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

SHARED = Path(
    os.environ.get("SHARED_BENCH") or Path(__file__).resolve().parents[2] / "shared" / "bench"
)


def main() -> None:
    sys.path.insert(0, str(SHARED))
    import scrapy_bench  # type: ignore[import-not-found]

    if os.environ.get("BENCH_HOSTS_FILE"):
        from scrapy.resolver import dnscache

        for line in Path(os.environ["BENCH_HOSTS_FILE"]).read_text().splitlines():
            if line.split():
                addr, host = line.split()[:2]
                dnscache[host] = addr

    urls: list[str] = []
    parse_page = scrapy_bench.SynthSpider.parse_page

    def recording_parse_page(self: Any, response: Any) -> Any:
        urls.append(response.url)
        return parse_page(self, response)

    scrapy_bench.SynthSpider.parse_page = recording_parse_page
    sys.argv[0] = str(SHARED / "scrapy_bench.py")
    scrapy_bench.main()
    if os.environ.get("BENCH_URLS"):
        with open(os.environ["BENCH_URLS"], "w") as f:
            f.writelines(u + "\n" for u in urls)


if __name__ == "__main__":
    main()
