"""Seeing a crawl while it runs: Prometheus metrics (:mod:`skitter.status.metrics`), the live
status web server (:mod:`skitter.status.server`) and its data-source protocol
(:mod:`skitter.status.source`)."""
