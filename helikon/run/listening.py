"""The one port a run reports to: `RunListener`, what a run tells those who listen to it;
`Listeners`, the fan-out that tells them in one order and redacts at one exit; and
`Listened`, the part of `Run` that holds them.

Theory of operation: a run has five listeners, each optional. Two are in process and see
the run as it is: its stepper (a debugger holding nested runs, `helikon.run.stepping`) and
the listeners given with `Run.listen` (the debugger's recorder, `helikon.debug.recording`).
Three persist or export what they are told: the journal (the run store,
`helikon.run.journal`), the trace sink (`Run.trace`, behind its `GuardedSink`) and the spans
(`Run.observer`, OpenTelemetry's, `helikon.otel`). The driver tells the port, not them:

- `begin`: each step begins (the spans open the run's span, once);
- `started`: the run announced itself (`RunStarted`) and listed its tools (the
  in-process listeners, the trace: `RunListener.started`);
- `transition`: a transition was applied, as a `TransitionRecord` (the in-process
  listeners, the journal, the trace, the spans);
- `effect`: an effect produced an event, a delta included (the in-process listeners, the
  journal, the trace);
- `ended`: the run ended or suspended: it closed (the stepper, the in-process listeners,
  the spans; then the driver closes the journal); `closed`: its stream closed, ended or
  not (the spans);
- a run nested in this one (`Listened.listen_as`) takes its in-process listeners and its
  trace, nests its spans in this run's (`RunObserver.nested`), and opens its own journal.

Each report goes to the listeners it concerns in this order, the one order of the port:

1. the stepper, then the listeners given with `Run.listen` in the order given: raw values;
2. the journal: an effect's event is kept for its next commit; a transition's record is
   returned to the driver, which awaits its commit (`Journal.step`) once every listener was
   told, before the transition's effect starts (the durability contract of
   docs/semantics.md), and the journal's close after `ended`;
3. the trace sink;
4. the spans.

The value the journal, the trace and the spans get is redacted here, once, when the run's
`RunConfig.redact` is set (`redacted`, helikon.run.redaction), and never when no listener
persists; a redacting run's deltas go to the in-process listeners only (a secret split
across two deltas would pass the hook). This is the one redaction exit of what a run
reports, of what the journal writes besides (a call's result, approval decisions:
`exported`) and of the texts the spans export of the effects they wrap (`exported_text`);
`exported_line` applies the same rule to the lines a debugger saves as a trace. (One write
redacts what it writes itself: a session's items, which a run with a session and no store
writes too, `helikon.run.journaling`.)

A run without listeners has no `Listeners` (`Run.listeners` is None): it pays one `is None`
test at each point of its step, and nothing else. The spans also wrap effects (a model
call, a tool call, a handoff or an approval, each in its span): those are no reports, and
the driver asks `Run.observer` for them directly; what the spans export of them, they ask
the port for (`exported_text`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from helikon.core.events import DELTAS, stamp
from helikon.run.config import RunConfig
from helikon.run.journal import Journal
from helikon.run.observing import RunObserver
from helikon.run.redaction import Redact, redacted
from helikon.run.stepping import Stepper
from helikon.trace import (
    EffectTrace,
    GuardedSink,
    Line,
    TracedRun,
    TraceSink,
    TransitionRecord,
    TransitionTrace,
)
from helikon.trace.guarded import guarded

__all__ = ["Listened", "Listeners", "RunListener", "exported_line"]


class RunListener(Protocol):
    """What a run tells an in-process listener (`Run.listen`), with raw values. Runs
    nested in the run tell it too, each naming itself as `run`. A trace sink
    (`helikon.trace.TraceSink`) is told the first three, redacted."""

    def started(self, run: TracedRun) -> None:
        """The run announced itself (`RunStarted`), its tools listed."""
        ...

    def transition(self, run: TracedRun, record: TransitionRecord) -> None:
        """A transition was applied."""
        ...

    def effect(self, run: TracedRun, event: Any) -> None:
        """An effect produced `event` (deltas included)."""
        ...

    def ended(self, run: TracedRun) -> None:
        """The run ended or suspended."""
        ...


class Listeners:
    """A run's listeners, told in the port's one order (see the module docstring)."""

    __slots__ = ("_after", "journal", "local", "redact", "spans", "stepper", "trace")

    def __init__(
        self,
        local: tuple[RunListener, ...],
        stepper: Stepper | None,
        journal: Journal | None,
        trace: GuardedSink | None,
        spans: RunObserver | None,
        redact: Redact | None,
    ) -> None:
        self.local = local
        self.stepper = stepper
        self.journal = journal
        self.trace = trace
        self.spans = spans
        persists = journal is not None or trace is not None or spans is not None
        self.redact = redact if persists else None
        self._after: tuple[Any, Any] = (None, None)  # the last state after, raw and redacted

    def holds(self, run_id: str) -> bool:
        """Whether the stepper holds run `run_id` before its next transition."""
        return self.stepper is not None and self.stepper.holds(run_id)

    def begin(self) -> None:
        if self.spans is not None:
            self.spans.begin()

    def started(self, run: TracedRun) -> None:
        for listener in self.local:
            listener.started(run)
        if self.trace is not None:
            self.trace.started(run)

    def transition(self, run: TracedRun, record: TransitionRecord) -> TransitionRecord:
        """Tell every listener of `record`; return it as the journal commits it."""
        for listener in self.local:
            listener.transition(run, record)
        if self.redact is not None:
            record = self._redacted(record)
        if self.trace is not None:
            self.trace.transition(run, record)
        if self.spans is not None:
            self.spans.transition(record)
        return record

    def _redacted(self, record: TransitionRecord) -> TransitionRecord:
        """`record` redacted; its state before is the last record's state after, most
        often, and is then not redacted a second time."""
        raw, hidden = self._after
        before = record.state_before
        before = hidden if before is raw else redacted(before, self.redact)
        outcome = redacted(record.outcome, self.redact)
        self._after = (record.outcome.next_state, outcome.next_state)
        inp = redacted(record.input, self.redact)  # every other field is kept as it is
        return replace(record, state_before=before, input=inp, outcome=outcome)

    def effect(self, run: TracedRun, event: Any) -> None:
        for listener in self.local:
            listener.effect(run, event)
        if self.redact is not None:
            if isinstance(event, DELTAS):  # redacted, only the message they build is kept
                return
            at = event.at
            event = redacted(event, self.redact)
            if at is not None:  # the copy keeps when it was emitted
                stamp(event, at)
        if self.journal is not None:
            self.journal.effect(run.seq, event)
        if self.trace is not None:
            self.trace.effect(run, event)

    def exported(self, value: Any) -> Any:
        """`value` as the listeners that persist get it: redacted, once, when the run
        redacts. What the journal writes that is no report (a call's result, approval
        decisions) passes here too, so this port is the one exit of redaction."""
        return value if self.redact is None else redacted(value, self.redact)

    def exported_text(self, text: str) -> str:
        """A text as the listeners that export get it (a span's message contents, a tool
        call's arguments and result, an error's text): redacted when the run redacts."""
        return text if self.redact is None else self.redact(text)

    def ended(self, run: Any) -> None:
        """The run ended or suspended (the driver then closes its journal)."""
        if self.stepper is not None:
            self.stepper.ended(run)
        for listener in self.local:
            listener.ended(run)
        if self.spans is not None:
            self.spans.end()

    def closed(self) -> None:
        """The run's stream closed (its span ends, abandoned if the run had not ended)."""
        if self.spans is not None:
            self.spans.end()


