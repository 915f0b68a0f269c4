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

A debugger may hold a nested run before each of its transitions (`stepper`, a
`helikon.run.stepping.StepGate`, which nested runs take from their parent): the run waits
there, changed in nothing, while the rest of its parent's effect runs on.

Cancellation and timeouts stop the effect in flight (tasks of a tool batch are cancelled and
awaited, so none outlives the run) and are fed back as `Cancel` / `Fail(TimedOut)` inputs:
the chart decides what a cancelled run looks like, as it decides everything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any

from helikon.core.approvals import ApprovalDecision
from helikon.core.errors import TimedOut, ToolsUnavailable
from helikon.core.events import DELTAS, AgentEvent, RunFailed, RunStarted
from helikon.core.items import ZERO_USAGE, Item, Usage
from helikon.core.state import (
    TERMINAL_PHASES,
    ApprovalDecisions,
    Cancel,
    Fail,
    Failed,
    NeedsApproval,
    NextAction,
    Start,
    TransitionOutcome,
)
from helikon.core.tool_spec import ListedTool
from helikon.core.transition import (
    Match,
    initial_state,
    matched_transition,
    pending_action,
    transition,
    trip_output_guardrail,
)
from helikon.durable.records import RunHeader, RunLeased, RunNotFound, StoredRun, StoreError
from helikon.durable.store import RunStore
from helikon.durable.views import Session
from helikon.run.chart_versions import on_recorded_chart
from helikon.run.config import RunConfig, RunContext
from helikon.run.conversation import Conversation
from helikon.run.effects import RunEffects, RunToolContext, store_failed
from helikon.run.guardrails import recorded_verdict
from helikon.run.journal import (
    Journal,
    chart_of,
    forking_refusal,
    owner_id,
    status_of,
    toolset_digest,
)
from helikon.run.lifecycle import Applied, Lifecycle, Positioned
from helikon.run.loop import (
    Stopped,
    checked,
    child_budget,
    first_calls,
    perform,
    stop_wins,
    to_check,
)
from helikon.run.observing import Ending, observer_for
from helikon.run.prepare import (
    Sourced,
    as_items,
    listed,
    listed_source_tools,
    recorded_tools,
    source_tools,
    tools_and_handoffs,
    transition_ctx,
)
from helikon.run.redaction import redacted
from helikon.run.snapshot import (
    ApprovalMismatch,
    RunSnapshot,
    SnapshotMismatch,
    check_derivable,
    check_signature,
    claim,
    sign,
    snapshot_key,
)
from helikon.run.spec import AgentSpec, check_handoff_names, joined, reachable_agents
from helikon.run.stepping import Stepper
from helikon.run.stored import Claim, check_identity, fold, moved_on
from helikon.trace import TraceSink, TransitionRecord
from helikon.trace.guarded import GuardedSink, guarded

__all__ = ["Applied", "Run", "RunToolContext"]


