"""The activities of a Temporal run: the effects `HelikonWorkflow` asks for, on a worker.

Each takes the records the workflow made since its last activity (`Writes`) and writes them
to the run store first (helikon.temporal.writes), then does its effect:

- `helikon_list`: lists the tools of the agent's tool sources (MCP servers) as a run
  starts, with the worker's own connected sources, as a local run lists them
  (`source_tools`); the answer is the `ListedTool`s the run keeps, so the listing lives in
  the workflow's history and a replay never lists again;
- `helikon_model`: reads the conversation from the store, calls the agent's model, answers
  the next input (a `ModelResponse`, or a `Fail` for a model error, as a local run does);
- `helikon_tool`: runs one tool call with the idempotency key a local durable run gives it
  (`{run_id}:{seq}:{call_id}`), heartbeating while it runs so a dead worker is noticed; a
  listed tool is called through the worker's own source of its name, as a resumed local
  run calls it (an error result when the source no longer offers it as recorded); a call
  that writes nothing reads the recorded listing from the run's header alone
  (`store.aheader`), not the whole run, so it costs the same at any length of the run;
- `helikon_effect`: runs a chart's effect phase's effect (`helikon.run.chart_effects`) with
  the key a local durable run gives it (`{run_id}:{seq}:{effect}`), heartbeating too;
- `helikon_guardrail`: checks the run's input (read from the store) or its final output;
- `helikon_approval`: asks the agent's `on_approval` handler about a suspension's pending
  calls, by the rules of a local run (`ask_handler`: once, failing closed), heartbeating
  while it waits;
- `helikon_write`: writes only (before a suspension, at the end, before continue-as-new);
- `helikon_conversation`, `helikon_head`: read a stored run (a handoff target starts from
  its parent's conversation; a continued workflow from its head).

The model, tool and effect activities time what they run on the monotonic clock
(`helikon.trace.times.clock`), the store's writes and reads left out, and answer it as
`took`: the workflow reads no clock, and sets it on the step whose input the answer is.

Payloads are JSON data checked on arrival (helikon.temporal.messages). A store failure
raises, so Temporal retries the activity; a store that holds another run of the id raises a
non-retryable error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from helikon.core.errors import (
    EffectFailed,
    FatalToolError,
    ModelCallFailed,
    ModelError,
    ToolFailed,
    ToolsUnavailable,
)
from helikon.core.items import ToolCall
from helikon.core.state import EffectResult, Fail
from helikon.core.tool_spec import ListedTool
from helikon.durable.store import RunStore
from helikon.models.base import ModelInput, ResponseAssembler
from helikon.run.approvals import ask_handler
from helikon.run.chart_effects import EffectContext, as_json, effects_by_name
from helikon.run.config import RunContext
from helikon.run.conversation import Conversation
from helikon.run.guardrails import tripped_input, tripped_output
from helikon.run.prepare import listed, source_tools, tools_and_handoffs
from helikon.run.spec import AgentSpec, model_of
from helikon.run.stored import model_calls
from helikon.temporal import messages as m
from helikon.temporal.registry import AgentFacts, AgentRegistry, UnknownAgent
from helikon.temporal.writes import RunDiverged, Written, write
from helikon.tools import Tool, ToolContext, execute_batch
from helikon.trace.times import clock, seconds

HEARTBEAT_SECONDS = 1.0
"""How often a running tool's activity heartbeats (its heartbeat timeout is longer)."""

T = TypeVar("T")


