"""`Debugger`: step, break, inspect, rewind, replay and fork agent runs.

Theory of operation: a debugger drives one `Run` a step at a time. A step applies the input
already observed (one `transition`) and then obtains the next input: from the record when
one exists (a trace being replayed, or steps already taken before a rewind), otherwise by
performing the action live (calling the model, running tools). Because `transition` is pure,
re-applying a recorded input reproduces the recorded outcome exactly, so rewinding is
restoring a frame and stepping again repeats no side effect unless asked (`live=True`).

A frame is the run between two steps: state, conversation length, the observed input and
the next action. `frames[k]` is the run after k steps. Forking replaces the observed input
of a frame (a model response, tool results) and continues in a new debugger: its history
is the prefix, its future is new.

Nested runs (a handoff target, an agent called as a tool) are stepped into as recorded
(`step_in`, after the step whose effect ran them) or, live, as they run (`step_in_live`,
before it): that step is then in flight until the nested run is let go (see
`helikon.debug.live`), and the nested run's debugger replays what it records as it goes.

This module holds the debugger itself: building it (live, replay, a newer recording),
reading, stepping, approvals, rewinding and forking, saving. Its parts live beside it:
`helikon.debug.steps` (frames, steps), `helikon.debug.breakpoints` (breakpoints and why
`continue_()` stopped), `helikon.debug.nesting` (stepping into nested runs, recorded or
live), `helikon.debug.recording` (what each effect produced) and `helikon.debug.live` (the
gate and stand-in run of a live step-in).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Self

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.codec import dumps
from helikon.core.events import RunStarted
from helikon.core.items import Item
from helikon.core.state import ApprovalDecisions, TransitionOutcome
from helikon.core.transition import Match, match_row
from helikon.debug.breakpoints import BreakKind, Breakpoint, Stop
from helikon.debug.live import LiveNesting, stand_in
from helikon.debug.nesting import Flight, NestedRuns
from helikon.debug.recording import (
    NOTHING,
    Effect,
    Recorder,
    by_position,
    outcome_of,
    recorded_effects,
    started_at,
    step_time,
)
from helikon.debug.steps import DebuggerError, Frame, Started, Step
from helikon.models.scripted import ScriptedModel
from helikon.run.agent import Agent
from helikon.run.chart_versions import on_recorded_chart
from helikon.run.config import RunContext
from helikon.run.driver import Run
from helikon.run.lifecycle import KEEP, Lifecycle
from helikon.run.listening import exported_line
from helikon.run.snapshot import ApprovalMismatch, RunSnapshot
from helikon.run.spec import AgentSpec
from helikon.trace import (
    EffectTrace,
    Trace,
    TraceHeader,
    TraceWriter,
    TransitionRecord,
    TransitionTrace,
    header_of,
    transition_trace,
)

# Where each name a debugger's user meets lives; importable from here as before.
__all__ = ["BreakKind", "Breakpoint", "Debugger", "DebuggerError", "Frame", "Step", "Stop"]


@dataclass
class Debugger(NestedRuns):
    """Steps a live run, or replays a recorded one; see the module docstring.

    Build one with `Debugger.live(agent, input)` or `Debugger.replay(trace, agent)`.
    """

    run: Run
    recorded: dict[int, Any] = field(default_factory=dict)
    produced: dict[int, Effect] = field(default_factory=dict)
    expected: dict[int, TransitionTrace] = field(default_factory=dict)
    history: list[Step] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    breakpoints: list[Breakpoint] = field(default_factory=list)
    log: list[Item] = field(default_factory=list)
    header: TraceHeader | None = None
    recorded_only: bool = False
    forks: int = 0
    trace: Trace | None = None
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _live: LiveNesting | None = None  # set on a nested run followed live (`step_in_live`)
    _flight: Flight | None = None  # a step `step_in_live` left in flight

    def __post_init__(self) -> None:
        self._recorder = Recorder(self.run.run_id)
        self.run.listen(self._recorder)  # in process: it keeps what the run says, raw
        if not self.frames:
            self.frames.append(self._frame())

    # ------------------------------------------------------------ building

    @classmethod
    def live(
        cls,
        agent: Agent,
        input: str | Sequence[Item],
        *,
        context: RunContext[Any] | None = None,
        run_id: str | None = None,
        source: str | None = None,
    ) -> Debugger:
        """A debugger over a new run of `agent`, stopped before its first step.

        `source` names where the agent is defined (a chart file), recorded in saved traces.
        """
        run = Run(agent, input=input, context=context, run_id=run_id)
        run.continue_stream()  # the debugger streams its steps: the run announces nothing
        return cls(run, header=header_of(run, source))

    @classmethod
    def replay(
        cls, trace: Trace, agent: AgentSpec | None = None, *, context: RunContext[Any] | None = None
    ) -> Self:
        """A debugger replaying `trace` offline: recorded inputs, no model, no tools.

        With `agent` (the agent the run had: its chart, tools and limits; its model is not
        called), each step is computed again by `transition` and checked against the
        recording, and the run can be forked or continued live. Without it, nothing is
        imported or computed: each step is the recorded transition, on the chart the trace
        recorded (`recorded_only`), and forking or stepping live is refused. A trace
        recorded on an older version of the default chart, which the package keeps, replays
        on that version, as a stored run or a snapshot resumes on it.

        Raises:
            DebuggerError: the trace was recorded on another agent or chart (naming both
                charts' digests), or is empty.
        """
        header = trace.header
        lines = trace.transitions(header.run_id)
        if not lines:
            raise DebuggerError("the trace records no transition of its run")
        recorded_only = agent is None
        if agent is None:
            agent = AgentSpec(header.agent, ScriptedModel([]), chart=trace.table())
        else:  # on an older default chart, its kept version (helikon.run.chart_versions)
            agent = on_recorded_chart(agent, header.chart_digest)
        run = Run(agent, context=context, run_id=header.run_id)
        run.continue_stream()
        if not recorded_only and agent.mcp_servers:
            try:  # the tools as the trace recorded them: no server is asked
                run.take_recorded_tools(header.tools)
            except ValueError as exc:
                raise DebuggerError(f"the trace's tools do not fit this agent: {exc}") from None
        if header.agent != agent.name or header.chart_digest != run.ctx.table.digest:
            raise DebuggerError(
                f"the trace was recorded on agent {header.agent!r} with chart "
                f"{header.chart_digest[:12]}; this agent is {agent.name!r} on "
                f"{run.ctx.table.digest[:12]}"
            )
        first = lines[0]  # numbered as recorded: a resumed run's trace starts late
        run.position(state=first.state_before, seq=first.seq - 1, next_input=first.input)
        debugger = cls(run, header=header, recorded_only=recorded_only, trace=trace)
        debugger._take(trace)
        return debugger

    def _take(self, trace: Trace) -> None:
        """Keep `trace`'s transitions of this run, and its effects, as the record."""
        root = self.run.run_id
        effects = recorded_effects(trace, root)
        for position, line in enumerate(trace.transitions(root)):
            self.recorded[position] = line.input
            self.expected[position + 1] = line
            if line.seq in effects:
                self.produced[position + 1] = effects[line.seq]

    def extend(self, trace: Trace) -> bool:
        """Take a newer trace of the replayed run as the record (a stored run that is
        still going: what the store held then, and more). The steps taken stay; a replay at
        the old end is taken back one step, since that step's effect may have grown (step
        on to see the new records). Returns whether the record grew.

        Raises:
            DebuggerError: this is no replay, or `trace` is of another run or chart, or its
                transitions do not start with the ones already recorded.
        """
        header = trace.header
        if not self.expected:
            raise DebuggerError("only a replay takes a newer recording")
        if header.run_id != self.run.run_id or header.chart_digest != self.run.ctx.table.digest:
            raise DebuggerError(
                f"the newer recording is of run {header.run_id!r} on chart "
                f"{header.chart_digest[:12]}, not of this replay's"
            )
        lines = trace.transitions(header.run_id)
        known = [self.expected[k] for k in sorted(self.expected)]
        if dumps(lines[: len(known)], Any) != dumps(known, Any):
            raise DebuggerError("the newer recording does not start with the steps recorded")
        if len(lines) == len(known) and all(
            self.produced.get(k, NOTHING).lines == effect.lines
            for k, effect in by_position(trace, header.run_id).items()
        ):
            return False
        self._take(trace)
        self.trace = trace
        if self.history and self.position == len(known):
            self.rewind(self.position - 1)  # the last step's effect may have grown: redo it
        return True

    # ------------------------------------------------------------ reading

    @property
    def position(self) -> int:
        """Steps applied so far."""
        return len(self.history)

    @property
    def state(self) -> Any:
        return self.run.state

    @property
    def conversation(self) -> tuple[Item, ...]:
        return self.run.conversation.items()

    @property
    def next_input(self) -> Any:
        return self.run.next_input

    @property
    def finished(self) -> bool:
        """The run ended, suspended, or (in a replay) the recording has no further step."""
        replayed_all = bool(self.expected) and self.position >= len(self.expected)
        if self._live is not None and self._live.following(self.run.run_id):
            replayed_all = False
        return self.run.finished or self.run.suspended or replayed_all

    @property
    def last(self) -> Step | None:
        return self.history[-1] if self.history else None

    def peek(self) -> Match | None:
        """The row the next step will take, with its guards' values (None if nothing is due)."""
        if self.run.next_input is None:
            return None
        if self.recorded_only:
            line = self.expected.get(self.position + 1)
            if line is not None:
                return self._recorded_match(line)
            if self._live is None:
                return None
        return match_row(self.run.state, self.run.next_input, self.run.ctx)

    def _recorded_match(self, line: TransitionTrace) -> Match:
        return Match(self.run.ctx.table.rows[line.row.index], line.row.checked)

    def _refuse_without_chart(self, what: str) -> None:
        if self._live is not None:
            raise DebuggerError(
                f"cannot {what}: this nested run is followed as its parent's effect runs it; "
                "step out and fork the outer run"
            )
        if self.recorded_only:
            raise DebuggerError(
                f"cannot {what}: this replay has only the trace (nothing was imported); "
                "give the chart the run used (--chart CHART) to compute steps again"
            )

    # ------------------------------------------------------------ stepping

    async def step(self, *, live: bool = False) -> Step | None:
        """Apply one transition and obtain the next input; None when the run is over.

        A recorded next input (replay, or a step taken before a rewind) is reused, with the
        events its effect streamed, unless `live` is true: stepping again repeats no side
        effect. A step left in flight by `step_in_live` is finished first: the nested runs
        it holds are let go to run to their end (`step out`).
        """
        if self._flight is not None:
            return await self._land()
        if live:
            self._refuse_without_chart("step live")
        if self.run.finished or self.run.suspended:
            return None
        if self._live is not None and self.position + 1 not in self.expected:
            await self._follow()
            if self.position + 1 not in self.expected:  # it took no further transition:
                return None  # a followed run is never performed here, only replayed
        started = await self._start(live)
        if started is None:
            return None
        effect: tuple[Any, ...] = ()
        if not self.run.finished:
            effect = await self._effect(self.position + 1, live)
        return self._took(started, effect)

    async def _start(self, live: bool) -> Started | None:
        """Observe the input due when there is none yet, and apply it: one transition."""
        lead: tuple[Any, ...] = ()
        if self.run.next_input is None:
            observed = await self._observe(live)
            if observed is None:
                return None
            lead = observed
        inp = self.run.next_input
        recorded = self.expected.get(self.position + 1) if self.recorded_only else None
        if recorded is not None:
            match = self._recorded_match(recorded)
            applied = self.run.record(inp, outcome_of(recorded), match)
        else:
            applied = await self.run.apply(None if live else self._recorded_outcome(inp))
        assert applied.match is not None  # the debugger's recorder listens: rows are kept
        outcome = applied.outcome
        self.log[self.frames[-1].conversation_len :] = []
        self.log.extend(outcome.conversation_appends)
        return Started(applied.before, applied.input, applied.match, outcome, lead)

    def _recorded_outcome(self, inp: Any) -> TransitionOutcome | None:
        """The outcome the next step had when it was recorded, or taken before a rewind,
        with this same input: what a replay takes the output guardrails' verdict from."""
        line = self.expected.get(self.position + 1)
        if line is not None and dumps(line.input, Any) == dumps(inp, Any):
            return outcome_of(line)
        if len(self.history) > self.position:
            earlier = self.history[self.position]
            if dumps(earlier.input, Any) == dumps(inp, Any):
                return earlier.outcome
        return None

    def _took(self, started: Started, effect: tuple[Any, ...]) -> Step:
        """The step `started` began, its effect done: kept in the history, with its frame."""
        outcome = started.outcome
        divergence = self._diverges(outcome)
        time = step_time(self.expected.get(self.position + 1), divergence, self.run)
        step = Step(
            self.run.seq,
            started.before,
            started.input,
            started.match,
            outcome,
            effect,
            divergence,
            started.lead,
            time,
        )
        del self.history[self.position :]
        self.history.append(step)
        del self.frames[self.position :]
        self.frames.append(self._frame())
        return step

    async def _observe(self, live: bool) -> tuple[Any, ...] | None:
        """Obtain the input due now, returning the events its effect streamed; None when
        there is none (the end of a replay, or the run suspends)."""
        position = self.position
        if position in self.recorded and not live:
            self.run.position(next_input=self.recorded[position])
            return self.produced[position].events if position in self.produced else ()
        if self.expected:
            return None
        events = await self._perform(position)
        return events if self.run.next_input is not None else None

    async def _effect(self, position: int, live: bool) -> tuple[Any, ...]:
        """Obtain input `position` after a transition: recorded, or performed live."""
        if not live and (position in self.recorded or self.expected):
            next_input = self.recorded.get(position)
            effect = self.produced.get(position, NOTHING)
            # the recording suspended here, and was not resumed: so does the replay
            suspends = next_input is None and any(e.type == "run_suspended" for e in effect.events)
            self.run.position(
                next_input=next_input,
                next_action=None,
                lifecycle=Lifecycle.SUSPENDING if suspends else KEEP,
            )
            return effect.events
        return await self._perform(position)

    async def _perform(self, position: int) -> tuple[Any, ...]:
        """Perform the next action live; keep its input, events and trace lines."""
        self._recorder.clear()
        events = tuple([event async for event in self.run.perform()])
        self.produced[position] = Effect(events, tuple(self._recorder.lines), self.run.run_id)
        if self.run.next_input is not None:
            self.recorded[position] = self.run.next_input
        return events

    def _diverges(self, outcome: TransitionOutcome) -> str | None:
        line = self.expected.get(self.run.seq)
        if line is None:
            return None
        for name, recorded, replayed in (
            ("state", line.state_after, outcome.next_state),
            ("events", line.events, outcome.events),
            ("next action", line.next_action, outcome.next_action),
            ("appends", line.appends, outcome.conversation_appends),
        ):
            if dumps(recorded, Any) != dumps(replayed, Any):
                return f"step {self.run.seq}: the replayed {name} differs from the recording"
        return None

    async def next_turn(self) -> Stop:
        """Step until a new turn starts (or a breakpoint, or the end)."""
        return await self.continue_(until_turn=True)

    async def continue_(self, *, until_turn: bool = False) -> Stop:
        """Step until a breakpoint is hit, the replay diverges, or the run ends."""
        while True:
            step = await self.step()
            if step is None:
                return Stop("suspended" if self.run.suspended else "end", self.last)
            if step.divergence is not None:
                return Stop("diverged", step)
            for breakpoint in self.breakpoints:
                if breakpoint.hit(step, self.run.next_input):
                    return Stop("breakpoint", step, breakpoint)
            for line in self._nested_transitions(self.position):
                for breakpoint in self.breakpoints:
                    if breakpoint.hit_nested(line):
                        return Stop("breakpoint", step, breakpoint, nested=line.run_id)
            if until_turn and any(event.type == "turn_started" for event in step.events):
                return Stop("turn", step)

    # ------------------------------------------------------------ approvals

    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The calls a suspended run waits on, bound to its id and seq (what `decide` and
        `agent.resume` bind decisions to); empty when it is not suspended."""
        if not self.run.suspended:
            return ()
        return self._snapshot().pending()

    def asked_by(self, request: ApprovalRequest) -> str:
        """Which rule asked for approval of a pending call: its tool's permission (the
        tool's `needs_approval`, the run's `ToolPolicy`) or the run's per-call policy."""
        ctx = self.run.ctx
        said = None if ctx.call_policy is None else ctx.call_policy(request.call)
        if said == "ask" and ctx.tools.get(request.call.name, "allow") != "ask":
            return "the per-call policy (these arguments need approval)"
        return f"the permission of tool {request.call.name} (ask)"

    def decide(self, decisions: Sequence[ApprovalDecision]) -> None:
        """Answer a suspended run: the decisions bind as `agent.resume`'s do (each to a
        pending call of this suspension, by call id and arguments hash, once) and become the
        next input; stepping applies them. Decisions for calls not named are not given.

        Raises:
            DebuggerError: the run is not suspended, or a decision does not bind.
        """
        if not self.run.suspended:
            raise DebuggerError("the run is not suspended for approval here")
        if self._live is not None:
            raise DebuggerError(
                "a run followed live is answered by the run it is nested in, not here"
            )
        try:
            self._snapshot().check_decisions(decisions)
        except ApprovalMismatch as exc:
            raise DebuggerError(str(exc)) from None
        chosen = ApprovalDecisions(tuple(decisions))
        self.run.position(next_input=chosen, lifecycle=self.run.lifecycle.resumed)
        self.recorded[self.position] = chosen
        del self.frames[self.position :]
        self.frames.append(self._frame())

    def _snapshot(self) -> RunSnapshot:
        run = self.run
        return RunSnapshot(run.run_id, run.agent.name, "", run.seq, 0, run.state, ())

    # ------------------------------------------------------------ time travel

    def rewind(self, k: int) -> Frame:
        """Go back to the run after `k` steps (0: before the first). Steps after it are kept
        as the record, so stepping again reuses their inputs."""
        if self._flight is not None:
            raise DebuggerError("a step is in flight with a nested run stepped: step out first")
        if not 0 <= k <= self.position:
            raise DebuggerError(f"cannot rewind to step {k}: the run has taken {self.position}")
        frame = self.frames[k]
        self.run.position(
            state=frame.state,
            conversation=self.log[: frame.conversation_len],
            seq=frame.seq,
            next_input=frame.next_input,
            next_action=frame.next_action,
            lifecycle=self.run.lifecycle.resumed,
        )
        del self.history[k:]
        del self.frames[k + 1 :]
        return frame

    def back(self, steps: int = 1) -> Frame:
        return self.rewind(max(self.position - steps, 0))

    def fork(
        self,
        next_input: Any,
        *,
        at: int | None = None,
        turns: Sequence[Any] | None = None,
    ) -> Debugger:
        """A new debugger from the run after `at` steps (default: now) with `next_input`
        replacing the observed input there; it continues live, or on scripted `turns`.

        The original debugger is left as it is.
        """
        self._refuse_without_chart("fork")
        k = self.position if at is None else at
        if not 0 <= k <= self.position:
            raise DebuggerError(f"cannot fork at step {k}: the run has taken {self.position}")
        frame = self.frames[k]
        agent = self.run.agent
        if turns is not None:
            agent = replace(agent, model=ScriptedModel(list(turns)))
        self.forks += 1
        fork_id = f"{self.run.run_id}-fork{k}" + (f".{self.forks}" if self.forks > 1 else "")
        run = Run(agent, context=self.run.context, run_id=fork_id)
        run.position(
            state=frame.state,
            conversation=self.log[: frame.conversation_len],
            seq=frame.seq,
            next_input=next_input,
            next_action=None,
            lifecycle=Lifecycle.STARTED,  # announced by the run it forks; prepared again
        )
        forked = Debugger(
            run, log=list(self.log[: frame.conversation_len]), header=self.header, trace=self.trace
        )
        forked.breakpoints = [replace(b) for b in self.breakpoints]
        forked._ids = itertools.count(max((b.id for b in self.breakpoints), default=0) + 1)
        forked.history = list(self.history[:k])
        forked.frames = [*self.frames[:k], forked._frame()]
        forked.recorded = {i: v for i, v in self.recorded.items() if i < k}
        forked.recorded[k] = next_input
        forked.produced = {i: v for i, v in self.produced.items() if i < k}
        return forked

    def after(self, k: int) -> Debugger:
        """A debugger at the run after `k` steps, with its recorded next input: what to
        read an input's fit from (`helikon.debug.fork`) before forking there. This debugger
        is left as it is, and its forks are not counted.

        Raises:
            DebuggerError: as `fork`.
        """
        if not 0 <= k <= self.position:
            raise DebuggerError(f"cannot fork after step {k}: the run has taken {self.position}")
        view = self.fork(self.frames[k].next_input, at=k)
        self.forks -= 1
        return view

    def _frame(self) -> Frame:
        run = self.run
        return Frame(run.seq, run.state, len(run.conversation), run.next_input, run.next_action)

    # ------------------------------------------------------------ following a nested run

    def _following(self, child: Run, live: LiveNesting) -> Self:
        """A debugger following `child`, held before a transition, with this one's
        breakpoints that its chart has."""
        followed = type(self)(
            stand_in(child), log=list(child.conversation.items()), recorded_only=True
        )
        followed.header = header_of(followed.run)
        followed._live = live
        self._lend_breakpoints(followed)
        return followed

    # ------------------------------------------------------------ saving

    def save_trace(self, target: Any) -> None:
        """Write the history as a trace (a fork's trace is a new trace), with each step's
        effect lines as recorded: the events it streamed and any nested run's lines. What
        the run's `RunConfig.redact` hides, the trace does not hold (the debugger shows it):
        each line is written as a run's trace holds it (`exported_line`, the rule of the
        listeners' port, helikon.run.listening)."""
        with TraceWriter(target) as writer:
            header = self.header or header_of(self.run)
            writer.write(replace(header, run_id=self.run.run_id))
            started = RunStarted(self.run.agent.name, self.run.run_id)
            at = started_at(self.trace) if self.trace is not None else header.at
            writer.write(EffectTrace(self.run.run_id, 0, started, at))
            redact = self.run.config.redact  # a trace is written as the run writes one
            for position, step in enumerate(self.history):
                record = TransitionRecord(
                    step.seq, step.state_before, step.input, step.outcome, step.match
                )
                effect = self.produced.get(position + 1, NOTHING)
                traced = replace(transition_trace(self.run, record), time=step.time)
                lines = (traced, *effect.lines_for(self.run.run_id))
                for line in lines:
                    exported = exported_line(line, redact)
                    if exported is not None:
                        writer.write(exported)
