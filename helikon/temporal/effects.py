"""The workflow's effects: its side of the loop's port (`helikon.run.loop.RunPort`).

Each effect is an activity (helikon.temporal.activities) or a child workflow, awaited through
the stoppable wait (helikon.temporal.calls), and returns the input it produces: a model call
(`helikon_model`, after the input guardrails' `helikon_guardrail` on the first one), a batch
of tool calls (`helikon_tool` each, activity id `seq:call_id`, in parallel up to the run's
limit), an agent as a tool (a child workflow `{run_id}/{seq}:{call_id}`), a chart's effect
(`helikon_effect`, activity id `seq:effect:name`), the wait for approval decisions (the
`decide` update or the `decisions` signal, helikon.temporal.workflow; the agent's
`on_approval` handler, `helikon_approval`, activity id `seq:approval`), and a handoff (a
child workflow `{run_id}/{seq}` that reads this run's conversation). What a history records
is fixed by the histories recorded before: activity names, ids, order and payloads stay as
they are, or change behind `workflow.patched`.

How long an effect ran comes from its activity's answer (`took`, measured there: the
workflow reads no clock) and is set on the step its input makes (`took`): a model call's,
an effect's, and a tool batch's longest call (its calls run at once), each call's own too
(`timed`; a nested run's child workflow is not timed). An answer recorded before answers
had it reads as None.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from typing import Any, cast

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from helikon.core.approvals import ApprovalRequest
    from helikon.core.errors import (
        ApprovalHandlerFailed,
        Cancelled,
        EffectFailed,
        GuardrailFailed,
        GuardrailTripped,
        ModelCallFailed,
        describe,
    )
    from helikon.core.events import AgentEvent, AgentUpdated, RunSuspended
    from helikon.core.items import (
        ZERO_USAGE,
        FinalOutput,
        ToolCall,
        ToolResult,
        Usage,
        UserMessage,
    )
    from helikon.core.state import (
        TERMINAL_PHASES,
        ApprovalDecisions,
        AwaitApproval,
        CallModel,
        ExecuteTools,
        Fail,
        Failed,
        RunEffect,
        ToolResults,
    )
    from helikon.durable.records import EffectRecord
    from helikon.run.effects import EFFECT_INTERRUPTED, INTERRUPTED
    from helikon.run.loop import (
        Next,
        Stopped,
        child_budget,
        handoff_result,
        landed,
        too_deep,
    )
    from helikon.run.spec import AgentSpec
    from helikon.run.subagent import suspended_result
    from helikon.temporal import messages as m
    from helikon.temporal.registry import registry_for
    from helikon.trace.times import iso

# Workflow code: re-imported in the sandbox, which checks it (not passed through).
from helikon.temporal.calls import (
    AGENT_TOOL_ARGUMENTS,
    CHILD_CONFIG,
    HANDLER_ASKED,
    NESTED_STOPS,
    NESTED_SUSPENDS,
    SUSPENSION_RESETS_DEADLINE,
    TRUE_CAUSE,
    CutShort,
    WorkflowCalls,
    all_of,
    cause_of,
    interrupted,
    settle,
    too_large,
    was_cancelled,
)


class _Fatal(Exception):
    """Internal: a tool call failed the run (`FatalToolError`)."""

    def __init__(self, answer: m.ToolAnswer) -> None:
        super().__init__("fatal tool error")
        self.answer = answer


class WorkflowEffects(WorkflowCalls):
    """The effects of a run as a workflow (see the module docstring)."""

    def emit(self, event: AgentEvent) -> AgentEvent:
        """An event an effect produced, kept to be written with the run's next write."""
        self.effects.append(EffectRecord(self.seq, event, iso(workflow.now().timestamp())))
        return event

    # ------------------------------------------------------------ a chart's effects

    async def run_effect(self, action: RunEffect) -> Any:
        """A chart's effect phase: its effect as an activity (activity id `seq:effect:name`),
        retried only when it is `idempotent`; one lost with its worker fails the run,
        interrupted, as a local run resumed after a crash does."""
        name = action.effect
        registered = next((e for e in self._facts.agent.effects if e.name == name), None)
        if registered is None:
            return Fail(EffectFailed(name, "no effect of this name is registered on the agent"))
        options = self._options
        attempts = options.rerun_attempts if registered.idempotent else 1
        run = m.EffectRun(
            self._facts.agent.name, self._request.run_id, self.seq, name, self._take(), action.args
        )
        try:
            data = await self.stoppable(
                workflow.execute_activity(
                    "helikon_effect",
                    m.to_payload(run),
                    activity_id=f"{self.seq}:effect:{name}",
                    start_to_close_timeout=timedelta(seconds=options.tool_timeout),
                    heartbeat_timeout=timedelta(seconds=options.tool_heartbeat),
                    retry_policy=RetryPolicy(maximum_attempts=attempts),
                )
            )
        except ActivityError as exc:
            if attempts == 1 and interrupted(exc):
                return Fail(EffectFailed(name, EFFECT_INTERRUPTED, interrupted=True))
            return Fail(EffectFailed(name, f"failed: {cause_of(exc)}"))
        self._written(run.writes)
        answer: m.EffectAnswer = m.from_payload(m.EffectAnswer, data, "helikon_effect's answer")
        self.took = answer.took
        if answer.error is not None:
            return Fail(answer.error)
        assert answer.result is not None
        return answer.result

    # ------------------------------------------------------------ the model

    async def call_model(self, action: CallModel) -> AsyncIterator[AgentEvent | Next]:
        """The `helikon_model` activity: the model's whole answer as the next input (a
        workflow streams no deltas)."""
        facts = self._facts
        call = m.ModelCall(facts.agent.name, self._take(), action.request, self.model_calls)
        self.model_calls += 1
        try:
            answer: m.ModelAnswer = await self._activity(
                "helikon_model", call, m.ModelAnswer, self._options.model_timeout
            )
        except ActivityError as exc:
            if not too_large(exc) or not workflow.patched(TRUE_CAUSE):
                raise
            cause = f"the model's answer cannot reach the workflow: {cause_of(exc)}"
            yield Next(Fail(ModelCallFailed("bad_response", cause)))
            return
        self.took = answer.took
        yield Next(answer.input)

    async def check_input(self) -> GuardrailTripped | GuardrailFailed | None:
        """The input guardrails' verdict (`helikon_guardrail`; no activity without any)."""
        facts = self._facts
        if not facts.agent.input_guardrails:
            return None
        check = m.GuardrailCheck(facts.agent.name, self._take())
        return await self._guardrails(check)

    async def check_output(self, output: FinalOutput) -> GuardrailTripped | GuardrailFailed | None:
        """The output guardrails' verdict on a completing step's output (`helikon_guardrail`)."""
        facts = self._facts
        check = m.GuardrailCheck(facts.agent.name, self._take(), output)
        return await self._guardrails(check)

    async def _guardrails(
        self, check: m.GuardrailCheck
    ) -> GuardrailTripped | GuardrailFailed | None:
        """The `helikon_guardrail` activity's verdict: a guardrail's error or none (it
        answers with nothing else: helikon.temporal.activities)."""
        answer: m.GuardrailAnswer = await self._activity(
            "helikon_guardrail", check, m.GuardrailAnswer, self._options.model_timeout
        )
        return cast("GuardrailTripped | GuardrailFailed | None", answer.error)

    # ------------------------------------------------------------ tools

    async def run_tools(self, action: ExecuteTools) -> Any:
        """The batch's calls as `helikon_tool` activities and child workflows, in parallel
        up to the run's limit; a fatal one fails the run keeping what finished."""
        facts = self._facts
        seq = self.seq
        calls = action.calls
        if any(facts.nested(call.name) is not None for call in calls):
            await self._flush()  # a child reads nothing of ours, but its parent must exist
        finished: dict[str, ToolResult] = {}
        spent: list[Usage] = []
        timed: dict[str, float] = {}  # each call's seconds, as its activity measured
        limit = facts.config.parallel_tool_call_limit
        gate = asyncio.Semaphore(limit) if limit is not None else None
        writes = self._take()
        sent = [False]

        async def one(call: ToolCall) -> None:
            if gate is not None:
                async with gate:
                    await run(call)
            else:
                await run(call)

        async def run(call: ToolCall) -> None:
            mine = None if sent[0] else writes
            sent[0] = True
            result, usage, took = await self._tool(call, seq, mine)
            if result is not None:  # None: cut short by the batch's stop, spent
                finished[call.call_id] = result
            if took is not None:
                timed[call.call_id] = took
            spent.append(usage)

        tasks = [asyncio.ensure_future(one(call)) for call in calls]
        if not tasks:  # every call was settled without running (rejected, denied)
            return ToolResults((), ZERO_USAGE)
        try:
            await self.stoppable(all_of(tasks))
        except _Fatal as fatal:
            await settle(tasks)
            assert fatal.answer.fatal is not None
            kept = tuple(finished[c.call_id] for c in calls if c.call_id in finished)
            return Fail(fatal.answer.fatal, kept, sum(spent, ZERO_USAGE))
        except Stopped:
            await settle(tasks)
            kept = tuple(finished[c.call_id] for c in calls if c.call_id in finished)
            return landed(self._halted, ToolResults(kept, sum(spent, ZERO_USAGE)))
        finally:
            self.took = max(timed.values()) if timed else None
            self.timed = tuple([(c.call_id, timed[c.call_id]) for c in calls if c.call_id in timed])
        return ToolResults(tuple(finished[c.call_id] for c in calls), sum(spent, ZERO_USAGE))

    async def _tool(
        self, call: ToolCall, seq: int, writes: m.Writes | None
    ) -> tuple[ToolResult | None, Usage, float | None]:
        """A call's result (None: cut short), what it spent, and the seconds it ran as its
        activity measured (None when not answered by one)."""
        facts = self._facts
        nested = facts.nested(call.name)
        if nested is not None:
            return (*await self._agent_tool(call, nested, seq), None)
        tool = facts.tools.get(call.name)
        options = self._options
        attempts = options.rerun_attempts if tool is not None and tool.rerunnable else 1
        run = m.ToolRun(facts.agent.name, self._request.run_id, seq, call, writes)
        handle = workflow.start_activity(
            "helikon_tool",
            m.to_payload(run),
            activity_id=f"{seq}:{call.call_id}",
            start_to_close_timeout=timedelta(seconds=options.tool_timeout),
            heartbeat_timeout=timedelta(seconds=options.tool_heartbeat),
            retry_policy=RetryPolicy(maximum_attempts=attempts),
        )
        try:
            data = await handle
        except asyncio.CancelledError:
            # A stop delivered with this call's completion: the call ran, so it keeps its
            # result (a stop keeps finished work), as a local batch does.
            if not handle.done() or handle.cancelled() or handle.exception() is not None:
                raise
            data = handle.result()
        except ActivityError as exc:
            if was_cancelled(exc):
                raise
            content = f"error: the call failed: {cause_of(exc)}"
            if attempts == 1 and interrupted(exc):
                content = INTERRUPTED
            return ToolResult(call.call_id, content, True, "errored"), ZERO_USAGE, None
        if writes is not None:
            self._written(writes)
        answer: m.ToolAnswer = m.from_payload(m.ToolAnswer, data, "helikon_tool's answer")
        if answer.fatal is not None:
            raise _Fatal(answer)
        assert answer.result is not None
        return answer.result, answer.usage, answer.took

    async def _agent_tool(
        self, call: ToolCall, agent: AgentSpec, seq: int
    ) -> tuple[ToolResult | None, Usage]:
        """An agent as a tool: a child workflow one level deeper, sharing the budget. A call
        its tool's schema refuses gets the schema check's error result before anything else
        is checked, as in process (`Tool.invoke` checks before the tool runs)."""
        invalid = self._facts.tools[call.name].invalid_arguments(call)  # as in process, first
        if invalid is not None and workflow.patched(AGENT_TOOL_ARGUMENTS):
            return invalid, ZERO_USAGE
        request = self._request
        error = too_deep(request.depth, self._facts.config, agent.name)
        if error is not None:
            raise _Fatal(m.ToolAnswer(fatal=error))
        try:  # arguments the schema takes; before the patch, the check of its own
            text = json.loads(call.arguments)["input"]
            if not isinstance(text, str):
                raise TypeError("input is not a string")
        except (ValueError, KeyError, TypeError) as exc:
            content = f"error: {call.name} takes {{'input': text}}: {type(exc).__name__}: {exc}"
            return ToolResult(call.call_id, content, True, "errored"), ZERO_USAGE
        child = self._child_request(f"{request.run_id}/{seq}:{call.call_id}", agent)
        child = replace(child, input=(UserMessage(text),))
        try:
            outcome = await self._child(child)
        except CutShort as short:  # its end is no result; what it spent counts
            ended = await self._ended(child.run_id, short.data)
            return None, ended.usage
        state: Any = outcome.state
        if state.phase == "Failed":
            content = f"error: {agent.name} failed: {describe(state.error)}"
            return ToolResult(call.call_id, content), outcome.usage  # as the tool returns it
        if state.phase not in TERMINAL_PHASES:  # it ended at its suspension
            return ToolResult(call.call_id, suspended_result(agent.name)), outcome.usage
        output = state.output
        text = json.dumps(output.value) if output.value is not None else output.text or ""
        return ToolResult(call.call_id, text), outcome.usage

    def _child_request(self, run_id: str, agent: AgentSpec) -> m.RunRequest:
        request = self._request
        budget = child_budget(self._facts.config, self.state.usage)
        digest = registry_for(self._queue).facts(agent.name).digest
        root = request.config_of or request.agent  # its config is every nested run's
        return m.RunRequest(
            run_id,
            agent.name,
            digest,
            depth=request.depth + 1,
            parent_run_id=request.run_id,
            token_budget=budget,
            deadline=self.deadline,
            task_queue=self._queue,
            timeout=self._timeout,
            config_of=root if workflow.patched(CHILD_CONFIG) else "",
        )

    async def _child(self, child: m.RunRequest) -> m.RunOutcome:
        """The end of the nested run `child` as a child workflow, awaited to it
        (`nested_end`); before the `NESTED_STOPS` patch, awaited stoppably, a replay of such a
        history's child cancelled by the deadline without its reason."""
        try:
            if workflow.patched(NESTED_STOPS):
                data = await self.nested_end(child)
            else:
                data = await self.stoppable(
                    workflow.execute_child_workflow(
                        m.WORKFLOW, m.to_payload(child), id=child.run_id
                    )
                )
        except ChildWorkflowError as exc:
            if was_cancelled(exc):
                return await self._cancelled_child(child.run_id)
            raise ApplicationError(
                f"nested run {child.run_id!r} failed as a workflow: {cause_of(exc)}",
                non_retryable=True,
            ) from None
        return await self._ended(child.run_id, data)

    async def _ended(self, run_id: str, data: Any) -> m.RunOutcome:
        """How nested run `run_id` ended: its workflow's result `data`, or, None, as its
        store holds it (its workflow ended Canceled)."""
        if data is None:
            return await self._cancelled_child(run_id)
        outcome: m.RunOutcome = m.from_payload(m.RunOutcome, data, "a child workflow's result")
        return outcome

    async def _cancelled_child(self, run_id: str) -> m.RunOutcome:
        """How a nested run whose workflow ended Canceled ended: its head in the store (it
        wrote its end before it ended). One with no end stored (stopped before it wrote
        one, or its store unreadable) ended `Failed(Cancelled)`, spending what is stored."""
        options = self._options
        try:
            data = await workflow.execute_activity(
                "helikon_head",
                run_id,
                start_to_close_timeout=timedelta(seconds=options.store_timeout),
                retry_policy=RetryPolicy(maximum_attempts=options.rerun_attempts),
            )
            head: m.Head = m.from_payload(m.Head, data, "helikon_head's answer")
        except (ActivityError, m.PayloadError):
            return m.RunOutcome(run_id, Failed(Cancelled("cancelled")), 0)
        if head.state.phase not in TERMINAL_PHASES:
            return m.RunOutcome(run_id, Failed(Cancelled("cancelled"), head.state.usage), head.seq)
        return m.RunOutcome(run_id, head.state, head.seq)

    # ------------------------------------------------------------ approvals

    async def await_decisions(self, action: AwaitApproval) -> AsyncIterator[AgentEvent | Next]:
        """The run's suspension, written, then the decisions the `decide` update or the
        `decisions` signal brings (helikon.temporal.workflow checks them); or, when the
        agent has an `on_approval` handler, its decisions (`HANDLER_ASKED`). The deadline
        does not run while the run waits, and restarts once they come, as a local run's
        timeout counts afresh when it is resumed (`SUSPENSION_RESETS_DEADLINE`). A nested
        run waits for none: it ends at its suspension, as a local one does (no input:
        `NESTED_SUSPENDS`)."""
        run_id = self._request.run_id
        pending = tuple(request.bound(run_id, self.seq) for request in action.pending)
        if self._facts.agent.on_approval is not None and workflow.patched(HANDLER_ASKED):
            yield Next(await self._handler_decides(pending))
            return
        self.pending = pending
        self.decisions = None
        yield self.emit(RunSuspended(self.pending))
        # A nested run cannot suspend its caller: it ends here, its lease released.
        ends = self._request.parent_run_id is not None and workflow.patched(NESTED_SUSPENDS)
        await self._flush(suspended=True, released=ends)
        if ends:
            self.pending = ()
            return
        resets = workflow.patched(SUSPENSION_RESETS_DEADLINE)  # no deadline while it waits
        try:
            decided = workflow.wait_condition(lambda: self.decisions is not None)
            await self.stoppable(decided, timed=not resets)
        finally:
            self.pending = ()
        if resets:
            self._restart_deadline()
        decisions, self.decisions = self.decisions, None
        assert decisions is not None
        yield Next(ApprovalDecisions(decisions))

    async def _handler_decides(self, pending: tuple[ApprovalRequest, ...]) -> Any:
        """The agent's `on_approval` handler's decisions on `pending`, or the `Fail` it ends
        the run with, asked in the `helikon_approval` activity (id `seq:approval`), stoppably
        and once, as a local run asks it: a handler whose activity failed (its worker lost)
        fails the run `ApprovalHandlerFailed`, never approving."""
        options = self._options
        ask = m.ApprovalAsk(self._facts.agent.name, self._take(), pending)
        try:
            data = await self.stoppable(
                workflow.execute_activity(
                    "helikon_approval",
                    m.to_payload(ask),
                    activity_id=f"{self.seq}:approval",
                    start_to_close_timeout=timedelta(seconds=options.tool_timeout),
                    heartbeat_timeout=timedelta(seconds=options.tool_heartbeat),
                    retry_policy=RetryPolicy(maximum_attempts=1),
                )
            )
        except ActivityError as exc:
            call = pending[0].call
            cause = f"its activity failed: {cause_of(exc)}"
            return Fail(ApprovalHandlerFailed(call.call_id, call.name, cause))
        self._written(ask.writes)
        answer: m.ApprovalAnswer = m.from_payload(m.ApprovalAnswer, data, "helikon_approval")
        return answer.input

    # ------------------------------------------------------------ handoffs

    async def hand_off(self, target: AgentSpec) -> AsyncIterator[AgentEvent | Next]:
        """`target` as a child workflow reading this run's conversation from the store
        (written first); its end as the handoff's result."""
        yield self.emit(AgentUpdated(target.name))
        await self._flush()
        child = self._child_request(f"{self._request.run_id}/{self.seq}", target)
        child = replace(child, from_parent=True)
        outcome = await self._child(child)
        yield Next(handoff_result(outcome.state, target.name))
