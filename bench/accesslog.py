"""What one crawler asked the benchmark's nginx for: its page set and its robots.txt requests.

The benchmarks (bench/run_bench.sh, bench/run_site.sh) make nginx log every request as
``$msec $request_time $host $status "$request" "$sent_http_content_type" $body_bytes_sent``
(see LOG_FORMAT) and cut the log into one slice
per measured run, so every crawler — Skitter, Scrapy, Crawlee, spider-rs, wget — is checked the
same way, from the server's side, whatever it reports itself.
"""

from __future__ import annotations

import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

# nginx `log_format` (http context) and the `access_log` line that uses it.
LOG_FORMAT = (
    'log_format bench \'$msec $request_time $host $status "$request" '
    '"$sent_http_content_type" $body_bytes_sent\';'
)


@dataclass
class Requests:
    """The requests of one run: ``by_url`` counts every GET per URL (robots.txt excluded),
    ``status`` the last status per URL, ``html`` the URLs last answered with a text/html body,
    ``robots_hosts`` the hosts whose /robots.txt was requested (with counts), ``by_status`` all
    requests per status, ``body_bytes`` the bytes of all response bodies sent."""

    by_url: Counter[str] = field(default_factory=Counter)
    status: dict[str, int] = field(default_factory=dict)
    html: set[str] = field(default_factory=set)
    body_bytes: int = 0
    robots_hosts: Counter[str] = field(default_factory=Counter)
    by_status: Counter[int] = field(default_factory=Counter)
    requests: int = 0

    @property
    def ok(self) -> set[str]:
        """URLs answered 200 (not robots.txt)."""
        return {u for u, s in self.status.items() if s == 200}

    @property
    def ok_html(self) -> set[str]:
        """URLs answered 200 with a text/html body: the pages."""
        return self.ok & self.html

    @property
    def hosts(self) -> set[str]:
        """Hosts of the pages requested (robots.txt aside)."""
        return {urlsplit(u).hostname or "" for u in self.by_url}

    @property
    def robots_requests(self) -> int:
        return sum(self.robots_hosts.values())


def parse(path: Path, port: int) -> Requests:
    """Read one slice of the access log. A request line with a path is taken to be for
    ``http://$host:port``; one with an absolute URI (a client using nginx as its proxy, like
    wget with http_proxy) is taken as written. Lines that do not parse are skipped."""
    r = Requests()
    with path.open(errors="replace") as fh:
        for line in fh:
            try:
                fields = shlex.split(line)
                host, status, request = fields[2:5]
                method, target, _proto = request.split(" ")
                code = int(status)
                ctype = fields[5] if len(fields) > 5 else ""
                size = int(fields[6]) if len(fields) > 6 else 0
            except ValueError:
                continue
            r.requests += 1
            r.body_bytes += size
            r.by_status[code] += 1
            if method != "GET":
                continue
            url = target if target.startswith("http") else f"http://{host}:{port}{target}"
            parts = urlsplit(url)
            if parts.path == "/robots.txt" and not parts.query:
                r.robots_hosts[parts.hostname or host] += 1
                continue
            r.by_url[url] += 1
            r.status[url] = code
            if ctype.startswith("text/html"):
                r.html.add(url)
            else:
                r.html.discard(url)
    return r
