"""The driver: `Run` applies one `transition` at a time and performs the action it asks for.

Theory of operation: a run holds (state, conversation, next input). `advance()` is one step:
apply `transition(state, input, ctx)`, append its items, emit its events, then perform its
`NextAction` (call the model, run tools, ask for approval, hand off), which yields the next
input. Every event of the stream comes from a step, so the stream, `collect()`, the durable
runners and the debugger all share this one engine.

Cancellation and timeouts stop the effect in flight (tasks of a tool batch are cancelled and
awaited, so none outlives the run) and are fed back as `Cancel` / `Fail(TimedOut)` inputs:
the chart decides what a cancelled run looks like, as it decides everything else.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from helikon.core.approvals import ApprovalDecision
from helikon.core.errors import (
    Cancelled,
    FatalToolError,
    GuardrailTripped,
    MaxAgentDepthExceeded,
    ModelCallFailed,
    ModelError,
    TimedOut,
    ToolFailed,
)
from helikon.core.events import (
    TERMINAL_EVENTS,
    AgentEvent,
    AgentUpdated,
    GuardrailTriggered,
    ReasoningDelta,
    RunStarted,
    RunSuspended,
    TokenDelta,
    ToolCallDelta,
)
from helikon.core.items import ZERO_USAGE, Item, ToolCall, ToolResult, Usage
from helikon.core.state import (
    TERMINAL_PHASES,
    ApprovalDecisions,
    AwaitApproval,
    CallModel,
    Cancel,
    ExecuteTools,
    Fail,
    Handoff,
    HandoffResult,
    NeedsApproval,
    NextAction,
    Start,
    ToolResults,
    TransitionOutcome,
)
from helikon.core.tool_spec import ToolSpec
from helikon.core.transition import initial_state, pending_action, transition
from helikon.models.base import (
    ModelInput,
    ReasoningChunk,
    ResponseAssembler,
    TextChunk,
    ToolCallChunk,
)
from helikon.run.approvals import ask_handler
from helikon.run.config import RunConfig, RunContext
from helikon.run.conversation import Conversation
from helikon.run.guardrails import checked_output, tripped_input
from helikon.run.prepare import as_items, tool_specs, tools_and_handoffs, transition_ctx
from helikon.run.snapshot import (
    ApprovalMismatch,
    RunSnapshot,
    check_derivable,
    check_signature,
    claim,
    sign,
    snapshot_key,
)
from helikon.run.spec import AgentSpec, check_handoff_names, joined, model_of, reachable_agents
from helikon.tools import ToolContext, execute_batch
from helikon.trace import TraceSink, TransitionRecord
from helikon.trace.guarded import GuardedSink, guarded


@dataclass(frozen=True, slots=True)
class RunToolContext(ToolContext[Any]):
    """The `ToolContext` a run gives its tools: also the run itself, for agents as tools.

    `spent` collects the usage of sub-agents run as tools; it counts toward this run.
    """

    run: Run | None = None
    spent: list[Usage] = field(default_factory=list)


class _Stopped(BaseException):
    """Internal: the effect in flight was stopped by `cancel()` or the deadline."""


class Run:
    """One run of an agent: its state, its conversation, and the step that advances it.

    Build one with `agent.run(...)` (wrapped in a `RunResultStreaming`), or directly to step
    it yourself: `await run.step()` applies one transition and performs its action.

    Its `trace` sink is kept behind a `GuardedSink`: a sink that raises is reported once and
    dropped, and never fails the run.
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
        self.next_input: Any = Start(as_items(input))
        self.pending: NextAction | None = None
        self.suspended = False
        self.started = False
        self._stop: Any = None
        self._waiting: asyncio.Task[Any] | None = None
        self._child: Run | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._guarded_input = False
        self._specs: tuple[ToolSpec, ...] | None = None

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
        run = cls(
            agent,
            context=context,
            config=config,
            run_id=snapshot.run_id,
            depth=snapshot.depth,
            trace=trace,
        )
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
        run.state = snapshot.state
        run.conversation = Conversation(snapshot.conversation)
        run.seq = snapshot.seq
        run.next_input = ApprovalDecisions(tuple(decisions)) if decisions else snapshot.next_input
        run.started = True
        run._guarded_input = True
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
        while not self.finished and not self.suspended:
            async for event in self.advance():
                yield event

    async def step(self) -> list[AgentEvent]:
        """Apply one transition and perform its action; return the events it produced."""
        return [event async for event in self.advance()]

    async def advance(self) -> AsyncIterator[AgentEvent]:
        """One step, streaming its events as they happen: `apply()`, then `perform()`.

        A new run's first step begins with `RunStarted` (and its trace's header).
        """
        if not self.started:
            self.started = True
            if self.trace is not None:
                self.trace.started(self)
            yield self._effect(RunStarted(self.agent.name, self.run_id))
        if self.next_input is None:
            if self.finished or self.suspended:
                return
            async for event in self.perform():
                yield event
            if self.next_input is None:
                return
        for event in await self.apply():
            yield event
        if not self.finished:
            async for event in self.perform():
                yield event

    async def apply(self) -> tuple[AgentEvent, ...]:
        """Apply the input already observed (`next_input`): one transition; its events.

        Raises:
            RuntimeError: there is no input to apply (`perform()` the pending action first).
        """
        if self.next_input is None:
            raise RuntimeError("no input to apply: perform() the pending action first")
        inp, self.next_input = self.next_input, None
        outcome = transition(self.state, inp, self.ctx)
        if self.agent.output_guardrails and outcome.next_state.phase == "Done":
            try:
                outcome = await self._wait(
                    checked_output(self.agent.output_guardrails, outcome, self.context)
                )
            except _Stopped:  # cancelled while the guardrail ran: the run does not complete,
                inp = _landed(self._stop, inp)  # but the answer it checked was paid for
                outcome = transition(self.state, inp, self.ctx)
        self._apply(inp, outcome)
        self.pending = None if self.finished else outcome.next_action
        return outcome.events

    async def perform(self) -> AsyncIterator[AgentEvent]:
        """Perform the pending action (call the model, run tools, ...); its result becomes
        `next_input`, or the run suspends for approval."""
        action = self.pending or pending_action(self.state, self.ctx)
        self.pending = None
        async for event in self._perform(action):
            yield event

    def record(self, inp: Any, outcome: TransitionOutcome) -> None:
        """Take a transition's outcome as given (a recorded one, replayed without its chart):
        the state, the appends and the seq advance as if `apply()` had computed it."""
        self.next_input = None
        self._apply(inp, outcome)
        self.pending = None if self.finished else outcome.next_action

    def _apply(self, inp: Any, outcome: TransitionOutcome) -> None:
        before, self.state = self.state, outcome.next_state
        self.conversation.extend(outcome.conversation_appends)
        self.seq += 1
        if self.trace is not None:
            self.trace.transition(self, TransitionRecord(self.seq, before, inp, outcome))

    def _effect(self, event: AgentEvent) -> AgentEvent:
        """An event an effect produced (not a transition): traced, then streamed."""
        if self.trace is not None:
            self.trace.effect(self, event)
        return event

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
        """Cancel the run's deadline timer, if any (the stream does this when it ends)."""
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    async def _wait(self, awaitable: Awaitable[Any]) -> Any:
        """Await an effect so that `cancel()` and the deadline can stop it."""
        if self._stop is not None:
            close = getattr(awaitable, "close", None)
            if close is not None:
                close()  # never started: close it rather than leave it unawaited
            raise _Stopped
        task = asyncio.current_task()
        self._waiting = task
        try:
            return await awaitable
        except asyncio.CancelledError:
            if self._stop is None or task is None:
                raise
            task.uncancel()
            raise _Stopped from None
        finally:
            self._waiting = None

    # ------------------------------------------------------------ effects

    async def _perform(self, action: NextAction) -> AsyncIterator[AgentEvent]:
        try:
            if isinstance(action, CallModel):
                async for event in self._call_model(action):
                    yield event
            elif isinstance(action, ExecuteTools):
                self.next_input = await self._execute_tools(action)
            elif isinstance(action, AwaitApproval):
                async for event in self._await_approval(action):
                    yield event
            elif isinstance(action, Handoff):
                async for event in self._hand_off(action):
                    yield event
        except _Stopped:
            self.next_input = self._stop
        if self._stop is not None and not isinstance(self.next_input, (Cancel, Fail)):
            # A stop requested while the effect completed wins, keeping what it finished.
            self.next_input = _landed(self._stop, self.next_input)

    async def _call_model(self, action: CallModel) -> AsyncIterator[AgentEvent]:
        if not self._guarded_input:
            self._guarded_input = True
            async for event in self._check_input():
                yield event
            if self.next_input is not None:  # a guardrail tripped or failed: no model call
                return
        request = ModelInput(
            self.agent.instructions,
            self.conversation.window(),
            self._tool_specs() if action.request.tools else (),
            action.request,
            self.config.model_settings,
        )
        async for delta in self._stream(request):
            yield delta

    async def _stream(self, request: ModelInput) -> AsyncIterator[AgentEvent]:
        """One model call: its deltas as they arrive, then its response (or failure) as
        the next input."""
        assembler = ResponseAssembler()
        chunks = model_of(self.agent).stream(request)
        try:
            while True:
                try:
                    chunk = await self._wait(anext(chunks))
                except StopAsyncIteration:
                    break
                assembler.add(chunk)
                event = _delta_event(chunk)
                if event is not None:
                    yield self._effect(event)
        except ModelError as exc:  # a failed call still counts what it spent
            spent = exc.usage if exc.usage is not None else assembler.usage
            self.next_input = Fail(exc.error, (), spent)
            return
        except (_Stopped, asyncio.CancelledError):
            raise
        except Exception as exc:  # a model adapter's bug must not crash the run
            failure = ModelCallFailed("bad_response", f"{type(exc).__name__}: {exc}")
            self.next_input = Fail(failure, (), assembler.usage)
            return
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
        self.next_input = assembler.response(self.agent.name)

    async def _check_input(self) -> AsyncIterator[AgentEvent]:
        """Run the input guardrails once, before the first model call."""
        items = self.conversation.items()
        tripped = await self._wait(tripped_input(self.agent.input_guardrails, items, self.context))
        if isinstance(tripped, GuardrailTripped):
            yield self._effect(GuardrailTriggered(tripped.guardrail, "input", tripped.message))
        if tripped is not None:
            self.next_input = Fail(tripped)

    def _tool_specs(self) -> tuple[ToolSpec, ...]:
        if self._specs is None:  # built once per run, on the first call that offers tools
            self._specs = tool_specs(self.tools, self.handoffs)
        return self._specs

    async def _execute_tools(self, action: ExecuteTools) -> Any:
        spent: list[Usage] = []

        def context_for(call: ToolCall) -> ToolContext[Any]:
            deps = self.context.deps
            return RunToolContext(self.run_id, call.call_id, self.agent.name, deps, self, spent)

        finished: list[ToolResult] = []

        async def keep(call: ToolCall, result: ToolResult) -> None:
            finished.append(result)

        try:
            results = await self._wait(
                execute_batch(
                    action.calls,
                    self.tools,
                    context_for,
                    self.config.parallel_tool_call_limit,
                    on_result=keep,
                )
            )
        except FatalToolError as exc:
            error = exc.error or ToolFailed(exc.tool, exc.call_id, str(exc))
            return Fail(error, tuple(finished), sum(spent, ZERO_USAGE))
        except _Stopped:  # calls that finished keep their results and what they spent
            return replace(self._stop, results=tuple(finished), usage=sum(spent, ZERO_USAGE))
        return ToolResults(tuple(results), sum(spent, ZERO_USAGE))

    async def _await_approval(self, action: AwaitApproval) -> AsyncIterator[AgentEvent]:
        handler = self.agent.on_approval
        pending = tuple(request.bound(self.run_id, self.seq) for request in action.pending)
        if handler is None:
            self.suspended = True
            yield self._effect(RunSuspended(pending))
            return
        self.next_input = await ask_handler(handler, pending, self.context, self._wait)

    def child(self, agent: AgentSpec, input: str | Sequence[Item], run_id: str) -> Run:
        """A run of `agent` nested in this one (a handoff target, an agent as a tool): one
        level deeper, same context and trace, and only the token budget this run has left,
        so nesting never resets turns, budget or permissions."""
        config = self.config
        if config.token_budget is not None:
            left = max(config.token_budget - self.usage.total_tokens, 1)
            config = config.with_token_budget(left)
        return Run(
            agent,
            input=input,
            context=self.context,
            config=config,
            run_id=run_id,
            depth=self.depth + 1,
            trace=self.trace,
            agents=self.agents,
        )

    async def _hand_off(self, action: Handoff) -> AsyncIterator[AgentEvent]:
        target = next(h.target for h in self.handoffs.values() if h.agent_name == action.target)
        limit = self.config.max_agent_depth
        if self.depth + 1 > limit:
            error = MaxAgentDepthExceeded(limit, target.name)
            self.next_input = HandoffResult(None, error)
            return
        child = self.child(target, self.conversation.items(), f"{self.run_id}/{self.seq}")
        child.started = True
        self._child = child
        yield self._effect(AgentUpdated(target.name))
        try:
            async for event in child.stream():
                if event.type not in TERMINAL_EVENTS:
                    yield event
        finally:
            self._child = None
        self.next_input = _handoff_result(child)

    # ------------------------------------------------------------ guardrails


