"""`GuardedSink`: the trace sink as a run sees it, which can never fail the run.

Tracing must never change a run's outcome. A run reports to its sink through a guard: the
first exception the sink raises (a full disk, a broken exporter) is logged once, with its
traceback, on the `helikon.trace` logger at ERROR level, and kept as `failure`; from then on
the guard drops every call, so the run goes on untraced and its trace simply ends there.
Runs nested in a run (handoff targets, agents as tools) share its guard, so a failing sink is
reported once per run, nested runs included.

`Sinks` gives a run several sinks (a trace file and `helikon run`'s console), each behind its
own guard.
"""

from __future__ import annotations

import logging
from typing import Any

from helikon.trace.writing import TracedRun, TraceSink, TransitionRecord

_log = logging.getLogger("helikon.trace")


class GuardedSink:
    """Forwards a run's trace to `sink` until the sink first raises; never raises itself.

    Args:
        sink: the sink to forward to.
        owned: `close()` closes the sink too (a `TraceWriter` opened for a path).
    """

    __slots__ = ("failure", "owned", "sink")

    def __init__(self, sink: TraceSink, *, owned: bool = False) -> None:
        self.sink = sink
        self.owned = owned
        self.failure: Exception | None = None

    def started(self, run: TracedRun) -> None:
        self._forward("started", run)

    def transition(self, run: TracedRun, record: TransitionRecord) -> None:
        self._forward("transition", run, record)

    def effect(self, run: TracedRun, event: Any) -> None:
        self._forward("effect", run, event)

    def close(self) -> None:
        """Close the sink if the guard owns it; a failure is logged (unless one was already)."""
        close = getattr(self.sink, "close", None) if self.owned else None
        if close is None:
            return
        try:
            close()
        except Exception as exc:
            if self.failure is None:
                self._report(exc, "close", None)

    def _forward(self, name: str, run: TracedRun, *args: Any) -> None:
        if self.failure is not None:
            return
        try:
            getattr(self.sink, name)(run, *args)
        except Exception as exc:
            self._report(exc, name, run)

    def _report(self, exc: Exception, name: str, run: TracedRun | None) -> None:
        self.failure = exc
        where = f"run {run.run_id}" if run is not None else "the run's end"
        _log.error(
            "trace sink %r raised in %s() at %s; the run goes on, no longer traced",
            self.sink,
            name,
            where,
            exc_info=exc,
        )


class Sinks:
    """Several sinks as one (a trace file and a console, say): each is called in turn,
    behind its own guard, so one that fails does not silence the others.

    Args:
        sinks: the sinks, called in this order.
    """

    __slots__ = ("guards",)

    def __init__(self, *sinks: TraceSink) -> None:
        self.guards = tuple(GuardedSink(sink) for sink in sinks)

    def started(self, run: TracedRun) -> None:
        for guard in self.guards:
            guard.started(run)

    def transition(self, run: TracedRun, record: TransitionRecord) -> None:
        for guard in self.guards:
            guard.transition(run, record)

    def effect(self, run: TracedRun, event: Any) -> None:
        for guard in self.guards:
            guard.effect(run, event)


def guarded(sink: TraceSink | None) -> GuardedSink | None:
    """`sink` behind a guard (the same guard when it already is one; None stays None)."""
    if sink is None or isinstance(sink, GuardedSink):
        return sink
    return GuardedSink(sink)
