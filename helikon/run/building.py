"""Building a run: what a run holds, and the ways to build one: new, from a snapshot, from a
run store, or nested in another run. `Built` holds them; `Run` (helikon.run.driver) is one.

Theory of operation: `__init__` builds a new run of an agent at its chart's initial state,
its first input `Start` (the session's items, then the input: the items are read before the
first transition, by `prepare`, through the store's async read, so no store IO runs on the
event loop). Every other run is built the
same way and then positioned (`Run.position`, `helikon.run.lifecycle`) where it continues:
`from_snapshot` at a snapshot's transition boundary, once the snapshot is checked
(`helikon.run.snapshot`); `from_stored` at a stored run's last committed step, RESUMING
until its first step claims the lease (`helikon.run.journaling`), once the stored run is
checked and folded (`helikon.run.stored`). Both continue on the chart they were recorded
on (`helikon.run.chart_versions`). A run nested in another (a handoff target, an agent as a
tool: `nested`, `child`) is one level deeper, shares its parent's context, trace, store,
in-process listeners (`helikon.run.listening`) and reachable agents, and gets only the
token budget its parent has left (the loop's rule, `helikon.run.loop.child_budget`); the
store may hold it already, to resume.
`snapshot()`, the inverse of `from_snapshot`, is here too.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Self

from helikon.core.approvals import ApprovalDecision
from helikon.core.items import ZERO_USAGE, Item, Usage
from helikon.core.state import (
    TERMINAL_PHASES,
    ApprovalDecisions,
    Fail,
    NeedsApproval,
    NextAction,
    Start,
)
from helikon.core.tool_spec import ListedTool
from helikon.core.transition import initial_state
from helikon.durable.records import RunLeased, RunNotFound, StoredRun, StoreError
from helikon.durable.store import RunStore
from helikon.durable.views import Session
from helikon.run.chart_versions import on_recorded_chart
from helikon.run.config import RunConfig, RunContext
from helikon.run.conversation import Conversation
from helikon.run.effects import RunEffects, store_failed
from helikon.run.journal import chart_of, forking_refusal, toolset_digest
from helikon.run.journaling import Journaled
from helikon.run.lifecycle import Lifecycle, Positioned
from helikon.run.listening import Listened
from helikon.run.loop import Stopped, child_budget
from helikon.run.observing import observer_for
from helikon.run.prepare import as_items, recorded_tools, tools_and_handoffs, transition_ctx
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
from helikon.run.stopping import Stoppable
from helikon.run.stored import Claim, check_identity, fold
from helikon.run.tooling import Tooled
from helikon.trace import TraceSink
from helikon.trace.times import CallTimes, Times

__all__ = ["Built"]


class Built(Listened, Journaled, Tooled, Stoppable, Positioned, RunEffects):
    """A run as built (see the module docstring): what it holds, the ways to build one, and
    what it is made of: its listeners (`Listened`), its store side (`Journaled`), how it
    takes its tools (`Tooled`), how it stops (`Stoppable`), where it is (`Positioned`) and
    its effects (`RunEffects`). `Run` adds the step."""

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
        # The agents a handoff by name may reach: this run's, and its parent's when nested.
        reachable = reachable_agents(agent)
        self.agents = reachable if agents is None else joined(agents, reachable)
        check_handoff_names(self.agents)
        self.tools, self.handoffs = tools_and_handoffs(agent, self.agents)
        self.ctx = transition_ctx(agent, self.config, self.tools, self.handoffs)
        self.state: Any = initial_state(self.ctx, usage)
        self.conversation = Conversation()
        self.seq = 0
        self.next_input: Any = Start(as_items(input))
        self.next_action: NextAction | None = None
        self.store = store
        self.parent_run_id = parent_run_id
        self.session = session
        # A new run reads its session's items before its first transition (`prepare`); a
        # resumed one names how many its session gave, and reads none again.
        self.session_items = session_items or 0
        self._session_unread = session is not None and session_items is None
        self.model_calls = 0
        self._lifecycle = Lifecycle.NEW
        self._claim: Claim | None = None  # what it claims while RESUMING
        self._stop: Any = None
        self._waiting: asyncio.Task[Any] | None = None
        self._in_flight: list[Built] = []  # the handoff target, agents as tools, in flight
        self._deadline: asyncio.TimerHandle | None = None
        self._specs = None
        self.listed_tools: tuple[ListedTool, ...] = ()  # from its sources, as recorded
        # its trace, its spans (helikon.otel; None without) and, later, its other listeners
        self._listened(trace, observer_for(self))
        # Its times (helikon.trace.times), set here so the instance's attributes are
        # all made at once: the last step's (`Times`), the effect in flight's start, what
        # the next step's record says of the effect before it and of a resumption.
        self.times: Times = (0.0, None, (), False)
        self._began: float | None = None
        self._took: float | None = None
        self._timed: CallTimes = ()
        self._resuming = False

    async def prepare(self) -> None:
        """Prepare the run before its first transition (`advance()` and `apply()` await
        it): a new run with a session reads the session's items (`_read_session`), then
        takes its tools (`Tooled.prepare`)."""
        if self._session_unread and not await self._read_session():
            self._move(Lifecycle.PREPARED)  # its first input stops it: nothing to list for
            return
        await super().prepare()

    async def _read_session(self) -> bool:
        """Read a new run's session items, once, through the store's async read (off the
        event loop): they begin its first input, before the run's own. False when the read
        ended the run's start instead: stopped (a cancel, the deadline), or a store that
        cannot read it, which fails the run with `StoreFailed` before any model call."""
        assert self.session is not None and isinstance(self.next_input, Start)
        self._session_unread = False
        try:
            remembered = await self.stoppable(self.session.aitems())
        except Stopped:
            self.next_input = self._stop
            return False
        except StoreError as exc:
            self.next_input = Fail(store_failed(exc))
            return False
        self.session_items = len(remembered)
        self.next_input = Start((*remembered, *self.next_input.items))
        return True

    @property
    def pending(self) -> NextAction | None:
        """Deprecated: `next_action` (the glossary's word; "pending" is an approval's)."""
        warnings.warn("Run.pending was renamed Run.next_action", DeprecationWarning, stacklevel=2)
        return self.next_action

    @pending.setter
    def pending(self, action: NextAction | None) -> None:
        warnings.warn("Run.pending was renamed Run.next_action", DeprecationWarning, stacklevel=2)
        self.next_action = action

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
    ) -> Self:
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
            resumed=True,
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
    ) -> Self:
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
            resumed=True,
        )
        return run

    # ------------------------------------------------------------ reading the run

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

    async def nested(self, agent: AgentSpec, input: str | Sequence[Item], run_id: str) -> Self:
        """The run of `agent` nested in this one as `run_id` (a handoff target, an agent as
        a tool): resumed where it stopped when the store holds it, else a new `child`. Its
        spans nest in this run's."""
        child = await self._nested(agent, input, run_id)
        child.listen_as(self, self.observer.nested(child) if self.observer is not None else None)
        return child

    async def _nested(self, agent: AgentSpec, input: str | Sequence[Item], run_id: str) -> Self:
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

    async def _resume_child(self, agent: AgentSpec, stored: StoredRun) -> Self:
        assert self.store is not None
        head = stored.records[-1].state_after
        if head.phase in TERMINAL_PHASES:  # it ended before the crash: keep its outcome
            child = type(self)(
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
        child = type(self).from_stored(
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

    def child(self, agent: AgentSpec, input: str | Sequence[Item], run_id: str) -> Self:
        """A run of `agent` nested in this one (a handoff target, an agent as a tool): one
        level deeper, same context, trace and store, and only the token budget this run has
        left, so nesting never resets turns, budget or permissions."""
        return type(self)(
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
