"""Writing traces: the sink a run reports to, and `TraceWriter`, which writes JSON lines.

A run calls its sink at three moments: when it starts (`started`), after each transition
(`transition`, with the `TransitionRecord`) and for each event an effect produced (`effect`).
The sink sees the run through `TracedRun`, the few things a trace line names, so this layer
sits below the driver that implements it. A transition's record carries its times as the run
read them (floats); the writer writes them as text (`helikon.trace.times.iso`), and stamps
the lines it writes on its own (the header, a nested run's opening, an effect's event) with
the clock's time as it writes them: the moment the run reported them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from helikon._version import __version__
from helikon.core.codec import dumps
from helikon.core.context import TransitionCtx
from helikon.core.state import TransitionOutcome
from helikon.core.tool_spec import ListedTool
from helikon.core.transition import Match, match_row
from helikon.trace.lines import (
    EffectTrace,
    RowTrace,
    RunTrace,
    TraceHeader,
    TraceLine,
    TransitionTrace,
)
from helikon.trace.times import CallTimes, StepTime, clock, emitted, iso


@dataclass(frozen=True, slots=True)
class TransitionRecord:
    """One step of a run as it happened: what traces and the debugger record."""

    seq: int
    state_before: Any
    input: Any
    outcome: TransitionOutcome
    match: Match | None = None  # the row taken, when the run computed it already
    at: float | None = None  # when it was applied: seconds since the epoch (UTC)
    took: float | None = None  # seconds the effect whose result it applied ran
    calls: CallTimes = ()  # each tool call's seconds, when its input is a batch's results
    resumed: bool = False  # the first step of a resumption (a stored run, a snapshot)


class TracedRun(Protocol):
    """What a trace reads of a run (`helikon.run.driver.Run` is one)."""

    @property
    def run_id(self) -> str: ...
    @property
    def agent_name(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def ctx(self) -> TransitionCtx: ...
    @property
    def listed_tools(self) -> tuple[ListedTool, ...]: ...


class TraceSink(Protocol):
    """Receives a run's trace as it happens (`Run(trace=...)`).

    A sink may raise: the run logs the first failure and stops calling it (`GuardedSink`).
    """

    def started(self, run: TracedRun) -> None: ...
    def transition(self, run: TracedRun, record: TransitionRecord) -> None: ...
    def effect(self, run: TracedRun, event: Any) -> None: ...


def header_of(run: TracedRun, source: str | None = None) -> TraceHeader:
    """The header of `run`'s trace, with its chart recorded; `source` names where its agent
    is defined (a chart file or module), for the people who read the trace."""
    table = run.ctx.table
    return TraceHeader(
        run.agent_name,
        run.run_id,
        table.name,
        table.digest,
        __version__,
        table.data(),
        source=source,
        tools=run.listed_tools,
        at=iso(clock().wall()),
    )


class RunLines:
    """Which runs a trace has opened, and which charts it has recorded: a run seen for the
    first time gets a `RunTrace` line, with its chart unless the trace already holds it."""

    def __init__(self) -> None:
        self.runs: set[str] = set()
        self.charts: set[str] = set()

    def opened(self, header: TraceHeader) -> None:
        self.runs.add(header.run_id)
        self.charts.add(header.chart_digest)

    def announce(self, run: TracedRun) -> RunTrace | None:
        """The `RunTrace` line to write before `run`'s first line, or None if it has one."""
        if run.run_id in self.runs:
            return None
        self.runs.add(run.run_id)
        table = run.ctx.table
        recorded = None if table.digest in self.charts else table.data()
        self.charts.add(table.digest)
        return RunTrace(
            run.run_id,
            run.agent_name,
            table.name,
            table.digest,
            recorded,
            run.listed_tools,
            iso(clock().wall()),
        )


def transition_trace(run: TracedRun, record: TransitionRecord) -> TransitionTrace:
    match = record.match or match_row(record.state_before, record.input, run.ctx)
    row = match.row
    outcome = record.outcome
    return TransitionTrace(
        run.run_id,
        record.seq,
        record.state_before,
        record.input,
        RowTrace(row.index, row.source, row.input_kind, row.target, row.action, match.checked),
        outcome.next_state,
        outcome.events,
        outcome.next_action,
        outcome.conversation_appends,
        None if record.at is None else StepTime.of(*_times(record)),
    )


def _times(record: TransitionRecord) -> tuple[float, float | None, CallTimes, bool]:
    assert record.at is not None
    return record.at, record.took, record.calls, record.resumed


class TraceWriter:
    """Writes a trace as JSON lines to a path or an open text file; one line per record."""

    def __init__(self, target: str | Path | IO[str], *, source: str | None = None) -> None:
        if isinstance(target, (str, Path)):
            self._file: IO[str] = open(target, "w", encoding="utf-8")  # noqa: SIM115
            self._owned = True
        else:
            self._file, self._owned = target, False
        self._wrote_header = False
        self._last_seq: dict[str, int] = {}
        self._runs = RunLines()
        self.source = source

    def write(self, line: TraceHeader | RunTrace | TransitionTrace | EffectTrace) -> None:
        """Write one line (the debugger writes recorded histories with this)."""
        if isinstance(line, TraceHeader):
            self._wrote_header = True
            self._runs.opened(line)
        self._write(line)

    def _write(self, line: Any) -> None:
        self._file.write(dumps(line, TraceLine) + "\n")
        self._file.flush()

    def started(self, run: TracedRun) -> None:
        if not self._wrote_header:
            self.write(header_of(run, self.source))
        else:
            self._announce(run)

    def transition(self, run: TracedRun, record: TransitionRecord) -> None:
        self._announce(run)
        self._last_seq[run.run_id] = record.seq
        self._write(transition_trace(run, record))

    def effect(self, run: TracedRun, event: Any) -> None:
        self._announce(run)
        after = self._last_seq.get(run.run_id, run.seq)
        self._write(EffectTrace(run.run_id, after, event, iso(emitted(event))))

    def _announce(self, run: TracedRun) -> None:
        if not self._wrote_header:  # a resumed run is not `started`: its header comes first
            self.write(header_of(run, self.source))
            return
        line = self._runs.announce(run)
        if line is not None:
            self._write(line)

    def close(self) -> None:
        if self._owned:
            self._file.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
