"""What a debugger keeps of a run's effects: the lines and events each effect produced
(`Effect`), the in-process listener that collects them as a debugged run goes (`Recorder`,
told raw values: `helikon.run.listening`), and how a recorded trace's lines are grouped
into effects again (`recorded_effects`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from helikon.core.events import TERMINAL_EVENTS
from helikon.core.state import TransitionOutcome
from helikon.trace import (
    EffectTrace,
    Line,
    RunLines,
    RunTrace,
    Trace,
    TracedRun,
    TransitionRecord,
    TransitionTrace,
    transition_trace,
)
from helikon.trace.times import StepTime

if TYPE_CHECKING:
    from helikon.run.driver import Run


@dataclass(frozen=True)
class Effect:
    """What one effect produced besides its input: the events it streamed and the trace
    lines it wrote (the run's own effect events, and every line of nested runs)."""

    events: tuple[Any, ...] = ()
    lines: tuple[Line, ...] = ()
    root: str = ""

    def lines_for(self, root: str) -> tuple[Line, ...]:
        """The lines as run `root` writes them (a fork renames the runs it inherited)."""
        if not self.root or self.root == root:
            return self.lines
        old = self.root
        return tuple(
            replace(line, run_id=root + line.run_id[len(old) :])
            if line.run_id == old or line.run_id.startswith(old + "/")
            else line
            for line in self.lines
        )


NOTHING = Effect()


@dataclass
class Recorder:
    """The in-process listener of a debugged run (`Run.listen`): keeps the lines its effects
    produce, as the run says them (nested runs tell it too: they take their parent's
    in-process listeners); the root's own transitions are the steps `Run.apply` returns. A
    saved trace redacts them as it writes them (`Debugger.save_trace`)."""

    root: str
    lines: list[Line] = field(default_factory=list)
    runs: RunLines = field(default_factory=RunLines)

    def __post_init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Start recording one effect: its lines open the nested runs they hold afresh."""
        self.lines.clear()
        self.runs = RunLines()
        self.runs.runs.add(self.root)

    def started(self, run: TracedRun) -> None:
        return None

    def transition(self, run: TracedRun, record: TransitionRecord) -> None:
        if run.run_id != self.root:
            self._announce(run)
            self.lines.append(transition_trace(run, record))

    def effect(self, run: TracedRun, event: Any) -> None:
        if event.type != "run_started":
            self._announce(run)
            self.lines.append(EffectTrace(run.run_id, run.seq, event))

    def ended(self, run: TracedRun) -> None:
        return None

    def _announce(self, run: TracedRun) -> None:
        opened = self.runs.announce(run)
        if opened is not None:
            self.lines.append(opened)


def started_at(trace: Trace) -> str | None:
    """When a recorded run started: its `RunStarted` line's time, else its header's."""
    root = trace.header.run_id
    started = (
        line.at
        for line in trace.lines
        if isinstance(line, EffectTrace)
        and line.run_id == root
        and line.event.type == "run_started"
    )
    return next(started, trace.header.at)


def outcome_of(line: TransitionTrace) -> TransitionOutcome:
    return TransitionOutcome(line.state_after, line.events, line.next_action, line.appends)


def by_position(trace: Trace, root: str) -> dict[int, Effect]:
    """`recorded_effects` keyed as `Debugger.produced` is: by the step that produced them."""
    effects = recorded_effects(trace, root)
    lines = trace.transitions(root)
    return {k + 1: effects[line.seq] for k, line in enumerate(lines) if line.seq in effects}


def recorded_effects(trace: Trace, root: str) -> dict[int, Effect]:
    """Per root transition seq: what the root's stream showed after it (its effect events,
    nested runs' events but their terminal one) and the raw lines recorded there."""
    events: dict[int, list[Any]] = {}
    lines: dict[int, list[Line]] = {}
    seq = 0
    for line in trace.lines:
        if isinstance(line, TransitionTrace) and line.run_id == root:
            seq = line.seq
            continue
        if isinstance(line, EffectTrace) and line.event.type == "run_started":
            continue
        lines.setdefault(seq, []).append(line)
        if isinstance(line, RunTrace):
            continue
        found = [line.event] if isinstance(line, EffectTrace) else list(line.events)
        if line.run_id != root:
            found = [event for event in found if event.type not in TERMINAL_EVENTS]
        events.setdefault(seq, []).extend(found)
    return {key: Effect(tuple(events.get(key, ())), tuple(lines[key]), root) for key in lines}


def step_time(line: TransitionTrace | None, divergence: Any, run: Run) -> StepTime | None:
    """A step's time: the recorded line's when it replays that line unchanged (replays
    ignore times, so a saved replay equals its recording), else when the run just took it."""
    if line is not None and divergence is None and run.seq == line.seq:
        return line.time
    return StepTime.of(*run.times)
