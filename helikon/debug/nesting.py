"""Stepping into nested runs (a handoff target, an agent called as a tool): as recorded
(`step_in`, after the step whose effect ran them), or live as they run (`step_in_live`,
before it: the step is then in flight until the nested run is let go, see
`helikon.debug.live`). `NestedRuns` is that part of `Debugger`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Self

from helikon.debug.breakpoints import Breakpoints
from helikon.debug.live import LiveNesting, runs_ahead
from helikon.debug.recording import NOTHING, Effect, Recorder
from helikon.debug.steps import DebuggerError, Started, Step
from helikon.run.config import RunContext
from helikon.run.driver import Run
from helikon.run.spec import AgentSpec
from helikon.run.stepping import StepGate
from helikon.trace import Line, RunTrace, Trace, TraceError, TraceHeader, TransitionTrace, header_of

__all__ = ["Flight", "NestedRuns", "chosen"]


class NestedRuns(Breakpoints):
    """Nested runs of a `Debugger`, which provides the fields and steps below."""

    produced: dict[int, Effect]
    expected: dict[int, TransitionTrace]
    recorded: dict[int, Any]
    header: TraceHeader | None
    trace: Trace | None
    _recorder: Recorder
    _live: LiveNesting | None
    _flight: Flight | None

    @property
    def position(self) -> int:
        raise NotImplementedError

    @classmethod
    def replay(
        cls, trace: Trace, agent: AgentSpec | None = None, *, context: RunContext[Any] | None = None
    ) -> Self:
        raise NotImplementedError

    def _following(self, child: Run, live: LiveNesting) -> Self:
        raise NotImplementedError

    def _take(self, trace: Trace) -> None:
        raise NotImplementedError

    async def step(self, *, live: bool = False) -> Step | None:
        raise NotImplementedError

    async def _start(self, live: bool) -> Started | None:
        raise NotImplementedError

    async def _effect(self, position: int, live: bool) -> tuple[Any, ...]:
        raise NotImplementedError

    def _took(self, started: Started, effect: tuple[Any, ...]) -> Step:
        raise NotImplementedError

    # ------------------------------------------------------------ as recorded

    def nested_runs(self) -> list[str]:
        """The runs nested directly in this one that the effect after the current step ran
        (a handoff target, agents called as tools), in the order they began."""
        root = self.run.run_id
        found: list[str] = []
        for line in self.produced.get(self.position, NOTHING).lines_for(root):
            run = line.run_id
            inside = isinstance(line, RunTrace) and run.startswith(root + "/")
            if inside and not any(run.startswith(outer + "/") for outer in found):
                found.append(run)
        return found

    def step_in(self, run_id: str | None = None) -> Self:
        """A debugger replaying nested run `run_id` (default: the first of `nested_runs`)
        as recorded, on its own chart, with this debugger's breakpoints that its chart has.

        Raises:
            DebuggerError: no nested run began after the current step, or not that one.
        """
        target = chosen(
            self.nested_runs(),
            run_id,
            f"no nested run began after step {self.position}: step in after a handoff "
            "or a call of an agent as a tool",
            ("here", "nested"),
        )
        try:
            nested = type(self).replay(self._recording().nested(target))
        except TraceError as exc:
            raise DebuggerError(str(exc)) from None
        self._lend_breakpoints(nested)
        return nested

    # ------------------------------------------------------------ live step-in

    @property
    def followed(self) -> bool:
        """Whether this debugger follows a nested run as it runs (`step_in_live`): its
        record grows as the run is released, so it has no recorded length to show."""
        return self._live is not None

    @property
    def in_flight(self) -> bool:
        """Whether a step is in flight: `step_in_live` stepped into a nested run that its
        effect runs; `step` (or `abandon`) finishes it."""
        return self._flight is not None

    def runs_ahead(self) -> list[str]:
        """The nested runs the next step's effect would start when performed live (a
        handoff target, agents called as tools): what `step_in_live` can step into. Empty
        in a replay, or where the next step's effect is recorded (after `back`)."""
        if self._flight is not None:
            return []
        if self._live is not None:
            recorded = self.position + 1 in self.expected
        else:
            recorded = bool(self.expected) or self.position + 1 in self.recorded
        return [] if recorded else runs_ahead(self.run)

    async def step_in_live(self, run_id: str | None = None) -> Self:
        """Step into nested run `run_id` (default: the first of `runs_ahead`) while it runs.

        The next step begins: its transition is applied and its effect starts as a task,
        which runs the nested run held before each of its transitions; its sibling calls
        run on. The debugger returned follows the nested run: each of its steps releases
        one transition (breakpoints as `step_in` gives them), and it can step into runs
        nested in it in turn. This debugger's `step` finishes the step in flight, letting
        the nested runs go to run to their end (`step out`); `abandon` cancels it.

        Raises:
            DebuggerError: no nested run starts at the next step, or not that one; or it
                did not begin (the step is then taken: `history` shows how it went).
        """
        target = chosen(
            self.runs_ahead(),
            run_id,
            f"no nested run starts at step {self.position + 1}: step in before a handoff "
            "or a call of an agent as a tool",
            ("ahead", "ahead"),
        )
        if self._live is None:
            live = await self._begin_flight(target)
            await live.settle(target)
        else:
            live = self._live
            live.gate.hold(target)
            live.gate.release(self.run.run_id)
            self._flight = Flight(live, None)
            await live.settle(target, self.run.run_id)
        child = live.gate.held(target)
        if child is None:
            await self.step()
            raise DebuggerError(f"nested run {target!r} did not begin; step {self.position} ran")
        return self._following(child, live)

    async def _begin_flight(self, target: str) -> LiveNesting:
        """Apply the next transition and start its effect as a task, holding `target`."""
        gate = StepGate()
        gate.hold(target)
        self.run.stepper = gate
        started = await self._start(False)
        assert started is not None  # an input is due: runs_ahead computed its transition
        position = self.position + 1
        task = asyncio.create_task(self._effect(position, False))

        def record() -> Trace:  # the effect's lines: in flight, then as it produced them
            done = position in self.produced
            return self._recording(() if done else tuple(self._recorder.lines))

        live = LiveNesting(gate, task, record)
        self._flight = Flight(live, started)
        return live

    async def _follow(self, *, release: bool = True) -> None:
        """Release the followed run for one transition (unless it was released already)
        and take what it recorded by the time it is held again (or ended)."""
        assert self._live is not None
        live, run_id = self._live, self.run.run_id
        if release:
            live.gate.release(run_id)
        await live.settle(run_id)
        trace = live.trace_of(run_id)
        if trace is not None:
            self._take(trace)
            self.trace = trace
        held = live.gate.held(run_id)
        if held is not None:
            self.recorded[len(self.expected)] = held.next_input

    async def _land(self) -> Step | None:
        """Finish the step in flight: let the nested runs go, and wait for its effect (or,
        following a nested run, for that run to be held again)."""
        flight, self._flight = self._flight, None
        assert flight is not None
        flight.live.gate.let_go(self.run.run_id)
        if flight.started is None:
            await self._follow(release=False)
            return await self.step()
        try:
            effect = await flight.live.task
        finally:
            self.run.stepper = None
        return self._took(flight.started, effect)

    async def abandon(self) -> None:
        """Leave the step in flight (the debugger quits): the run is cancelled, so the
        nested runs it holds stop, its effect's task is awaited, and the step is taken with
        the cancellation as its input. Nothing to do without one."""
        if self._flight is not None and self._flight.started is not None:
            self.run.cancel("the debugger left the run")
            await self._land()

    def _nested_transitions(self, position: int) -> list[TransitionTrace]:
        root = self.run.run_id
        return [
            line
            for line in self.produced.get(position, NOTHING).lines_for(root)
            if isinstance(line, TransitionTrace) and line.run_id != root
        ]

    def _recording(self, flying: Sequence[Line] = ()) -> Trace:
        """This run's record as a trace: its effects' lines (and `flying`, those of the
        effect in flight), with every chart they name."""
        root = self.run.run_id
        header = replace(self.header or header_of(self.run), run_id=root)
        lines = [line for k in sorted(self.produced) for line in self.produced[k].lines_for(root)]
        lines.extend(flying)
        charts = dict(self.trace.charts) if self.trace is not None else {}
        chart_of = {root: header.chart_digest}
        for line in lines:
            if isinstance(line, RunTrace):
                chart_of[line.run_id] = line.chart_digest
                if line.table is not None:
                    charts.setdefault(line.chart_digest, line.table)
        missing = [run for run, digest in chart_of.items() if digest not in charts]
        charts.setdefault(header.chart_digest, header.table)
        if any(chart_of[run] not in charts for run in missing):
            raise DebuggerError(f"the record holds no chart for nested run {missing[0]!r}")
        return Trace(header, lines, charts, chart_of)


@dataclass(frozen=True)
class Flight:
    """A step `step_in_live` left in flight: begun, its effect a task (`started`), or,
    following a nested run, that run released for its transition (`started` None)."""

    live: LiveNesting
    started: Started | None


def chosen(found: list[str], run_id: str | None, none: str, named: tuple[str, str]) -> str:
    """Nested run `run_id` of `found` (default: the first), or the error saying why not:
    `none` when there is none, else naming the runs there are (`named`: where, what)."""
    if not found:
        raise DebuggerError(none)
    target = found[0] if run_id is None else run_id
    if target not in found:
        where, what = named
        raise DebuggerError(f"no nested run {target!r} {where}; {what}: {', '.join(found)}")
    return target