def _delta_event(chunk: Any) -> AgentEvent | None:
    if type(chunk) is TextChunk:
        return TokenDelta(chunk.text)
    if type(chunk) is ToolCallChunk:
        return ToolCallDelta(chunk.call_id, chunk.arguments_delta, chunk.name)
    if type(chunk) is ReasoningChunk:
        return ReasoningDelta(chunk.text)
    return None


def _landed(stop: Cancel | Fail, observed: Any) -> Cancel | Fail:
    """`stop` as the input in place of the `observed` outcome of an effect it cut short:
    a finished tool batch keeps its results, and whatever the effect spent (a model call,
    sub-agents, a handoff target) still counts."""
    spent = getattr(observed, "usage", ZERO_USAGE)
    if isinstance(observed, ToolResults):
        return replace(stop, results=observed.results, usage=stop.usage + spent)
    return replace(stop, usage=stop.usage + spent)


def _handoff_result(child: Run) -> HandoffResult:
    state = child.state
    if state.phase == "Done":
        return HandoffResult(state.output, None, state.output.usage)
    if state.phase == "Failed":
        return HandoffResult(None, state.error, state.usage)
    reason = (
        f"handoff target {child.agent.name!r} waited for approval; a handoff cannot suspend: "
        "give the target an on_approval handler"
    )
    return HandoffResult(None, Cancelled(reason), state.usage)
