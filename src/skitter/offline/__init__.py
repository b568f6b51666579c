"""Offline work on web archives: link extraction from WARC files, CDXJ indexes, link graphs.

Modules: :mod:`~skitter.offline.reader` (WARC records, read past damage),
:mod:`~skitter.offline.payload` (the page inside a record), :mod:`~skitter.offline.extract`
(``skitter extract``), :mod:`~skitter.offline.cdxj` (``skitter index``),
:mod:`~skitter.offline.graph` (``skitter graph``).
"""
