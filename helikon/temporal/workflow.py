"""`HelikonWorkflow`: a run as a Temporal workflow, driving the same pure `transition`.

Theory of operation: the workflow id is the run id. The workflow finds its agent in the
worker's registry (by name, the chart's digest checked). An agent with tool sources (MCP
servers) has them listed by an activity (`helikon_list`, activity id `0:list`) before the
first transition, as a local run lists them; the run's facts (transition context, offered
specs, tool-set digest) are derived from the agent's own tools and the listed ones, which
ride to the store with the run's first write, so a replay or a continued workflow never
lists again. Then the workflow loops as the local driver does: apply one `transition` to
(state, input) over the agent's compiled table, keep the record, perform the action the
outcome asks for as activities (helikon.temporal.activities), whose answer is the next
input. The workflow holds the state, never the conversation: the steps ride on the next
activity's input and are written to the run store, where the model activity reads the
conversation, so a model call's payload is the appends since the last call and the history
grows linearly (bench/temporal.py).

Approvals: a suspension waits for the `decide` update (a validator refuses decisions that
do not bind to the pending calls of this suspension, by call id and arguments hash, or come
a second time) or the `decisions` signal (fire and forget: a refused one is logged). The
`current` query says where the run is. Handoffs and agents as tools are child workflows
(ids `{run_id}/{seq}` and `{run_id}/{seq}:{call_id}`, as a local run's nested ids), one level
deeper, with only the token budget the root has left. Cancelling the workflow, or reaching
`RunConfig.timeout`, stops the effect in flight and feeds `Cancel` / `Fail(TimedOut)`
through the chart, which decides how the run ends; the workflow then completes with it,
except a run the workflow's cancellation ended `Failed(Cancelled)`: once its end is
written, that workflow ends Canceled (its outcome in the memo, `OUTCOME_MEMO`), as Temporal
operators expect, and a parent reads a Canceled child's end from the store.
Continue-as-new, when Temporal suggests it, carries only ids and the seq: the next run
reads its state from the store.

A custom chart's effect phase (`RunEffect`) is an activity too, `helikon_effect`, retried
only when the effect is `idempotent`. A call not retried that failed with a cause other
than its worker's loss (Temporal refused its result) tells that cause rather than
"interrupted" (`TRUE_CAUSE`); a model answer Temporal refuses is not asked for again,
and fails the run saying why. Payloads of 256 KiB or more reach the workflow whole, from
the run store: the worker's data converter fetches them (helikon.temporal.payloads), and
the history holds their references. An action this module does not know fails the
workflow closed.

Driver changes that alter what a workflow schedules must be guarded with
`workflow.patched(...)` so that histories recorded before replay unchanged (the replay test
in tests/ fails otherwise); a changed chart runs on a new task queue (docs/howto/temporal.md).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
)
from temporalio.exceptions import TimeoutError as TemporalTimeout

with workflow.unsafe.imports_passed_through():
    from helikon.core.approvals import ApprovalDecision, ApprovalRequest
    from helikon.core.errors import (
        Cancelled,
        EffectFailed,
        GuardrailTripped,
        MaxAgentDepthExceeded,
        ModelCallFailed,
        TimedOut,
        ToolsUnavailable,
        describe,
    )
    from helikon.core.events import AgentUpdated, GuardrailTriggered, RunStarted, RunSuspended
    from helikon.core.items import ZERO_USAGE, ToolCall, ToolResult, Usage, UserMessage
    from helikon.core.state import (
        TERMINAL_PHASES,
        ApprovalDecisions,
        AwaitApproval,
        CallModel,
        Cancel,
        ExecuteTools,
        Fail,
        Failed,
        Handoff,
        HandoffResult,
        NeedsApproval,
        NextAction,
        RunEffect,
        Start,
        ToolResults,
    )
    from helikon.core.tool_spec import ListedTool
    from helikon.core.transition import (
        initial_state,
        matched_transition,
        pending_action,
        trip_output_guardrail,
    )
    from helikon.durable.records import EffectRecord, step_record
    from helikon.run.effects import EFFECT_INTERRUPTED, INTERRUPTED
    from helikon.run.loop import landed
    from helikon.run.snapshot import ApprovalMismatch, RunSnapshot
    from helikon.run.spec import AgentSpec
    from helikon.temporal import messages as m
    from helikon.temporal.options import TemporalOptions
    from helikon.temporal.registry import AgentFacts, UnknownAgent, registry_for


CANCELED = "helikon-cancelled-run-ends-canceled"
"""The patch under which a run the workflow's cancellation ended ends its workflow Canceled
(histories recorded before it completed such a workflow normally, and still replay so)."""


TRUE_CAUSE = "helikon-refused-call-tells-its-cause"
"""The patch under which a call that is not run again, failed for a cause other than its
worker's loss (a result Temporal refused), tells that cause rather than "interrupted"
(histories recorded before it said "interrupted", and still replay so)."""


PAYLOADS_TOO_LARGE = "PayloadsTooLarge"
"""The type of the failure the Temporal SDK gives an activity whose answer is over
Temporal's payload limit (`CLAIM_THRESHOLD` keeps a helikon worker's answers under it)."""


class _Stopped(Exception):
    """Internal: the effect in flight was stopped (cancel, deadline)."""


class _Fatal(Exception):
    """Internal: a tool call failed the run (`FatalToolError`)."""

    def __init__(self, answer: m.ToolAnswer) -> None:
        super().__init__("fatal tool error")
        self.answer = answer


@workflow.defn(name=m.WORKFLOW)
class HelikonWorkflow:
    """One run (see the module docstring). Start it with a `RunRequest` as JSON data."""

    def __init__(self) -> None:
        self.request: m.RunRequest | None = None
        self.facts: AgentFacts | None = None
        self.state: Any = None
        self.seq = 0
        self.model_calls = 0
        self.guarded_input = False
        self.steps: list[m.Step] = []
        self.effects: list[EffectRecord] = []
        self.create = False
        self.pending: tuple[ApprovalRequest, ...] = ()
        self.decisions: tuple[ApprovalDecision, ...] | None = None
        self.stop: Cancel | Fail | None = None
        self.deadline = 0.0

    # ------------------------------------------------------------ the run

    @workflow.run
    async def run(self, data: Any) -> Any:
        request = self._start(data)
        facts = self._facts
        next_input: Any
        if request.seq == 0:
            next_input = await self._new(request)
        else:
            head: m.Head = await self._read("helikon_head", request.run_id, m.Head)
            if head.chart_digest != facts.digest:
                raise _refused(
                    f"run {request.run_id!r} ran on chart {head.chart_digest[:12]}, but this "
                    f"worker's agent runs chart {facts.digest[:12]}: it cannot continue here"
                )
            if head.tools:
                self.facts = self._facts_with(head.tools)
            self.state, self.seq, self.model_calls = head.state, head.seq, head.model_calls
            self.guarded_input = head.model_calls > 0
            next_input = None
        while True:
            if next_input is not None:
                action = await self._apply(next_input)
                if self.state.phase in TERMINAL_PHASES:
                    break
                if not isinstance(action, AwaitApproval) and self._should_continue():
                    await self._flush()
                    if self.stop is None:  # a cancel during the write: stop here instead
                        workflow.continue_as_new(m.to_payload(self._continued()))
            else:
                action = pending_action(self.state, facts.ctx)
            next_input = await self._perform(action)
        await self._flush()
        ended = m.to_payload(m.RunOutcome(request.run_id, self.state, self.seq))
        if self._cancelled() and workflow.patched(CANCELED):
            workflow.upsert_memo({m.OUTCOME_MEMO: ended})
            raise asyncio.CancelledError(describe(self.state.error))
        return ended

    def _cancelled(self) -> bool:
        """Whether the run ended `Failed(Cancelled)` with its workflow cancelled (a cancel
        request from the server: the run's own Cancel input, or a nested run it waited on
        that ended so with it), so the workflow ends Canceled rather than Completed."""
        state = self.state
        return (
            isinstance(state, Failed)
            and isinstance(state.error, Cancelled)
            and workflow.cancellation_reason() is not None
        )

    def _start(self, data: Any) -> m.RunRequest:
        try:
            request: m.RunRequest = m.from_payload(m.RunRequest, data, "the workflow's input")
        except m.PayloadError as exc:
            raise _refused(str(exc)) from None
        info = workflow.info()
        if request.run_id != info.workflow_id:
            raise _refused(
                f"the workflow id {info.workflow_id!r} is not the run id {request.run_id!r}: "
                "start a run with its run id as the workflow id"
            )
        try:
            registry = registry_for(request.task_queue or info.task_queue)
            self.facts = registry.facts(request.agent, request.token_budget, chart=request.chart)
        except UnknownAgent as exc:
            raise _refused(str(exc)) from None
        self.request = request
        timeout = self.facts.config.timeout
        if request.deadline:
            self.deadline = request.deadline
        elif timeout is not None:
            self.deadline = workflow.now().timestamp() + timeout
        return request

    async def _new(self, request: m.RunRequest) -> Any:
        facts = self._facts
        self.state = initial_state(facts.ctx)
        self.create = True
        items = request.input
        if request.from_parent and request.parent_run_id is not None:
            conversation: m.Conversation = await self._read(
                "helikon_conversation", request.parent_run_id, m.Conversation
            )
            items = conversation.items
        else:
            self.effects.append(EffectRecord(0, RunStarted(facts.agent.name, request.run_id)))
        if facts.agent.mcp_servers:
            unlisted = await self._list_tools()
            if unlisted is not None:
                return unlisted
        return Start(items)

    async def _list_tools(self) -> Cancel | Fail | None:
        """List the agent's tool sources (the `helikon_list` activity, retried: listing
        changes nothing) and take the run's facts from what they offer; or the input the
        run fails with instead of starting, as a local run's: `Fail(ToolsUnavailable)`,
        or the stop (cancel, deadline) that ended the listing."""
        options = self._options
        try:
            data = await self._wait(
                workflow.execute_activity(
                    "helikon_list",
                    m.to_payload(m.ListTools(self._facts.agent.name)),
                    activity_id="0:list",
                    start_to_close_timeout=timedelta(seconds=options.list_timeout),
                    retry_policy=RetryPolicy(maximum_attempts=options.rerun_attempts),
                )
            )
        except _Stopped:
            return self._halted
        except ActivityError as exc:
            return Fail(ToolsUnavailable("", f"listing the tools failed: {_cause(exc)}"))
        answer: m.ToolsListed = m.from_payload(m.ToolsListed, data, "helikon_list's answer")
        if answer.error is not None:
            return Fail(answer.error)
        self.facts = self._facts_with(answer.tools)
        self.state = initial_state(self.facts.ctx)
        return None

    def _facts_with(self, tools: Sequence[ListedTool]) -> AgentFacts:
        """The run's facts with the tools it listed from its sources."""
        request = self._request
        try:
            return registry_for(self._queue).facts(
                request.agent, request.token_budget, listed=tools
            )
        except UnknownAgent as exc:
            raise _refused(str(exc)) from None

    @property
    def _queue(self) -> str:
        """The task queue whose registry this run's agents are in (the request names it:
        a replay runs on a task queue of its own)."""
        return self._request.task_queue or workflow.info().task_queue

    @property
    def _facts(self) -> AgentFacts:
        assert self.facts is not None
        return self.facts

    @property
    def _request(self) -> m.RunRequest:
        assert self.request is not None
        return self.request

    def _should_continue(self) -> bool:
        info = workflow.info()
        limit = self._options.continue_after_events
        long = limit is not None and info.get_current_history_length() >= limit
        return (long or info.is_continue_as_new_suggested()) and workflow.all_handlers_finished()

    @property
    def _options(self) -> TemporalOptions:
        """The worker's activity options (the same on every worker of the task queue)."""
        return registry_for(self._queue).options

    def _continued(self) -> m.RunRequest:
        request = self._request
        return m.RunRequest(
            request.run_id,
            request.agent,
            self._facts.digest,
            seq=self.seq,
            depth=request.depth,
            parent_run_id=request.parent_run_id,
            token_budget=request.token_budget,
            deadline=self.deadline,
            task_queue=self._queue,
        )

    # ------------------------------------------------------------ transitions

    async def _apply(self, inp: Any) -> NextAction:
        facts = self._facts
        match, outcome = matched_transition(self.state, inp, facts.ctx)
        tripped = False
        if facts.agent.output_guardrails and outcome.next_state.phase == "Done":
            done: Any = outcome.next_state
            check = m.GuardrailCheck(facts.agent.name, self._take(), done.output)
            try:
                answer: m.GuardrailAnswer = await self._activity(
                    "helikon_guardrail", check, m.GuardrailAnswer, self._options.model_timeout
                )
            except _Stopped:  # the run does not complete, but the answer was paid for
                inp = landed(self._halted, inp)
                match, outcome = matched_transition(self.state, inp, facts.ctx)
            else:
                if answer.error is not None:
                    outcome = trip_output_guardrail(outcome, answer.error)  # type: ignore[arg-type]
                    tripped = True
        self.seq += 1
        record = None
        if tripped:  # not what `transition` gives: the writer cannot rebuild it
            record = step_record(self.seq, inp, match, outcome)
        self.steps.append(m.Step(self.seq, inp, match.row.index, record))
        self.state = outcome.next_state
        return outcome.next_action

    async def _perform(self, action: NextAction) -> Any:
        try:
            if isinstance(action, CallModel):
                return await self._call_model(action)
            if isinstance(action, ExecuteTools):
                return await self._execute_tools(action)
            if isinstance(action, AwaitApproval):
                return await self._await_approval(action)
            if isinstance(action, Handoff):
                return await self._hand_off(action)
            if isinstance(action, RunEffect):
                return await self._run_effect(action)
        except _Stopped:
            return self._halted
        raise _refused(f"the Temporal runtime cannot perform action {action.kind!r}")

    async def _run_effect(self, action: RunEffect) -> Any:
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
            data = await self._wait(
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
            if attempts == 1 and _interrupted(exc):
                return Fail(EffectFailed(name, EFFECT_INTERRUPTED, interrupted=True))
            return Fail(EffectFailed(name, f"failed: {_cause(exc)}"))
        self._written(run.writes)
        answer: m.EffectAnswer = m.from_payload(m.EffectAnswer, data, "helikon_effect's answer")
        if answer.error is not None:
            return Fail(answer.error)
        assert answer.result is not None
        return answer.result

    @property
    def _halted(self) -> Cancel | Fail:
        assert self.stop is not None
        return self.stop

    # ------------------------------------------------------------ the model

    async def _call_model(self, action: CallModel) -> Any:
        facts = self._facts
        if not self.guarded_input:
            self.guarded_input = True
            if facts.agent.input_guardrails:
                check = m.GuardrailCheck(facts.agent.name, self._take())
                answer: m.GuardrailAnswer = await self._activity(
                    "helikon_guardrail", check, m.GuardrailAnswer, self._options.model_timeout
                )
                if isinstance(answer.error, GuardrailTripped):
                    error = answer.error
                    triggered = GuardrailTriggered(error.guardrail, "input", error.message)
                    self.effects.append(EffectRecord(self.seq, triggered))
                if answer.error is not None:
                    return Fail(answer.error)
        call = m.ModelCall(facts.agent.name, self._take(), action.request, self.model_calls)
        self.model_calls += 1
        try:
            answer_: m.ModelAnswer = await self._activity(
                "helikon_model", call, m.ModelAnswer, self._options.model_timeout
            )
        except ActivityError as exc:
            if not _too_large(exc) or not workflow.patched(TRUE_CAUSE):
                raise
            cause = f"the model's answer cannot reach the workflow: {_cause(exc)}"
            return Fail(ModelCallFailed("bad_response", cause))
        return answer_.input

    # ------------------------------------------------------------ tools

    async def _execute_tools(self, action: ExecuteTools) -> Any:
        facts = self._facts
        seq = self.seq
        calls = action.calls
        if any(facts.nested(call.name) is not None for call in calls):
            await self._flush()  # a child reads nothing of ours, but its parent must exist
        finished: dict[str, ToolResult] = {}
        spent: list[Usage] = []
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
            result, usage = await self._tool(call, seq, mine)
            finished[call.call_id] = result
            spent.append(usage)

        tasks = [asyncio.ensure_future(one(call)) for call in calls]
        if not tasks:  # every call was settled without running (rejected, denied)
            return ToolResults((), ZERO_USAGE)
        try:
            await self._wait(_all(tasks))
        except _Fatal as fatal:
            await _settle(tasks)
            assert fatal.answer.fatal is not None
            kept = tuple(finished[c.call_id] for c in calls if c.call_id in finished)
            return Fail(fatal.answer.fatal, kept, sum(spent, ZERO_USAGE))
        except _Stopped:
            await _settle(tasks)
            kept = tuple(finished[c.call_id] for c in calls if c.call_id in finished)
            return replace(self._halted, results=kept, usage=sum(spent, ZERO_USAGE))
        return ToolResults(tuple(finished[c.call_id] for c in calls), sum(spent, ZERO_USAGE))

    async def _tool(
        self, call: ToolCall, seq: int, writes: m.Writes | None
    ) -> tuple[ToolResult, Usage]:
        facts = self._facts
        nested = facts.nested(call.name)
        if nested is not None:
            return await self._agent_tool(call, nested, seq)
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
            if _cancelled(exc):
                raise
            content = f"error: the call failed: {_cause(exc)}"
            if attempts == 1 and _interrupted(exc):
                content = INTERRUPTED
            return ToolResult(call.call_id, content, True, "errored"), ZERO_USAGE
        if writes is not None:
            self._written(writes)
        answer: m.ToolAnswer = m.from_payload(m.ToolAnswer, data, "helikon_tool's answer")
        if answer.fatal is not None:
            raise _Fatal(answer)
        assert answer.result is not None
        return answer.result, answer.usage

    async def _agent_tool(
        self, call: ToolCall, agent: AgentSpec, seq: int
    ) -> tuple[ToolResult, Usage]:
        """An agent as a tool: a child workflow one level deeper, sharing the budget."""
        request = self._request
        limit = self._facts.config.max_agent_depth
        if request.depth + 1 > limit:
            error = MaxAgentDepthExceeded(limit, agent.name)
            raise _Fatal(m.ToolAnswer(fatal=error))
        try:
            text = json.loads(call.arguments)["input"]
            if not isinstance(text, str):
                raise TypeError("input is not a string")
        except (ValueError, KeyError, TypeError) as exc:
            content = f"error: {call.name} takes {{'input': text}}: {type(exc).__name__}: {exc}"
            return ToolResult(call.call_id, content, True, "errored"), ZERO_USAGE
        child = self._child_request(f"{request.run_id}/{seq}:{call.call_id}", agent)
        child = replace(child, input=(UserMessage(text),))
        outcome = await self._child(child)
        state: Any = outcome.state
        if state.phase == "Failed":
            content = f"error: {agent.name} failed: {describe(state.error)}"
            return ToolResult(call.call_id, content), outcome.usage  # as the tool returns it
        output = state.output
        text = json.dumps(output.value) if output.value is not None else output.text or ""
        return ToolResult(call.call_id, text), outcome.usage

    def _child_request(self, run_id: str, agent: AgentSpec) -> m.RunRequest:
        request = self._request
        config = self._facts.config
        budget = None
        if config.token_budget is not None:
            budget = max(config.token_budget - self.state.usage.total_tokens, 1)
        digest = registry_for(self._queue).facts(agent.name).digest
        return m.RunRequest(
            run_id,
            agent.name,
            digest,
            depth=request.depth + 1,
            parent_run_id=request.run_id,
            token_budget=budget,
            deadline=self.deadline,
            task_queue=self._queue,
        )

    async def _child(self, child: m.RunRequest) -> m.RunOutcome:
        try:
            data = await self._wait(
                workflow.execute_child_workflow(m.WORKFLOW, m.to_payload(child), id=child.run_id)
            )
        except ChildWorkflowError as exc:
            if _cancelled(exc):
                return await self._cancelled_child(child.run_id)
            raise ApplicationError(
                f"nested run {child.run_id!r} failed as a workflow: {_cause(exc)}",
                non_retryable=True,
            ) from None
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

    async def _await_approval(self, action: AwaitApproval) -> Any:
        run_id = self._request.run_id
        self.pending = tuple(request.bound(run_id, self.seq) for request in action.pending)
        self.decisions = None
        self.effects.append(EffectRecord(self.seq, RunSuspended(self.pending)))
        await self._flush(suspended=True)
        try:
            await self._wait(workflow.wait_condition(lambda: self.decisions is not None))
        finally:
            self.pending = ()
        decisions, self.decisions = self.decisions, None
        assert decisions is not None
        return ApprovalDecisions(decisions)

    def _bound(self, data: Any) -> tuple[ApprovalDecision, ...]:
        """Decisions checked against this suspension, as in-process approvals check them.

        Raises:
            ApplicationError: not waiting, or a decision does not bind (call id, arguments
                hash, run and suspension), or the suspension was decided already.
        """
        try:
            decisions = tuple(
                m.from_payload(ApprovalDecision, each, "a decision") for each in _listed(data)
            )
            if not self.pending or not isinstance(self.state, NeedsApproval):
                raise ApprovalMismatch(
                    f"run {self._request.run_id!r} is not waiting for approval (it is in "
                    f"{self.state.phase} at step {self.seq})"
                )
            if self.decisions is not None:
                raise ApprovalMismatch(
                    f"suspension {self.seq} of run {self._request.run_id!r} was decided "
                    "already: a decision is spent once"
                )
            snapshot = RunSnapshot(self._request.run_id, "", "", self.seq, 0, self.state, ())
            snapshot.check_decisions(decisions)
        except (ApprovalMismatch, m.PayloadError) as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from None
        return decisions

    @workflow.update
    async def decide(self, data: Any) -> Any:
        """Decide the pending calls (a list of `ApprovalDecision` as JSON data); the run's
        status after the decisions were taken."""
        self.decisions = self._bound(data)
        return m.to_payload(self._status())

    @decide.validator
    def _check_decide(self, data: Any) -> None:
        self._bound(data)

    @workflow.signal(name="decisions")
    def decisions_signal(self, data: Any) -> None:
        """`decide`, fire and forget: decisions that do not bind are logged and dropped."""
        try:
            self.decisions = self._bound(data)
        except ApplicationError as exc:
            workflow.logger.warning("decisions refused: %s", exc)

    @workflow.query
    def current(self) -> Any:
        """Where the run is: phase, seq, pending approvals, usage."""
        return m.to_payload(self._status())

    def _status(self) -> m.Status:
        state = self.state
        phase = state.phase if state is not None else "starting"
        usage = state.usage if state is not None else ZERO_USAGE
        run_id = self.request.run_id if self.request is not None else ""
        return m.Status(run_id, phase, self.seq, self.pending, usage)

    # ------------------------------------------------------------ handoffs

    async def _hand_off(self, action: Handoff) -> Any:
        facts = self._facts
        target = next(h.target for h in facts.handoffs.values() if h.agent_name == action.target)
        limit = facts.config.max_agent_depth
        if self._request.depth + 1 > limit:
            return HandoffResult(None, MaxAgentDepthExceeded(limit, target.name))
        self.effects.append(EffectRecord(self.seq, AgentUpdated(target.name)))
        await self._flush()
        child = self._child_request(f"{self._request.run_id}/{self.seq}", target)
        child = replace(child, from_parent=True)
        outcome = await self._child(child)
        state: Any = outcome.state
        if state.phase == "Done":
            return HandoffResult(state.output, None, state.output.usage)
        return HandoffResult(None, state.error, state.usage)

    # ------------------------------------------------------------ activities and writes

    def _take(self) -> m.Writes:
        """What is not written yet, to ride on the next activity (`_written` once it ran)."""
        request = self._request
        return m.Writes(
            request.run_id,
            request.agent,
            request.token_budget,
            tuple(self.steps),
            tuple(self.effects),
            self.create,
            request.parent_run_id,
            isinstance(self.state, NeedsApproval),
            self._facts.listed if self.create else (),
        )

    def _written(self, writes: m.Writes) -> None:
        del self.steps[: len(writes.steps)]
        del self.effects[: len(writes.effects)]
        if writes.create:
            self.create = False

    async def _flush(self, *, suspended: bool = False) -> None:
        if not self.steps and not self.effects:
            return
        writes = replace(self._take(), suspended=suspended)
        await self._unstopped(
            workflow.execute_activity(
                "helikon_write",
                m.to_payload(writes),
                start_to_close_timeout=timedelta(seconds=self._options.store_timeout),
            )
        )
        self._written(writes)

    async def _read(self, name: str, run_id: str, kind: Any) -> Any:
        data = await self._unstopped(
            workflow.execute_activity(
                name, run_id, start_to_close_timeout=timedelta(seconds=self._options.store_timeout)
            )
        )
        return m.from_payload(kind, data, f"{name}'s answer")

    async def _unstopped(self, awaitable: Any) -> Any:
        """Await a store activity to its end even when the workflow is cancelled meanwhile,
        so what the run writes is written (its end above all); the cancel becomes the
        run's stop, for the next effect (`_wait`). Before the `CANCELED` patch the cancel
        cancelled the activity and ended the workflow: a replay of such a history does so."""
        task = asyncio.ensure_future(awaitable)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not workflow.patched(CANCELED):
                task.cancel()
                return await task
            if self.stop is None:
                self.stop = _cancel()
            return await task

    async def _activity(self, name: str, message: Any, kind: Any, timeout: float) -> Any:
        """Run activity `name` on `message` (whose `writes` it writes), stoppably; retried,
        except when Temporal refused its answer (another attempt would be refused too)."""
        data = await self._wait(
            workflow.execute_activity(
                name,
                m.to_payload(message),
                start_to_close_timeout=timedelta(seconds=timeout),
                retry_policy=RetryPolicy(non_retryable_error_types=[PAYLOADS_TOO_LARGE]),
            )
        )
        self._written(message.writes)
        return m.from_payload(kind, data, f"{name}'s answer")

    async def _wait(self, awaitable: Any) -> Any:
        """Await an effect so that cancelling the workflow and the deadline stop it
        (`_Stopped`, with `stop` the input the chart gets)."""
        if self.stop is not None:
            _close(awaitable)
            raise _Stopped
        remaining = None
        if self.deadline:
            remaining = self.deadline - workflow.now().timestamp()
            if remaining <= 0:
                _close(awaitable)
                self._timed_out()
        try:
            if remaining is None:
                return await awaitable
            return await asyncio.wait_for(awaitable, remaining)
        except TimeoutError:
            self._timed_out()
        except asyncio.CancelledError:
            self.stop = _cancel()
            raise _Stopped from None
        except ActivityError as exc:
            if not _cancelled(exc):
                raise
            self.stop = _cancel()
            raise _Stopped from None

    def _timed_out(self) -> None:
        timeout = self._facts.config.timeout or 0.0
        self.stop = Fail(TimedOut(timeout))
        raise _Stopped


def _refused(message: str) -> ApplicationError:
    return ApplicationError(message, type="RunRefused", non_retryable=True)


def _listed(data: Any) -> list[Any]:
    if not isinstance(data, list):
        raise m.PayloadError(f"decisions must be a list of decisions, got {type(data).__name__}")
    return data


def _cancel() -> Cancel:
    """The input a cancel of the workflow feeds the chart: with the reason the cancel
    request gave (`handle.cancel(reason=...)`), "cancelled" if it gave none."""
    return Cancel(workflow.cancellation_reason() or "cancelled")


def _cancelled(exc: ActivityError | ChildWorkflowError) -> bool:
    """Whether an activity or a child workflow failed because it was cancelled (the
    workflow, or the deadline)."""
    return isinstance(exc.cause, (CancelledError, asyncio.CancelledError))


def _interrupted(exc: ActivityError) -> bool:
    """Whether a call run once failed because its worker was lost (it timed out, so it
    may have run), rather than with a cause to tell (Temporal refused its result, the
    activity raised). Before the `TRUE_CAUSE` patch every such failure was "interrupted":
    a replay of such a history says so again."""
    if isinstance(exc.cause, TemporalTimeout):
        return True
    return not workflow.patched(TRUE_CAUSE)


def _too_large(exc: ActivityError) -> bool:
    """Whether Temporal refused the activity's answer: over its payload limit."""
    cause = exc.cause
    return isinstance(cause, ApplicationError) and cause.type == PAYLOADS_TOO_LARGE


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)


def _close(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
    cancel = getattr(awaitable, "cancel", None)
    if cancel is not None:
        cancel()


async def _all(tasks: Sequence[asyncio.Future[None]]) -> None:
    """Every task, or the first exception one raised (the others run on: `_settle`)."""
    done, _ = await workflow.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for task in tasks:
        if task in done and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


async def _settle(tasks: Sequence[asyncio.Future[None]]) -> None:
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
