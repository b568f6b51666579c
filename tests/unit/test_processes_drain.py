"""The coordinator's reading of a crawler process's pipe (skitter.processes._drain)."""

from __future__ import annotations

import multiprocessing

from skitter.processes import _drain, _Worker


def test_drain_reads_every_message_then_marks_a_closed_pipe() -> None:
    """Messages before the hang-up are read; the hang-up marks the worker, so the coordinator
    waits on its sentinel alone (a closed pipe is always 'ready': waiting on it would spin)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=True)
    w = _Worker(0, ctx.Process(target=print), parent)
    child.send(("status", 1, True, [0, 0], [0, 0], {"records": 3}))
    child.send(("done", {"stop_reason": "done", "finished": True}))
    _drain(w)
    assert w.status is not None and w.status.counters == {"records": 3}
    assert w.result == {"stop_reason": "done", "finished": True} and not w.hung_up
    child.close()
    _drain(w)
    assert w.hung_up
    parent.close()
