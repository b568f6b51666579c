"""Dead-link checking (``skitter check-links``): crawl-side policy, verdicts, the report.

The check runs on the ordinary crawler with ``CrawlSettings.check_links`` on. The package:
:mod:`~skitter.checklinks.policy` (the crawl side), :mod:`~skitter.checklinks.verdicts`
(judging records, building the report), :mod:`~skitter.checklinks.formats` (rendering it) and
:mod:`~skitter.checklinks.anchors` (fragment targets). The crawl side (:class:`CheckPolicy`,
the crawler's lease policy in this mode):

* internal pages (in scope) are crawled as usual: GET, parsed, their links followed;
* every other http(s) link -- another host, ``rel=nofollow``, past ``--max-depth``, in scope
  but not matching ``--include``, and with ``check_resources`` every page resource -- is
  queued as a ``check_only`` request: HEAD first, then GET when HEAD answers >= 400 or fails
  other than at the DNS/connection level (GET bodies read to :data:`CHECK_BODY_BYTES` at
  most, never parsed, never stored); redirects are followed as ``check_only`` too;
* ``--exclude`` / ``--ignore`` matches and unsupported schemes are never fetched;
* a host that fails at the DNS, connection or TLS level fails all its links with that error
  (robots.txt is fetched first, once per host, and its failure is reused; without robots.txt
  the failure is remembered per host for ``robots_retry_s``);
* verdicts of external links from a previous check in the same folder are reused for
  ``--cache-age`` seconds (:func:`collect_cache`, :meth:`CheckPolicy.cached`).

The report side is pure functions over the crawl's outputs: pages.jsonl (one record per URL,
with redirect hops), links.tsv (where each link sits: source, anchor, fragment) and
anchors.jsonl (the fragment targets of each HTML page) -> :func:`build_report` ->
:func:`format_report` (text, json, csv, markdown, html, junit).

Verdicts (one vocabulary, :data:`VERDICTS`):

=========== ==============================================================================
ok          2xx (also after temporary redirects); a 2xx whose body was too large to read
broken      404, 410, other 4xx but those below, 5xx after retries; DNS failure, connection
            refused, TLS error, timeout after retries, protocol error, redirect loop or too
            many redirects, a 3xx without usable Location; ``page#name`` whose page has no
            such ``id`` / ``<a name>`` (error ``missing_fragment``); an unparseable http(s)
            URL (error ``invalid_url``)
unverified  401, 403, 407, 429 (after retries), 451, 999, 1xx, other statuses >= 600;
            robots.txt unreachable -- could not be checked, not proof the target is gone
redirected  ok, reached through a permanent redirect (301, 308) first: a warning naming the
            new target (the URL after the leading run of permanent hops)
excluded    not checked: robots.txt, scope / ``--exclude`` / ``--ignore``, unsupported
            scheme (mailto:, tel:, data:, javascript:, ftp:...), trap and length limits,
            private address
=========== ==============================================================================

``--accept STATUS,...`` makes those final statuses ok (and permanent hops with an accepted
status are not reported as redirected).
"""

from __future__ import annotations

from skitter.checklinks.anchors import ANCHORS_FILE, AnchorsWriter, read_anchors
from skitter.checklinks.formats import FORMATS, format_report
from skitter.checklinks.policy import (
    CACHE_FILE,
    CHECK_BODY_BYTES,
    CHECK_FILES,
    HOST_ERROR_KINDS,
    CheckPolicy,
    collect_cache,
    host_failure,
)
from skitter.checklinks.verdicts import (
    PERMANENT_REDIRECTS,
    UNVERIFIED_STATUSES,
    VERDICTS,
    Entry,
    Outcome,
    Report,
    Source,
    build_report,
    classify_final,
    fragment_ok,
    load_report,
    record_verdict,
    status_from_detail,
)

__all__ = [
    "ANCHORS_FILE",
    "CACHE_FILE",
    "CHECK_BODY_BYTES",
    "CHECK_FILES",
    "FORMATS",
    "HOST_ERROR_KINDS",
    "PERMANENT_REDIRECTS",
    "UNVERIFIED_STATUSES",
    "VERDICTS",
    "AnchorsWriter",
    "CheckPolicy",
    "Entry",
    "Outcome",
    "Report",
    "Source",
    "build_report",
    "classify_final",
    "collect_cache",
    "format_report",
    "fragment_ok",
    "host_failure",
    "load_report",
    "read_anchors",
    "record_verdict",
    "status_from_detail",
]
