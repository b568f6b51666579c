"""Offline work on web archives: link extraction from WARC files, CDXJ indexes, link graphs,
and the crawl modes built on them.

Modules: :mod:`~skitter.offline.reader` (WARC records, read past damage),
:mod:`~skitter.offline.payload` (the page inside a record), :mod:`~skitter.offline.extract`
(``skitter extract``; per page :mod:`~skitter.offline.page_rows`, revisits
:mod:`~skitter.offline.revisits`), :mod:`~skitter.offline.cdxj` (``skitter index`` and the
crawl's CDXJ files), :mod:`~skitter.offline.graph` (``skitter graph``),
:mod:`~skitter.offline.urllist` (URL lists of ``skitter fetch``), :mod:`~skitter.offline.levels`
(``skitter crawl --levels``).
"""