class Run(Positioned, RunEffects):
    """One run of an agent: its state, its conversation, and the step that advances it.

    Build one with `agent.run(...)` (wrapped in a `RunResultStreaming`), or directly to step
    it yourself: `await run.step()` applies one transition and performs its action.

    Its `trace` sink is kept behind a `GuardedSink`: a sink that raises is reported once and
    dropped, and never fails the run. With `store`, every step is committed to the store
    before its effect starts (see `helikon.run.journal`).
    """

    def __init__(
        self,
        agent: AgentSpec,
        *,
        input: str | Sequence[Item] = (),
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        run_id: str | None = None,
        depth: int = 0,
        usage: Usage = ZERO_USAGE,
        trace: TraceSink | None = None,
        agents: Mapping[str, AgentSpec] | None = None,
        store: RunStore | None = None,
        parent_run_id: str | None = None,
        session: Session | None = None,
        session_items: int | None = None,
    ) -> None:
        self.agent = agent
        self.config = config or agent.config
        self.context = context or RunContext.ephemeral()
        self.run_id = run_id or uuid.uuid4().hex
        self.depth = depth
        self.trace = trace
        # The agents a handoff by name may reach: this run's, and its parent's when nested.
        reachable = reachable_agents(agent)
        self.agents = reachable if agents is None else joined(agents, reachable)
        check_handoff_names(self.agents)
        self.tools, self.handoffs = tools_and_handoffs(agent, self.agents)
        self.ctx = transition_ctx(agent, self.config, self.tools, self.handoffs)
        self.state: Any = initial_state(self.ctx, usage)
        self.conversation = Conversation()
        self.seq = 0
        # A resumed run names how many of its items its session gave; it reads none again.
        remembered = session.items() if session is not None and session_items is None else ()
        self.next_input: Any = Start((*remembered, *as_items(input)))
        self.pending: NextAction | None = None
        self.store = store
        self.parent_run_id = parent_run_id
        self.session = session
        self.session_items = len(remembered) if session_items is None else session_items
        self.journal: Journal | None = None
        self.model_calls = 0
        self._lifecycle = Lifecycle.NEW
        self._claim: Claim | None = None  # what it claims while RESUMING
        self._stop: Any = None
        self._waiting: asyncio.Task[Any] | None = None
        self._child: Run | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._specs = None
        self.listed_tools: tuple[ListedTool, ...] = ()  # from its sources, as recorded
        self.observer = observer_for(self)  # its spans (helikon.otel), None without
        self.stepper: Stepper | None = None  # a debugger holding nested runs (StepGate)

    @classmethod
    def from_snapshot(
        cls,
        agent: AgentSpec,
        snapshot: RunSnapshot,
        decisions: Sequence[ApprovalDecision] = (),
        *,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        trace: TraceSink | None = None,
        trust_unsigned: bool = False,
    ) -> Run:
        """A run that continues from `snapshot`, with approval decisions for its suspension.

        Everything is checked before anything runs (`helikon.run.snapshot`): the signature,
        the agent and chart, a state the chart and the tools' policy could have produced,
        decisions that bind to this suspension, and that it was not resumed before.

        Raises:
            SnapshotMismatch: the snapshot cannot be resumed here (the message says why).
            ApprovalMismatch: a decision does not bind to a pending call of this suspension.
        """
        agent = on_recorded_chart(agent, snapshot.chart)  # helikon.run.chart_versions
        run = cls(
            agent,
            context=context,
            config=config,
            run_id=snapshot.run_id,
            depth=snapshot.depth,
            trace=trace,
        )
        run._take_listed_tools(f"snapshot of run {snapshot.run_id}")
        key = snapshot_key(run.config.snapshot_key)
        signed = check_signature(snapshot, key, trust_unsigned=trust_unsigned)
        snapshot.check(agent.name, run.ctx.table.digest)
        snapshot.check_state({phase.name for phase in run.ctx.table.phases})
        check_derivable(snapshot, run.ctx, signed=signed)
        if decisions:
            if not isinstance(snapshot.state, NeedsApproval):
                raise ApprovalMismatch(
                    f"the run is in {snapshot.state.phase}, not waiting for approval; "
                    "decisions cannot be applied"
                )
            snapshot.check_decisions(decisions)
        claim(snapshot)
        run.position(
            state=snapshot.state,
            conversation=snapshot.conversation,
            seq=snapshot.seq,
            next_input=ApprovalDecisions(tuple(decisions)) if decisions else snapshot.next_input,
            lifecycle=Lifecycle.RUNNING,
        )
        return run

    @classmethod
    def from_stored(
        cls,
        agent: AgentSpec,
        store: RunStore,
        stored: StoredRun,
        decisions: Sequence[ApprovalDecision] = (),
        *,
        force: bool = False,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        trace: TraceSink | None = None,
        depth: int = 0,
        agents: Mapping[str, AgentSpec] | None = None,
    ) -> Run:
        """A run that continues a stored run at its last committed step.

        The run's lease is claimed, and the decisions spent, when it first steps (a second
        driver is refused then, with `RunLeased`; a decision spent before, with
        `DecisionSpent`).

        Raises:
            SnapshotMismatch: another agent, chart, tool set or record format, a run that
                ended, or a state the policy could not have produced.
            ApprovalMismatch: a decision does not bind to the suspension the run waits at.
            RunLeased: the run is a fork whose copy has not finished (`fork_stored`).
        """
        header = stored.header
        refusal = forking_refusal(header.run_id, stored.info.lease_owner)
        if refusal is not None:
            expires = stored.info.lease_expires_at or 0.0
            raise RunLeased(refusal, owner=stored.info.lease_owner or "", expires_at=expires)
        session = store.session(header.session_id) if header.session_id else None
        agent = on_recorded_chart(agent, header.chart_digest)  # chart versions: see that module
        run = cls(
            agent,
            context=context,
            config=config,
            run_id=header.run_id,
            depth=depth,
            trace=trace,
            agents=agents,
            store=store,
            parent_run_id=header.parent_run_id,
            session=session,
            session_items=header.session_items,
        )
        if header.tools:  # the tools it took from its sources, as it recorded them
            try:
                run._use_tools(recorded_tools(agent, header.tools, live=True))
            except ValueError as exc:
                raise SnapshotMismatch(f"run {header.run_id!r}: {exc}") from None
        else:
            run._take_listed_tools(f"run {header.run_id!r}")
        chart = chart_of(run.ctx.table)[0]
        check_identity(stored, agent.name, chart, toolset_digest(run.tool_specs))
        folded = fold(stored, run.ctx, decisions)
        run.position(
            state=folded.state,
            conversation=folded.conversation,
            seq=folded.seq,
            next_input=ApprovalDecisions(folded.decided) if folded.decided else None,
            model_calls=folded.model_calls,
            lifecycle=Lifecycle.RESUMING,
            claim=Claim(stored, force, tuple(decisions)),
        )
        return run

    # ------------------------------------------------------------ reading the run

    @property
    def trace(self) -> GuardedSink | None:
        """The run's trace sink, behind its guard (`.sink` is the sink you gave)."""
        return self._trace

    @trace.setter
    def trace(self, sink: TraceSink | None) -> None:
        self._trace = guarded(sink)

    @property
    def agent_name(self) -> str:
        return self.agent.name

    @property
    def usage(self) -> Usage:
        usage: Usage = self.state.usage
        return usage

    @property
    def finished(self) -> bool:
        return self.state.phase in TERMINAL_PHASES

    def snapshot(self) -> RunSnapshot:
        """The run at this transition boundary, enough to continue it later, signed with
        the run's snapshot key (`RunConfig.snapshot_key`, $HELIKON_SNAPSHOT_KEY, or this
        process's own)."""
        snapshot = RunSnapshot(
            run_id=self.run_id,
            agent=self.agent.name,
            chart=self.ctx.table.digest,
            seq=self.seq,
            depth=self.depth,
            state=self.state,
            conversation=self.conversation.items(),
            next_input=self.next_input,
        )
        return sign(snapshot, snapshot_key(self.config.snapshot_key))

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
        if self.observer is not None:
            self.observer.begin()
        if self._lifecycle is Lifecycle.NEW:
            self._move(Lifecycle.STARTED)
            started = RunStarted(self.agent.name, self.run_id)
            yield started  # at once; traced after the listing, which the trace's header records
            await self.prepare()
            if self.trace is not None:
                self.trace.started(self)
            self.emit(started)

    async def apply(self, recorded: TransitionOutcome | None = None) -> Applied:
        """Apply the input already observed (`next_input`): one transition, as `Applied`
        (the row it took, its outcome, the events the step streams).

        `recorded` is this step's outcome as a recording holds it (a debugger's replay): a
        completing step takes the output guardrails' verdict from it instead of running them
        again, since they are effects (a guardrail may call a model).

        Raises:
            RuntimeError: there is no input to apply (`perform()` the pending action first).
        """
        if self.next_input is None:
            raise RuntimeError("no input to apply: perform() the pending action first")
        if not self._lifecycle.prepared:
            await self.prepare()
        if self.stepper is not None and self.stepper.holds(self.run_id):
            await self._held()
        before, inp, self.next_input = self.state, self.next_input, None
        match, outcome = self.transition(inp)
        if recorded is not None and outcome.next_state.phase == "Done":
            error = recorded_verdict(recorded)
            if error is not None:
                outcome = trip_output_guardrail(outcome, error)
        elif to_check(self, outcome):  # the output guardrails' check (helikon.run.loop)
            inp, match, outcome, _ = await checked(self, inp, match, outcome)
        self._apply(inp, outcome, match)
        self.pending = None if self.finished else outcome.next_action
        events = await self._keep(inp, match, outcome)
        return Applied(self.seq, before, inp, match, outcome, events)

    async def _keep(
        self, inp: Any, match: Match | None, outcome: TransitionOutcome
    ) -> tuple[AgentEvent, ...]:
        """Write the step just applied: the session once the run ended, then the record."""
        try:
            self._remember()
        except StoreError as exc:  # before its last record: the run stays where it was
            return self._store_stopped(exc)
        if self.journal is not None and match is not None:
            return await self._commit(inp, match, outcome)
        return outcome.events

    def _remember(self) -> None:
        """Add what the run said to its session, once it ended: before its last record is
        committed and its terminal event streamed, so a session that cannot be written
        fails the run instead of following its end."""
        if self.session is not None and self.finished:
            items = self.conversation.items()[self.session_items :]
            redact = self.config.redact  # a session is kept in the store: redacted too
            self.session.add([redacted(item, redact) for item in items], self.run_id)

    async def _held(self) -> None:
        """Wait while a debugger holds this run before its transition (`StepGate`); a
        stop during the wait becomes the input, keeping what the effect before it got."""
        assert self.stepper is not None
        try:
            await self.stoppable(self.stepper.before(self))
        except Stopped:
            self.next_input = stop_wins(self._stop, self.next_input)

    async def prepare(self) -> None:
        """Get the tools of the agent's tool sources (`mcp_servers`), once, before the run's
        first transition (`advance()` and `apply()` await it): list them and take them into
        the run's tools, its transition context's permissions and its `tool_specs`, fixed
        from then on.

        Nothing to do without sources, for a resumed run (it takes the tools its store
        recorded, else the listings its sources hold), or a second time. What it took is
        `listed_tools`, which the run's trace header and store header record. A source that
        cannot list, or a name two tools share, makes the first input `Fail(ToolsUnavailable)`,
        so the run fails before any model call; `cancel()` and the deadline stop a listing
        as they stop any effect.
        """
        if self._lifecycle.prepared:
            return
        self._move(Lifecycle.PREPARED)
        if not self.agent.mcp_servers:
            return
        try:
            listed = await self.stoppable(source_tools(self.agent))
        except Stopped:
            self.next_input = self._stop
            return
        if isinstance(listed, ToolsUnavailable):
            self.next_input = Fail(listed)
            return
        try:
            self._use_tools(listed)
        except ValueError as exc:  # what source_tools checked, caught again in the driver
            self.next_input = Fail(ToolsUnavailable("", str(exc)))

    def _use_tools(self, sourced: Sourced) -> None:
        self.listed_tools = listed(sourced)
        tools = [tool for _, tool in sourced]
        self.tools, self.handoffs = tools_and_handoffs(self.agent, self.agents, tools)
        self.ctx = transition_ctx(self.agent, self.config, self.tools, self.handoffs)
        self._specs = None

    def take_recorded_tools(self, records: Sequence[ListedTool]) -> None:
        """Offer the tools a trace recorded from the agent's sources, as stand-ins that are
        never called (a replay: its tool results are recorded), and ask no source for any.

        Raises:
            ValueError: a tool came from a source the agent does not have, or a record is
                not a valid tool.
        """
        self._use_tools(recorded_tools(self.agent, records, live=False))
        if not self._lifecycle.prepared:
            self._move(Lifecycle.PREPARED)

    def _take_listed_tools(self, what: str) -> None:
        """A resumed run of an agent with tool sources takes the listings they hold."""
        if self.agent.mcp_servers:
            try:
                self._use_tools(listed_source_tools(self.agent))
            except ValueError as exc:
                raise SnapshotMismatch(f"{what}: {exc}") from None

    def transition(self, inp: Any) -> tuple[Match | None, TransitionOutcome]:
        """`transition` on `inp`, with the row it matched when something keeps it."""
        if self.trace is None and self.journal is None and self.observer is None:  # no row kept
            return None, transition(self.state, inp, self.ctx)
        return matched_transition(self.state, inp, self.ctx)

    def perform(self) -> AsyncIterator[AgentEvent]:
        """Perform the pending action (call the model, run tools, ...) by the loop's rules
        (`helikon.run.loop`); its result becomes `next_input`, or the run suspends for
        approval."""
        action = self.pending or pending_action(self.state, self.ctx)
        self.pending = None
        observed = self.observer.action(action) if self.observer is not None else None
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

    def record(self, inp: Any, outcome: TransitionOutcome, match: Match | None = None) -> Applied:
        """Take a transition's outcome as given (a recorded one, replayed without its chart):
        the state, the appends and the seq advance as if `apply()` had computed it. `match`,
        the row the recording names, is returned in the `Applied`; the trace and observer
        are given the step without a row, as a computed one would be without a trace."""
        before, self.next_input = self.state, None
        self._apply(inp, outcome, None)
        self.pending = None if self.finished else outcome.next_action
        return Applied(self.seq, before, inp, match, outcome, outcome.events)

    def _apply(self, inp: Any, outcome: TransitionOutcome, match: Match | None) -> None:
        before, self.state = self.state, outcome.next_state
        self.conversation.extend(outcome.conversation_appends)
        self.seq += 1
        if self.trace is not None or self.observer is not None:
            record = TransitionRecord(self.seq, before, inp, outcome, match)
            if self.observer is not None:  # it redacts what it shows itself
                self.observer.transition(record)
            if self.trace is not None:
                redact = self.config.redact
                if redact is not None:  # a trace is written as a store is: redacted
                    record = TransitionRecord(
                        self.seq,
                        redacted(before, redact),
                        redacted(inp, redact),
                        redacted(outcome, redact),
                        match,
                    )
                self.trace.transition(self, record)

    def emit(self, event: AgentEvent) -> AgentEvent:
        """An event an effect produced (not a transition): traced, kept, then streamed."""
        redact = self.config.redact
        if self.trace is not None and (redact is None or not isinstance(event, DELTAS)):
            # redacted, a trace keeps no deltas: a secret split across two passes the hook
            self.trace.effect(self, redacted(event, redact))
        if self.journal is not None:
            self.journal.effect(self.seq, event)
        return event

    # ------------------------------------------------------------ the run store

    async def open_journal(self) -> None:
        """Create the run in its store, or claim a stored run's lease and spend the
        decisions it resumes with.

        Raises:
            StoreError: `RunExists`, `RunLeased`, `DecisionSpent`, or the store failed.
        """
        assert self.store is not None
        store, redact, ttl = self.store, self.config.redact, self.config.lease_seconds
        if self._claim is not None:
            stored, force, decisions = self._claim.stored, self._claim.force, self._claim.decisions
            lease = await store.claim(self.run_id, owner_id(), ttl, force=force)
            now = await store.load(self.run_id)
            moved = moved_on(stored, now)  # by another driver, after this one read it
            if moved is not None:
                await store.release(self.run_id, lease, now.info.status)
                raise SnapshotMismatch(
                    f"run {self.run_id!r} {moved} after it was read at step "
                    f"{stored.info.seq}: resume it again to continue where it is"
                )
            self.journal = Journal.resumed(store, now, lease, redact=redact, ttl=ttl)
            if decisions:
                await self.journal.decide(self.seq, decisions)
            self._claim = None
            self._move(Lifecycle.RUNNING if self.model_calls > 0 else Lifecycle.PREPARED)
        else:
            _, chart = chart_of(self.ctx.table)
            self.journal = Journal.new(
                store, self.run_id, self._header, chart, redact=redact, ttl=ttl
            )
        self.journal.keep_alive(self._lease_lost)

    def _header(self) -> RunHeader:
        """The run's identity as its store keeps it (asked for at its first record, once
        its tool sources have listed)."""
        table = self.ctx.table
        return RunHeader(
            self.run_id,
            self.agent.name,
            table.name,
            chart_of(table)[0],
            toolset_digest(self.tool_specs),
            self.parent_run_id,
            self.session.session_id if self.session is not None else None,
            session_items=self.session_items,
            tools=self.listed_tools,
        )

    def _lease_lost(self, error: Exception) -> None:
        if isinstance(error, StoreError):
            self._halt(Fail(store_failed(error)))

    async def _commit(
        self, inp: Any, match: Match, outcome: TransitionOutcome
    ) -> tuple[AgentEvent, ...]:
        """Commit the step just applied; when the store refuses, the run stops here."""
        assert self.journal is not None
        action = outcome.next_action
        starts = first_calls(action, self.config.parallel_tool_call_limit)
        try:
            await self.journal.step(self.seq, inp, match, outcome, self.suspended, starts)
        except StoreError as exc:
            return self._store_stopped(exc)
        return outcome.events

    def _store_stopped(self, exc: StoreError) -> tuple[AgentEvent, ...]:
        """The run fails where its store failed, and writes nothing more."""
        error = self._refused(exc)
        self.state = Failed(error, self.usage)
        self.pending = None
        return (RunFailed(error),)

    async def _settle(self) -> None:
        """When the run ended or suspended: close its journal."""
        if self._lifecycle is Lifecycle.SUSPENDING:
            self._move(Lifecycle.SUSPENDED)
        elif self.finished and not self._lifecycle.closed:
            self._move(Lifecycle.ENDED)
        else:
            return
        if self.stepper is not None:
            self.stepper.ended(self)
        if self.observer is not None:
            self.observer.end()
        if self.journal is not None:
            # The stream's end is decided; if the store fails now, the lease just expires.
            with contextlib.suppress(StoreError):
                await self.journal.close(status_of(self.state.phase, self.suspended))

    async def nested(self, agent: AgentSpec, input: str | Sequence[Item], run_id: str) -> Run:
        """The run of `agent` nested in this one as `run_id` (a handoff target, an agent as
        a tool): resumed where it stopped when the store holds it, else a new `child`. Its
        spans nest in this run's."""
        child = await self._nested(agent, input, run_id)
        child.stepper = self.stepper
        if self.observer is not None:
            child.observer = self.observer.nested(child)
        return child

    async def _nested(self, agent: AgentSpec, input: str | Sequence[Item], run_id: str) -> Run:
        if self.store is not None:
            try:
                stored = await self.store.load(run_id)
            except RunNotFound:
                stored = None
            if stored is not None and stored.records:
                return await self._resume_child(agent, stored)
        child = self.child(agent, input, run_id)
        if child.store is not None:
            await child.open_journal()
        return child

    async def _resume_child(self, agent: AgentSpec, stored: StoredRun) -> Run:
        assert self.store is not None
        head = stored.records[-1].state_after
        if head.phase in TERMINAL_PHASES:  # it ended before the crash: keep its outcome
            child = Run(
                agent,
                context=self.context,
                config=self._child_config(),
                run_id=stored.header.run_id,
                depth=self.depth + 1,
                trace=self.trace,
                agents=self.agents,
                parent_run_id=self.run_id,
            )
            child.position(state=head, seq=stored.records[-1].seq, lifecycle=Lifecycle.ENDED)
            return child
        child = Run.from_stored(
            agent,
            self.store,
            stored,
            force=True,  # this run holds the parent's lease: the child's owner is gone
            context=self.context,
            config=self._child_config(),
            trace=self.trace,
            depth=self.depth + 1,
            agents=self.agents,
        )
        await child.open_journal()
        return child

    def child(self, agent: AgentSpec, input: str | Sequence[Item], run_id: str) -> Run:
        """A run of `agent` nested in this one (a handoff target, an agent as a tool): one
        level deeper, same context, trace and store, and only the token budget this run has
        left, so nesting never resets turns, budget or permissions."""
        return Run(
            agent,
            input=input,
            context=self.context,
            config=self._child_config(),
            run_id=run_id,
            depth=self.depth + 1,
            trace=self.trace,
            agents=self.agents,
            store=self.store,
            parent_run_id=self.run_id if self.store is not None else None,
        )

    def _child_config(self) -> RunConfig:
        left = child_budget(self.config, self.usage)
        return self.config if left is None else self.config.with_token_budget(left)

    # ------------------------------------------------------------ stopping

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the run: the effect in flight is cancelled and the run fails with Cancelled."""
        self._halt(Cancel(reason))

    def expire_after(self, seconds: float) -> None:
        """Fail the run with TimedOut if it has not ended after `seconds`."""
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(seconds, self._halt, Fail(TimedOut(seconds)))

    def _halt(self, stop: Cancel | Fail) -> None:
        if self.finished or self._stop is not None:
            return
        self._stop = stop
        if self._child is not None:
            self._child._halt(stop)
        if self._waiting is not None:
            self._waiting.cancel()

    def close(self) -> None:
        """Cancel the run's deadline timer, if any, and end its span (the stream does this
        when it ends)."""
        if self.observer is not None:
            self.observer.end()
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    async def stoppable(self, awaitable: Awaitable[Any]) -> Any:
        """Await an effect so that `cancel()` and the deadline can stop it."""
        if self._stop is not None:
            close = getattr(awaitable, "close", None)
            if close is not None:
                close()  # never started: close it rather than leave it unawaited
            raise Stopped
        task = asyncio.current_task()
        self._waiting = task
        try:
            return await awaitable
        except asyncio.CancelledError:
            if self._stop is None or task is None:
                raise
            task.uncancel()
            raise Stopped from None
        finally:
            self._waiting = None
