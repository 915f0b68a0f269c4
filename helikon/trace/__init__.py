"""Traces: every transition of a run, recorded as JSON lines, and read back.

`lines` holds the values a trace file is made of, `writing` the sink a run reports to and
`TraceWriter`, `guarded` the guard a run keeps its sink behind (and `Sinks`, several as one),
`reading` `read_trace`, `times` the clock runs read and how their times are written.
Everything is re-exported here.
"""

from __future__ import annotations

from helikon.trace.guarded import GuardedSink, Sinks
from helikon.trace.lines import (
    TRACE_VERSION,
    EffectTrace,
    RowTrace,
    RunTrace,
    TraceError,
    TraceHeader,
    TraceLine,
    TransitionTrace,
)
from helikon.trace.reading import Line, Trace, read_trace
from helikon.trace.times import Clock, StepTime, SystemClock, TickingClock, clock, using_clock
from helikon.trace.writing import (
    RunLines,
    TracedRun,
    TraceSink,
    TraceWriter,
    TransitionRecord,
    header_of,
    transition_trace,
)

__all__ = [
    "TRACE_VERSION",
    "Clock",
    "EffectTrace",
    "GuardedSink",
    "Line",
    "RowTrace",
    "RunLines",
    "RunTrace",
    "Sinks",
    "StepTime",
    "SystemClock",
    "TickingClock",
    "Trace",
    "TraceError",
    "TraceHeader",
    "TraceLine",
    "TraceSink",
    "TraceWriter",
    "TracedRun",
    "TransitionRecord",
    "TransitionTrace",
    "clock",
    "header_of",
    "read_trace",
    "transition_trace",
    "using_clock",
]
