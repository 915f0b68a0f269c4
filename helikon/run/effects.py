"""The effects a run performs between transitions: call the model, run a batch of tools,
ask for approval, hand off. `RunEffects` holds them; `Run` (helikon.run.driver) steps.

They are the in-process side of the loop's port (`helikon.run.loop.RunPort`): the loop
dispatches each action to one of them, and each returns the input it produces (a streaming
one yields its events, then `Next(input)`). An effect stopped by `cancel()` or the deadline
raises `Stopped`, which the loop turns into the stop's input, keeping what the effect
finished. With a run store,
a batch records each call as it starts and finishes; a batch resumed after a crash reuses
the results that finished and applies the in-flight rule to the calls that had not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

from helikon.core.approvals import arguments_hash
from helikon.core.context import TransitionCtx
from helikon.core.errors import (
    EffectFailed,
    FatalToolError,
    GuardrailFailed,
    GuardrailTripped,
    ModelCallFailed,
    ModelError,
    StoreFailed,
    ToolFailed,
)
from helikon.core.events import (
    TERMINAL_EVENTS,
    AgentEvent,
    AgentUpdated,
    ReasoningDelta,
    RunSuspended,
    TokenDelta,
    ToolCallDelta,
)
from helikon.core.items import ZERO_USAGE, FinalOutput, Item, ToolCall, ToolResult, Usage
from helikon.core.state import (
    AwaitApproval,
    CallModel,
    Cancel,
    EffectResult,
    ExecuteTools,
    Fail,
    HandoffResult,
    RunEffect,
    ToolResults,
    TransitionOutcome,
)
from helikon.core.tool_spec import ToolSpec
from helikon.core.transition import Match
from helikon.durable.records import StoreError
from helikon.models.base import (
    ModelInput,
    ReasoningChunk,
    ResponseAssembler,
    TextChunk,
    ToolCallChunk,
)
from helikon.run.approvals import ask_handler
from helikon.run.chart_effects import Effect, EffectContext, as_json, effects_by_name
from helikon.run.config import RunConfig, RunContext
from helikon.run.conversation import Conversation
from helikon.run.guardrails import tripped_input, tripped_output
from helikon.run.journal import Journal
from helikon.run.lifecycle import Lifecycle
from helikon.run.loop import Next, Stopped, handoff_result, landed
from helikon.run.observing import Ending, RunObserver
from helikon.run.prepare import tool_specs
from helikon.run.spec import AgentSpec, HandoffTo, model_of
from helikon.tools import Tool, ToolContext, execute_batch
from helikon.trace import times as _times
from helikon.trace.times import CallTimes

INTERRUPTED = (
    "error: interrupted: the run stopped while this call ran, so it may have run; it is not "
    "run again (its tool is neither read_only nor idempotent)"
)
REDACTED = (
    "error: interrupted: the call's arguments were redacted when stored, so it is not run "
    "again with other arguments than the model's"
)


EFFECT_INTERRUPTED = (
    "interrupted: the run stopped while this effect ran, so it may have run; it is not run "
    "again (it is not idempotent)"
)
EFFECT_REDACTED = (
    "interrupted: the effect's arguments or result were redacted when stored, so it is not "
    "run again with other arguments, nor its result reused"
)


def effect_call_id(name: str) -> str:
    """The id an effect's record has among a step's calls in a run store."""
    return f"effect:{name}"


def dumps_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class RunToolContext(ToolContext[Any]):
    """The `ToolContext` a run gives its tools: also the run itself, for agents as tools.

    `spent` collects the usage of sub-agents run as tools; it counts toward this run.
    """

    run: RunEffects | None = None
    spent: list[Usage] = field(default_factory=list)


class RunEffects:
    """The effects of a run, its side of the loop's port (see the module docstring); `Run`
    provides the state they read and the waiting, tracing and nesting they use. None of
    them sets the run's next input: each returns (or yields last, as `Next`) the input it
    produced, and the loop hands it to `Run.take_input`."""

    agent: AgentSpec
    config: RunConfig
    ctx: TransitionCtx
    context: RunContext[Any]
    conversation: Conversation
    tools: dict[str, Tool]
    handoffs: dict[str, HandoffTo]
    run_id: str
    seq: int
    depth: int
    journal: Journal | None
    model_calls: int
    state: Any
    _stop: Any
    _lifecycle: Lifecycle
    _specs: tuple[ToolSpec, ...] | None
    observer: RunObserver | None
    _journal: Journal | None  # behind `journal` (helikon.run.listening): read on hot paths
    _observer: RunObserver | None  # behind `observer` (helikon.run.listening): read on hot paths
    _timed: CallTimes  # each call's seconds, of the batch whose results are the next input

    @property
    def usage(self) -> Usage:
        raise NotImplementedError

    async def stoppable(self, awaitable: Awaitable[Any]) -> Any:
        raise NotImplementedError

    def emit(self, event: AgentEvent) -> AgentEvent:
        raise NotImplementedError

    def exported(self, value: Any) -> Any:
        raise NotImplementedError

    async def nested(
        self, agent: AgentSpec, input: str | Sequence[Item], run_id: str
    ) -> RunEffects:
        raise NotImplementedError

    def stream(self) -> AsyncIterator[AgentEvent]:
        raise NotImplementedError

    def _move(self, to: Lifecycle) -> None:
        raise NotImplementedError

    def nesting(self, run: Any) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

    def continue_stream(self) -> None:
        raise NotImplementedError

    @property
    def stopping(self) -> Cancel | Fail | None:
        """The stop requested (`cancel()`, the deadline), None while none is."""
        stop: Cancel | Fail | None = self._stop
        return stop

    @property
    def input_guarded(self) -> bool:
        """Whether the input guardrails ran (or the run is past its first model call): a
        column of the run's lifecycle (`helikon.run.lifecycle`)."""
        guarded: bool = self._lifecycle.guarded
        return guarded

    @input_guarded.setter
    def input_guarded(self, value: bool) -> None:
        """The loop's rules set it as the input guardrails start: the run is RUNNING."""
        if value and not self._lifecycle.guarded:
            self._move(Lifecycle.RUNNING)

    @property
    def checks_input(self) -> bool:
        return "CheckingInput" in self.ctx.table.dispatch

    def transition(self, inp: Any) -> tuple[Match | None, TransitionOutcome]:
        raise NotImplementedError

    # ------------------------------------------------------------ the model

    def call_model(self, action: CallModel) -> AsyncIterator[AgentEvent | Next]:
        """One model call (`_stream`), in its span when the run has one."""
        request = ModelInput(
            self.agent.instructions,
            self.conversation.window(),
            self.tool_specs if action.request.tools else (),
            action.request,
            self.config.model_settings,
            calls_before=self.model_calls,
        )
        self.model_calls += 1
        observer = self._observer
        observed = observer.chat(request) if observer is not None else None
        if observed is None:  # no span: no extra generator in the way either
            return self._stream(request)
        return self._observed(self._stream(request), observed)

    async def _observed(
        self, stream: AsyncIterator[AgentEvent | Next], observed: Ending
    ) -> AsyncIterator[AgentEvent | Next]:
        """A model call in its span, which ends with the call's answer (or the stop)."""
        answer: Any = None
        try:
            async for item in stream:
                if isinstance(item, Next):
                    answer = item.input
                yield item
        finally:
            observed.end(answer if answer is not None else self._stop)

    async def _stream(self, request: ModelInput) -> AsyncIterator[AgentEvent | Next]:
        """One model call: its deltas as they arrive, then its response (or failure) as
        the next input."""
        assembler = ResponseAssembler()
        failed: Fail | None
        chunks = model_of(self.agent).stream(request)
        try:
            while True:
                try:
                    chunk = await self.stoppable(anext(chunks))
                except StopAsyncIteration:
                    break
                assembler.add(chunk)
                event = delta_event(chunk)
                if event is not None:
                    yield self.emit(event)
        except ModelError as exc:  # a failed call still counts what it spent
            spent = exc.usage if exc.usage is not None else assembler.usage
            failed = Fail(exc.error, (), spent)
        except (Stopped, asyncio.CancelledError):
            raise
        except Exception as exc:  # a model adapter's bug must not crash the run
            failure = ModelCallFailed("bad_response", f"{type(exc).__name__}: {exc}")
            failed = Fail(failure, (), assembler.usage)
        else:
            failed = None
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
        yield Next(failed if failed is not None else assembler.response(self.agent.name))

    async def check_input(self) -> GuardrailTripped | GuardrailFailed | None:
        """The input guardrails' verdict on the conversation so far."""
        items = self.conversation.items()
        verdict: GuardrailTripped | GuardrailFailed | None = await self.stoppable(
            tripped_input(self.agent.input_guardrails, items, self.context)
        )
        return verdict

    async def check_output(self, output: FinalOutput) -> GuardrailTripped | GuardrailFailed | None:
        """The output guardrails' verdict on a completing step's output; a result the
        store holds back is written first, since guardrails are effects (a refusal stops
        the run when the step is committed)."""
        if self.journal is not None:
            with contextlib.suppress(StoreError):
                await self.journal.flush()
        verdict: GuardrailTripped | GuardrailFailed | None = await self.stoppable(
            tripped_output(self.agent.output_guardrails, output, self.context)
        )
        return verdict

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """What the run offers the model: its tools (its tool sources' too, once it has
        prepared), then its handoffs. Fixed from the first transition on: what a trace or a
        run store records of the run's tools (the store's tool-set digest)."""
        if self._specs is None:  # built once per run, on first use
            self._specs = tool_specs(self.tools, self.handoffs)
        return self._specs

    # ------------------------------------------------------------ tools

    async def run_tools(self, action: ExecuteTools) -> Any:
        spent: list[Usage] = []
        seq = self.seq
        journal = self._journal
        known = self._settled_before(seq, action.calls) if journal is not None else {}
        to_run = tuple(call for call in action.calls if call.call_id not in known)

        def context_for(call: ToolCall) -> ToolContext[Any]:
            deps = self.context.deps
            return RunToolContext(
                self.run_id, call.call_id, self.agent.name, deps, seq, self, spent
            )

        finished: list[ToolResult] = list(known.values())
        began: dict[str, float] = {}  # each call's start (monotonic)
        timed: list[tuple[str, float]] = []  # each finished call's seconds, as they finish
        now = _times._current.monotonic  # `clock().monotonic`, a call less
        limit = self.config.parallel_tool_call_limit
        # Calls all start with the batch unless a limit holds some back: then, or when the
        # journal records each start, a call's start is taken as it starts.
        each_start = journal is not None or (limit is not None and limit < len(to_run))
        batch_began = now()

        async def started(call: ToolCall) -> None:
            if journal is not None:
                await journal.call_started(seq, call)
            began[call.call_id] = now()

        async def keep(call: ToolCall, result: ToolResult) -> None:
            timed.append((call.call_id, now() - began.get(call.call_id, batch_began)))
            finished.append(result)
            if journal is not None:  # the batch's last result rides with the next record
                last = len(finished) == len(action.calls)
                await journal.call_finished(seq, call, self.exported(result), last=last)

        try:
            ran = await self.stoppable(
                execute_batch(
                    to_run,
                    self.tools,
                    context_for,
                    limit,
                    on_start=started if each_start else None,
                    on_result=keep,
                    observe=None if self._observer is None else self._observer.tool_call,
                )
            )
        except FatalToolError as exc:
            error = exc.error or ToolFailed(exc.tool, exc.call_id, str(exc))
            return Fail(error, tuple(finished), sum(spent, ZERO_USAGE))
        except (StoreError, BaseExceptionGroup) as exc:  # a group: calls refused at once
            refused = store_error_in(exc)
            if refused is None:
                raise
            return Fail(self._refused(refused), tuple(finished), sum(spent, ZERO_USAGE))
        except Stopped:  # calls that finished keep their results and what they spent
            return landed(self._stop, ToolResults(tuple(finished), sum(spent, ZERO_USAGE)))
        finally:  # each call that ran to its end, timed, for the step its results make
            self._timed = tuple(timed) if len(timed) < 2 else in_order(to_run, dict(timed))
        by_id = {**known, **{result.call_id: result for result in ran}}
        results = tuple(by_id[call.call_id] for call in action.calls)
        return ToolResults(results, sum(spent, ZERO_USAGE))

    def _refused(self, exc: StoreError) -> StoreFailed:
        """The run's error when its store failed a write of an effect's: the run fails
        without writing more, so the store keeps it at its last committed step, to resume."""
        if self.journal is not None:
            self.journal.lost = exc
        return store_failed(exc)

    def _settled_before(self, seq: int, calls: Sequence[ToolCall]) -> dict[str, ToolResult]:
        """Results a resumed batch already has: calls that finished before the crash, and
        calls in flight at it whose tool may not run again (the in-flight rule)."""
        assert self.journal is not None
        settled: dict[str, ToolResult] = {}
        for call in calls:
            record = self.journal.calls.get((seq, call.call_id))
            if record is None:
                continue
            if record.result is not None:
                settled[call.call_id] = record.result
            elif record.arguments_hash != arguments_hash(call.arguments):
                settled[call.call_id] = ToolResult(call.call_id, REDACTED, True, "errored")
            elif not (tool := self.tools.get(call.name)) or not tool.rerunnable:
                settled[call.call_id] = ToolResult(call.call_id, INTERRUPTED, True, "errored")
        return settled

    # ------------------------------------------------------------ a chart's effects

    async def run_effect(self, action: RunEffect) -> EffectResult | Fail:
        """Run the chart's effect `action.effect`: its JSON result, or `Fail(EffectFailed)`
        when it raised, returned no JSON, is not registered, or may not run again after a
        crash. With a store, it is recorded before it starts and when it returns; a resumed
        run reuses a finished one's result (see `helikon.run.chart_effects`)."""
        name, seq = action.effect, self.seq
        registered = self.agent_effects.get(name)
        if registered is None:
            return Fail(EffectFailed(name, "no effect of this name is registered on the agent"))
        call = ToolCall(effect_call_id(name), name, dumps_json(action.args))
        journal = self.journal
        if journal is not None:
            known = self._effect_before(seq, call, registered.idempotent)
            if known is not None:
                return known
            try:
                await journal.call_started(seq, call)
            except StoreError as exc:
                return Fail(self._refused(exc))
        context = EffectContext.of(self.run_id, seq, name, action.args)
        try:
            output = await self.stoppable(registered(context))
        except (Stopped, asyncio.CancelledError):
            raise
        except Exception as exc:  # the user's effect failed: the run fails, saying how
            return Fail(EffectFailed(name, f"raised {type(exc).__name__}: {exc}"))
        checked = as_json(name, output)
        if isinstance(checked, EffectFailed):
            return Fail(checked)
        value, text = checked
        if journal is not None:
            try:
                result = self.exported(ToolResult(call.call_id, text))
                await journal.call_finished(seq, call, result)
            except StoreError as exc:
                return Fail(self._refused(exc))
        return EffectResult(name, value)

    def _effect_before(
        self, seq: int, call: ToolCall, idempotent: bool
    ) -> EffectResult | Fail | None:
        """What a resumed run knows of the effect of step `seq`: its stored result, or the
        in-flight rule's answer; None when it is to run (never started, or idempotent)."""
        assert self.journal is not None
        record = self.journal.calls.get((seq, call.call_id))
        if record is None:
            return None
        name = call.name
        if record.arguments_hash != arguments_hash(call.arguments):
            return Fail(EffectFailed(name, EFFECT_REDACTED, interrupted=True))
        if record.result is not None:
            try:
                return EffectResult(name, json.loads(record.result.content))
            except ValueError:  # its result was redacted when stored: it cannot be reused
                pass
        if idempotent:
            return None
        return Fail(EffectFailed(name, EFFECT_INTERRUPTED, interrupted=True))

    @property
    def agent_effects(self) -> dict[str, Effect]:
        return effects_by_name(self.agent.effects)

    # ------------------------------------------------------------ approvals

    async def await_decisions(self, action: AwaitApproval) -> AsyncIterator[AgentEvent | Next]:
        """The agent's `on_approval` handler's decisions; without one, the run suspends."""
        handler = self.agent.on_approval
        pending = tuple(request.bound(self.run_id, self.seq) for request in action.pending)
        if handler is None:
            self._move(Lifecycle.SUSPENDING)
            yield self.emit(RunSuspended(pending))
            return
        yield Next(await ask_handler(handler, pending, self.context, self.stoppable))

    # ------------------------------------------------------------ handoffs

    async def hand_off(self, target: AgentSpec) -> AsyncIterator[AgentEvent | Next]:
        """`target` as a nested run continuing this run's stream (its terminal event left
        out); its end as the handoff's result."""
        try:
            child = await self.nested(
                target, self.conversation.items(), f"{self.run_id}/{self.seq}"
            )
        except StoreError as exc:
            yield Next(HandoffResult(None, store_failed(exc)))
            return
        child.continue_stream()  # the target continues this stream: no RunStarted of its own
        with self.nesting(child):  # this run's stop reaches the target at once
            yield self.emit(AgentUpdated(target.name))
            async for event in child.stream():
                if event.type not in TERMINAL_EVENTS:
                    yield event
        yield Next(handoff_result(child.state, child.agent.name))