class HelikonActivities:
    """The activities of the runs of `registry`'s agents, writing to `store`; `deps` is
    what tools, guardrails and models get as `RunContext.deps` / `ToolContext.deps`."""

    def __init__(self, registry: AgentRegistry, store: RunStore, deps: Any = None) -> None:
        self.registry = registry
        self.store = store
        self.deps = deps

    def all(self) -> Sequence[Callable[..., Any]]:
        """Every activity, for `Worker(activities=...)`."""
        return (
            self.helikon_list,
            self.helikon_model,
            self.helikon_tool,
            self.helikon_effect,
            self.helikon_guardrail,
            self.helikon_approval,
            self.helikon_write,
            self.helikon_conversation,
            self.helikon_head,
        )

    async def _write(self, writes: m.Writes | None) -> Written | None:
        if writes is None:
            return None

        def facts_for(tools: Sequence[ListedTool], chart: str) -> AgentFacts:
            """On the run's `chart` when it is a kept version of the default chart (see
            helikon.run.chart_versions); another chart is refused by the write, as before."""
            agent, budget, config_of = writes.agent, writes.token_budget, writes.config_of
            try:
                return self.registry.facts(
                    agent, budget, chart=chart, listed=tools, config_of=config_of
                )
            except UnknownAgent:
                return self.registry.facts(agent, budget, listed=tools, config_of=config_of)

        try:
            return await write(self.store, writes, facts_for)
        except RunDiverged as exc:
            raise ApplicationError(str(exc), type="RunDiverged", non_retryable=True) from None

    async def _stored(self, run_id: str, written: Written | None) -> Written:
        """The run after the activity's write: as written, else read from the store."""
        if written is not None:
            return written
        stored = await self.store.load(run_id)
        return Written(stored.header, stored.records)

    @activity.defn
    async def helikon_write(self, data: Any) -> None:
        await self._write(m.from_payload(m.Writes, data, "helikon_write's input"))

    @activity.defn
    async def helikon_list(self, data: Any) -> Any:
        asked: m.ListTools = m.from_payload(m.ListTools, data, "helikon_list's input")
        agent = self.registry.facts(asked.agent).agent
        sourced = await source_tools(agent)
        if isinstance(sourced, ToolsUnavailable):
            return m.to_payload(m.ToolsListed(error=sourced))
        try:  # a name the agent's nested agents' tools take too, caught as a local run does
            tools_and_handoffs(agent, self.registry.agents, [tool for _, tool in sourced])
        except ValueError as exc:
            return m.to_payload(m.ToolsListed(error=ToolsUnavailable("", str(exc))))
        return m.to_payload(m.ToolsListed(listed(sourced)))

    @activity.defn
    async def helikon_model(self, data: Any) -> Any:
        call: m.ModelCall = m.from_payload(m.ModelCall, data, "helikon_model's input")
        stored = await self._stored(call.writes.run_id, await self._write(call.writes))
        config_of = call.writes.config_of  # a nested run's model settings are its root's
        facts = self.registry.facts(call.agent, listed=stored.header.tools, config_of=config_of)
        conversation = Conversation(item for record in stored.records for item in record.appends)
        request = ModelInput(
            facts.agent.instructions,
            conversation.window(),
            facts.specs if call.request.tools else (),
            call.request,
            facts.config.model_settings,
            calls_before=call.calls_before,
        )
        assembler = ResponseAssembler()
        began = clock().monotonic()
        chunks = model_of(facts.agent).stream(request)
        try:
            async for chunk in chunks:
                assembler.add(chunk)
        except ModelError as exc:  # a failed call still counts what it spent
            spent = exc.usage if exc.usage is not None else assembler.usage
            return m.to_payload(m.ModelAnswer(Fail(exc.error, (), spent), _since(began)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a model adapter's bug must not crash the run
            failure = ModelCallFailed("bad_response", f"{type(exc).__name__}: {exc}")
            failed = Fail(failure, (), assembler.usage)
            return m.to_payload(m.ModelAnswer(failed, _since(began)))
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
        response = assembler.response(facts.agent.name)
        return m.to_payload(m.ModelAnswer(response, _since(began)))

    @activity.defn
    async def helikon_tool(self, data: Any) -> Any:
        run: m.ToolRun = m.from_payload(m.ToolRun, data, "helikon_tool's input")
        facts = self.registry.facts(run.agent)
        written = await self._write(run.writes)
        tools = facts.tools
        if facts.agent.mcp_servers:  # the tools the run listed, in its header
            if written is not None:
                header = written.header
            else:
                header = await self.store.aheader(run.run_id)
            try:
                tools = await self._live(facts.agent, header.tools)
            except FatalToolError as exc:
                lost = ToolFailed(run.call.name, run.call.call_id, str(exc))
                return m.to_payload(m.ToolAnswer(fatal=lost))

        def context_for(call: ToolCall) -> ToolContext[Any]:
            return ToolContext(run.run_id, call.call_id, facts.agent.name, self.deps, run.seq)

        began = clock().monotonic()
        try:
            (result,) = await _heartbeating(execute_batch((run.call,), tools, context_for))
        except FatalToolError as exc:
            error = exc.error or ToolFailed(exc.tool, exc.call_id, str(exc))
            return m.to_payload(m.ToolAnswer(fatal=error, took=_since(began)))
        return m.to_payload(m.ToolAnswer(result, took=_since(began)))

    async def _live(self, agent: AgentSpec, recorded: Sequence[ListedTool]) -> Mapping[str, Tool]:
        """The run's tools bound to this worker's sources (`AgentRegistry.live_tools`),
        each source listed first if it has not listed in this process (a worker that
        started after the run did).

        Raises:
            FatalToolError: a source cannot list here (not connected, or its listing
                failed), as a dead connection fails a local run's call.
        """
        for source in agent.mcp_servers:
            if source.listed is None:
                try:
                    await source.list_tools()
                except Exception as exc:
                    message = f"tool source {source.name!r} cannot list its tools on this worker"
                    raise FatalToolError(f"{message}: {type(exc).__name__}: {exc}") from None
        facts = self.registry.facts(agent.name, listed=recorded)
        return self.registry.live_tools(facts)

    @activity.defn
    async def helikon_effect(self, data: Any) -> Any:
        run: m.EffectRun = m.from_payload(m.EffectRun, data, "helikon_effect's input")
        facts = self.registry.facts(run.agent)
        await self._write(run.writes)
        registered = effects_by_name(facts.agent.effects).get(run.effect)
        if registered is None:
            error = EffectFailed(run.effect, "no effect of this name is registered on the agent")
            return m.to_payload(m.EffectAnswer(error=error))
        context = EffectContext.of(run.run_id, run.seq, run.effect, run.args)
        began = clock().monotonic()
        try:
            output = await _heartbeating(registered(context))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the user's effect failed: the run fails, saying how
            error = EffectFailed(run.effect, f"raised {type(exc).__name__}: {exc}")
            return m.to_payload(m.EffectAnswer(error=error, took=_since(began)))
        took = _since(began)
        checked = as_json(run.effect, output)
        if isinstance(checked, EffectFailed):
            return m.to_payload(m.EffectAnswer(error=checked, took=took))
        return m.to_payload(m.EffectAnswer(EffectResult(run.effect, checked[0]), took=took))

    @activity.defn
    async def helikon_guardrail(self, data: Any) -> Any:
        check: m.GuardrailCheck = m.from_payload(m.GuardrailCheck, data, "helikon_guardrail")
        facts = self.registry.facts(check.agent)
        context = RunContext(self.deps)
        if check.output is not None:
            await self._write(check.writes)
            error = await tripped_output(facts.agent.output_guardrails, check.output, context)
        else:
            stored = await self._stored(check.writes.run_id, await self._write(check.writes))
            items = [item for record in stored.records for item in record.appends]
            error = await tripped_input(facts.agent.input_guardrails, items, context)
        return m.to_payload(m.GuardrailAnswer(error))

    @activity.defn
    async def helikon_approval(self, data: Any) -> Any:
        ask: m.ApprovalAsk = m.from_payload(m.ApprovalAsk, data, "helikon_approval's input")
        handler = self.registry.facts(ask.agent).agent.on_approval
        if handler is None:
            message = f"agent {ask.agent!r} has no on_approval handler on this worker"
            raise ApplicationError(message, type="RunRefused", non_retryable=True)
        await self._write(ask.writes)
        asked = ask_handler(handler, ask.pending, RunContext(self.deps), _awaited)
        return m.to_payload(m.ApprovalAnswer(await _heartbeating(asked)))

    @activity.defn
    async def helikon_conversation(self, run_id: str) -> Any:
        stored = await self.store.load(run_id)
        items = tuple(item for record in stored.records for item in record.appends)
        return m.to_payload(m.Conversation(items))

    @activity.defn
    async def helikon_head(self, run_id: str) -> Any:
        stored = await self.store.load(run_id)
        if not stored.records:
            raise ApplicationError(f"run {run_id!r} has no step stored", non_retryable=True)
        head = stored.records[-1]
        calls = model_calls(stored)
        header = stored.header
        head_ = m.Head(head.state_after, head.seq, calls, header.chart_digest, header.tools)
        return m.to_payload(head_)


def _since(began: float) -> float:
    """The seconds since `began` (the monotonic clock), as a step's time writes them."""
    return seconds(clock().monotonic() - began)


async def _heartbeating(work: Awaitable[T]) -> T:
    """`work`'s result, heartbeating while it runs, so that a dead worker is noticed; a
    cancelled activity cancels it."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait((task,), timeout=HEARTBEAT_SECONDS)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _awaited(answer: Awaitable[Any]) -> Any:
    """An approval handler's awaitable answer, awaited (the workflow's wait is stoppable)."""
    return await answer