def exported_line(line: Line, redact: Redact | None) -> Line | None:
    """A trace line as a run's trace holds it: redacted with `redact`, and None for a
    delta when redacting (the port's rule, for lines the debugger saves)."""
    if redact is None:
        return line
    if isinstance(line, EffectTrace) and isinstance(line.event, DELTAS):
        return None
    if not isinstance(line, EffectTrace | TransitionTrace):  # a run's line names, no text
        return line
    exported: Line = redacted(line, redact)
    return exported


class Listened:
    """The part of `Run` that holds its listeners (see the module docstring): each is set
    as an attribute (`trace`, `observer`, `journal`, `stepper`) or added (`listen`), and
    `listeners` is their fan-out, None without any; `Run` provides the rest."""

    config: RunConfig
    listeners: Listeners | None
    _trace: GuardedSink | None
    _observer: RunObserver | None
    _journal: Journal | None
    _stepper: Stepper | None
    _local: tuple[RunListener, ...]

    def _listened(self, trace: TraceSink | None, observer: RunObserver | None) -> None:
        """Give a run being built its trace and spans, and no other listener yet."""
        self._trace, self._observer = guarded(trace), observer
        self._journal = self._stepper = None
        self._local = ()
        self._relisten()

    def _relisten(self) -> None:
        kinds = (self._stepper, self._journal, self._trace, self._observer)
        if not self._local and all(kind is None for kind in kinds):
            self.listeners = None
        else:
            self.listeners = Listeners(self._local, *kinds, self.config.redact)

    def exported(self, value: Any) -> Any:
        """`value` as the listeners that persist get it (`Listeners.exported`): what the
        journal writes besides the port's reports (a call's result, approval decisions)."""
        listeners = self.listeners
        return value if listeners is None else listeners.exported(value)

    def exported_text(self, text: str) -> str:
        """A text as the listeners that export get it (`Listeners.exported_text`): what
        the spans export of the effects they wrap."""
        listeners = self.listeners
        return text if listeners is None else listeners.exported_text(text)

    def listen(self, listener: RunListener) -> None:
        """Tell `listener`, in process, what this run and the runs nested in it do, with
        raw values (after the stepper and the listeners added before it)."""
        self._local = (*self._local, listener)
        self._relisten()

    def listen_as(self, parent: Listened, observer: RunObserver | None) -> None:
        """Take the in-process listeners of `parent`, the run this one is nested in (its
        trace it took when built), with `observer` as its spans."""
        self._local, self._stepper, self._observer = parent._local, parent._stepper, observer
        self._relisten()

    @property
    def trace(self) -> GuardedSink | None:
        """The run's trace sink, behind its guard (`.sink` is the sink you gave)."""
        return self._trace

    @trace.setter
    def trace(self, sink: TraceSink | None) -> None:
        self._trace = guarded(sink)
        self._relisten()

    @property
    def observer(self) -> RunObserver | None:
        """The run's spans (`helikon.run.observing`), None without."""
        return self._observer

    @observer.setter
    def observer(self, observer: RunObserver | None) -> None:
        self._observer = observer
        self._relisten()

    @property
    def journal(self) -> Journal | None:
        """The run's journal in its store, once opened (`helikon.run.journaling`)."""
        return self._journal

    @journal.setter
    def journal(self, journal: Journal | None) -> None:
        self._journal = journal
        self._relisten()

    @property
    def stepper(self) -> Stepper | None:
        """A debugger holding nested runs (`helikon.run.stepping.StepGate`), None without."""
        return self._stepper

    @stepper.setter
    def stepper(self, stepper: Stepper | None) -> None:
        self._stepper = stepper
        self._relisten()