def in_order(calls: Sequence[ToolCall], timed: dict[str, float]) -> CallTimes:
    """The calls of `calls` that `timed` has, with their seconds, in the calls' order."""
    return tuple([(call.call_id, timed[call.call_id]) for call in calls if call.call_id in timed])


def store_failed(exc: StoreError) -> StoreFailed:
    """The run's error when its store refused a write (a lost lease, a disk error)."""
    return StoreFailed(type(exc).__name__, str(exc))


def store_error_in(exc: BaseException) -> StoreError | None:
    """The store error a failed tool batch raised: itself, or the first in its task group's
    exception group (calls that fail in one pass, as two finding the lease lost, raise one);
    None when the batch failed otherwise."""
    found: BaseException | None = exc
    if isinstance(exc, BaseExceptionGroup):
        found = exc.subgroup(StoreError)
        while isinstance(found, BaseExceptionGroup):
            found = found.exceptions[0]
    return found if isinstance(found, StoreError) else None


def delta_event(chunk: Any) -> AgentEvent | None:
    if type(chunk) is TextChunk:
        return TokenDelta(chunk.text)
    if type(chunk) is ToolCallChunk:
        return ToolCallDelta(chunk.call_id, chunk.arguments_delta, chunk.name)
    if type(chunk) is ReasoningChunk:
        return ReasoningDelta(chunk.text)
    return None
