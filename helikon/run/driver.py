"""The driver: `Run` applies one `transition` at a time and performs the action it asks for.

Theory of operation: a run holds (state, conversation, next input). `advance()` is one step:
apply `transition(state, input, ctx)`, append its items, emit its events, then perform its
`NextAction` by the loop's rules (`helikon.run.loop`, which the Temporal workflow shares),
through the effects `Run` gives it (call the model, run tools, ask for approval, hand off:
`helikon.run.effects`), which yield the next input. Every event of the stream comes from a
step, so the stream, `collect()`, the run store and the debugger all share this one engine.

With a run store (`store=`), each transition is committed to the run's journal before the
effect it asks for starts, under the run's lease; a run resumed from the store continues at
its last committed step (`Run.from_stored`).

What a run does, it tells its listeners through one port (`listeners`,
`helikon.run.listening`; None without any): the step began, the run started, each
transition's record, each effect's event, the run ended. The port tells them in one order
and redacts, once, what the journal, the trace and the spans get; the journal's commit of a
record is awaited here, after the port told everyone, before the effect starts. A debugger
may hold a nested run before each of its transitions (the port's stepper, a
`helikon.run.stepping.StepGate`, which nested runs take from their parent): the run waits
there, changed in nothing, while the rest of its parent's effect runs on.

Cancellation and timeouts stop the effect in flight (tasks of a tool batch are cancelled and
awaited, so none outlives the run) and are fed back as `Cancel` / `Fail(TimedOut)` inputs:
the chart decides what a cancelled run looks like, as it decides everything else.

This module holds the step (`stream`, `step`, `advance`, `apply`, `perform`, `record`,
`emit`: the hot path); the rest of `Run` is its parts, one module each:

- what a run holds and how one is built (new, `from_snapshot`, `from_stored`, `nested`,
  `child`; `snapshot()`): `helikon.run.building`;
- its store side (opening its journal, committing each step, its session, closing):
  `helikon.run.journaling`;
- taking its tools (`prepare`, `take_recorded_tools`): `helikon.run.tooling`;
- stopping it (`cancel`, `expire_after`, `close`, `stoppable`): `helikon.run.stopping`;
- where it is and its lifecycle (`position`, `lifecycle`): `helikon.run.lifecycle`;
- its listeners (`trace`, `observer`, `journal`, `stepper`, `listen`):
  `helikon.run.listening`;
- its effects (call the model, run tools, ...): `helikon.run.effects`;
- the step's rules, shared with the Temporal workflow: `helikon.run.loop`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from helikon.core.events import AgentEvent, RunStarted
from helikon.core.state import NextAction, TransitionOutcome
from helikon.core.transition import Match, matched_transition, next_action_of, transition
from helikon.run.building import Built
from helikon.run.effects import RunToolContext
from helikon.run.legacy import checked, replayed, rewrites, to_check
from helikon.run.lifecycle import Applied, Lifecycle
from helikon.run.loop import Stopped, perform, stop_wins
from helikon.run.observing import Ending
from helikon.trace import TransitionRecord
from helikon.trace import times as _times
from helikon.trace.times import CallTimes, Times, clock

_stamp = object.__setattr__  # an event's `at`: one C call (`helikon.core.events.stamp`)

__all__ = ["Applied", "Run", "RunToolContext"]


class Run(Built):
    """One run of an agent: its state, its conversation, and the step that advances it.

    Build one with `agent.run(...)` (wrapped in a `RunResultStreaming`), or directly to step
    it yourself: `await run.step()` applies one transition and performs its action.

    Its `trace` sink is kept behind a `GuardedSink`: a sink that raises is reported once and
    dropped, and never fails the run. It is one of the run's listeners
    (`helikon.run.listening`), with its spans, its journal, a debugger's stepper and the
    in-process listeners added with `listen()`. With `store`, every step is committed to the store
    before its effect starts (see `helikon.run.journal`).
    """

    times: Times
    """The last step's times as the clock gave them (`helikon.trace.times.Times`): when
    it was applied (wall), how long the effect whose result it applied ran (monotonic; None
    when no effect of this run produced it), each tool call's seconds when that was a
    batch, and whether it was the first step of a resumption."""
    _began: float | None  # when the effect in flight started (monotonic)
    _took: float | None  # how long the effect that produced `next_input` ran
    _timed: CallTimes  # how long each call of the batch that produced it ran
    _resuming: bool  # the next step is the first of a resumption (`resumed`)

    # ------------------------------------------------------------ stepping

    async def stream(self) -> AsyncIterator[AgentEvent]:
        """Every event of the run, to its end (completed, failed or suspended)."""
        while not self.finished and not self._lifecycle.suspended:
            async for event in self.advance():
                yield event

    async def step(self) -> list[AgentEvent]:
        """Apply one transition and perform its action; return the events it produced."""
        return [event async for event in self.advance()]

    async def advance(self) -> AsyncIterator[AgentEvent]:
        """One step, streaming its events as they happen: `apply()`, then `perform()`.

        A new run's first step begins with `RunStarted` (and its trace's header); with a
        store, the run is created (or its lease claimed, when resumed) before that.
        """
        async for event in self._begin():
            yield event
        if self.next_input is None:
            if self.finished or self.suspended:
                return
            async for event in self.perform():
                yield event
            if self.next_input is None:
                await self._settle()
                return
        for event in (await self.apply()).events:
            yield event
        if not self.finished:
            async for event in self.perform():
                yield event
        await self._settle()

    async def _begin(self) -> AsyncIterator[AgentEvent]:
        if self.store is not None and self.journal is None and not self._lifecycle.closed:
            await self.open_journal()
        if self.listeners is not None:
            self.listeners.begin()
        if self._lifecycle is Lifecycle.NEW:
            self._move(Lifecycle.STARTED)
            started = RunStarted(self.agent.name, self.run_id)
            _stamp(started, "_at", clock().wall())
            yield started  # at once; traced after the listing, which the trace's header records
            await self.prepare()
            if self.listeners is not None:
                self.listeners.started(self)
                self.listeners.effect(self, started)

    async def apply(self, recorded: TransitionOutcome | None = None) -> Applied:
        """Apply the input already observed (`next_input`): one transition, as `Applied`
        (the row it took, its outcome, the events the step streams).

        `recorded` is this step's outcome as a recording holds it (a debugger's replay): on a
        chart that checks outputs by the old rewrite (helikon.run.legacy), a completing step
        takes the output guardrails' verdict from it instead of running them again, since
        they are effects (a guardrail may call a model).

        Raises:
            RuntimeError: there is no input to apply (`perform()` the next action first).
        """
        if self.next_input is None:
            raise RuntimeError("no input to apply: perform() the next action first")
        if not self._lifecycle.prepared:
            await self.prepare()
        if self.listeners is not None and self.listeners.holds(self.run_id):
            await self._held()
        before, inp, self.next_input = self.state, self.next_input, None
        match, outcome = self.transition(inp)
        if (recorded is not None or self.agent.output_guardrails) and rewrites(self.ctx.table):
            inp, match, outcome = await self._rewritten(inp, match, outcome, recorded)
        kept = self._apply(inp, outcome, match)
        self.next_action = None if self.finished else outcome.next_action
        events = await self._keep(kept, outcome)
        at = self.times[0]
        for event in events:  # streamed when the step was applied
            _stamp(event, "_at", at)
        return Applied(self.seq, before, inp, match, outcome, events)

    async def _rewritten(
        self,
        inp: Any,
        match: Match | None,
        outcome: TransitionOutcome,
        recorded: TransitionOutcome | None,
    ) -> tuple[Any, Match | None, TransitionOutcome]:
        """The step as the old output-guardrail rule leaves it (helikon.run.legacy)."""
        if recorded is not None and outcome.next_state.phase == "Done":
            return inp, match, replayed(outcome, recorded)
        if to_check(self, outcome, True):
            inp, match, outcome, _ = await checked(self, inp, match, outcome)
        return inp, match, outcome

    async def _held(self) -> None:
        """Wait while a debugger holds this run before its transition (`StepGate`); a
        stop during the wait becomes the input, keeping what the effect before it got."""
        assert self.stepper is not None
        try:
            await self.stoppable(self.stepper.before(self))
        except Stopped:
            self.next_input = stop_wins(self._stop, self.next_input)

    def transition(self, inp: Any) -> tuple[Match | None, TransitionOutcome]:
        """`transition` on `inp`, with the row it matched when something keeps it."""
        if self.listeners is None:  # no row kept
            return None, transition(self.state, inp, self.ctx)
        return matched_transition(self.state, inp, self.ctx)

    def perform(self) -> AsyncIterator[AgentEvent]:
        """Perform the next action (call the model, run tools, ...) by the loop's rules
        (`helikon.run.loop`); its result becomes `next_input`, or the run suspends for
        approval."""
        action = self.next_action or next_action_of(self.state, self.ctx)
        self.next_action = None
        self._began = _times._current.monotonic()  # `clock().monotonic()`, a call less
        observer = self._observer  # the attribute behind `observer`, read once
        observed = observer.action(action) if observer is not None else None
        if observed is None:  # no span of its own: no extra generator in the way either
            return perform(self, action)
        return self._in_span(action, observed)

    async def _in_span(self, action: NextAction, observed: Ending) -> AsyncIterator[AgentEvent]:
        """A handoff or an approval, in its span."""
        try:
            async for event in perform(self, action):
                yield event
        finally:
            observed.end(self.next_input)

    def take_input(self, inp: Any) -> None:
        """The input the action produced (the loop's rules applied): the next to apply."""
        self.next_input = inp
        began, self._began = self._began, None
        if began is not None:
            self._took = _times._current.monotonic() - began

    def record(self, inp: Any, outcome: TransitionOutcome, match: Match | None = None) -> Applied:
        """Take a transition's outcome as given (a recorded one, replayed without its chart):
        the state, the appends and the seq advance as if `apply()` had computed it. `match`,
        the row the recording names, is returned in the `Applied`; the listeners are told of
        the step without a row, as a computed one would be without listeners."""
        before, self.next_input = self.state, None
        self._apply(inp, outcome, None)
        self.next_action = None if self.finished else outcome.next_action
        at = self.times[0]
        for event in outcome.events:
            _stamp(event, "_at", at)
        return Applied(self.seq, before, inp, match, outcome, outcome.events)

    def _apply(
        self, inp: Any, outcome: TransitionOutcome, match: Match | None
    ) -> TransitionRecord | None:
        """Take the outcome and tell the listeners; the record as the journal commits it
        (redacted when the run redacts: `helikon.run.listening`), None without listeners."""
        before, self.state = self.state, outcome.next_state
        self.conversation.extend(outcome.conversation_appends)
        self.seq += 1
        self.times = (_times._current.wall(), self._took, self._timed, self._resuming)
        self._took, self._timed, self._resuming = None, (), False
        if self.listeners is None:
            return None
        record = TransitionRecord(self.seq, before, inp, outcome, match, *self.times)
        return self.listeners.transition(self, record)

    def emit(self, event: AgentEvent) -> AgentEvent:
        """An event an effect produced (not a transition): stamped with the time (`at`),
        told the listeners, then streamed."""
        _stamp(event, "_at", _times._current.wall())  # `clock().wall()`, a call less
        if self.listeners is not None:
            self.listeners.effect(self, event)
        return event
