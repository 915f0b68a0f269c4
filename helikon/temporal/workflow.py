"""`HelikonWorkflow`: a run as a Temporal workflow, driving the same pure `transition`.

Theory of operation: the workflow id is the run id. The workflow finds its agent in the
worker's registry (by name, the chart's digest checked). An agent with tool sources (MCP
servers) has them listed by an activity (`helikon_list`, activity id `0:list`) before the
first transition, as a local run lists them; the run's facts (transition context, offered
specs, tool-set digest) are derived from the agent's own tools and the listed ones, which
ride to the store with the run's first write, so a replay or a continued workflow never
lists again. Then the workflow loops as the local driver does, by the same rules
(helikon.run.loop, which alone dispatches on the action): apply one `transition` to
(state, input) over the agent's compiled table (on a chart without a CheckingOutput phase,
checked by the output guardrails: helikon.run.legacy), keep the record, perform the action
the outcome asks for through the loop's port, whose effects are activities
(helikon.temporal.effects, calling out through helikon.temporal.calls), whose answer is the
next input. The workflow holds the state, never the conversation: the steps
ride on the next activity's input and are written to the run store, where the model
activity reads the conversation, so a model call's payload is the appends since the last
call and the history grows linearly (bench/temporal.py).

Approvals: a suspension waits for the `decide` update (a validator refuses decisions that
do not bind to the pending calls of this suspension, by call id and arguments hash, or come
a second time) or the `decisions` signal (fire and forget: a refused one is logged), its
deadline paused and restarted once they come; an agent with an `on_approval` handler never
suspends (the handler is asked in an activity), and a nested run that would suspend ends
there instead, as in process (helikon.temporal.effects). The `current` query says where the
run is. Handoffs and agents as tools are child workflows
(ids `{run_id}/{seq}` and `{run_id}/{seq}:{call_id}`, as a local run's nested ids), one level
deeper, with the root's `RunConfig`, only the token budget the root has left, and the
root's deadline and timeout;
the parent awaits each to its end (helikon.temporal.calls, `nested_end`). Cancelling the
workflow, or reaching `RunConfig.timeout`, stops the effect in flight (a nested run, with
the cancel's reason or by its own deadline) and feeds `Cancel` / `Fail(TimedOut)`
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
the history holds their references. An action the loop does not know fails the workflow
closed.

Driver changes that alter what a workflow schedules must be guarded with
`workflow.patched(...)` so that histories recorded before replay unchanged (the replay test
in tests/ fails otherwise); a changed chart runs on a new task queue (docs/howto/temporal.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from helikon.core.approvals import ApprovalDecision, ApprovalRequest
    from helikon.core.errors import Cancelled, ToolsUnavailable, describe
    from helikon.core.events import RunStarted
    from helikon.core.items import ZERO_USAGE
    from helikon.core.state import (
        TERMINAL_PHASES,
        Cancel,
        Fail,
        Failed,
        NeedsApproval,
        NextAction,
        Start,
        TransitionOutcome,
    )
    from helikon.core.tool_spec import ListedTool
    from helikon.core.transition import Match, initial_state, matched_transition, next_action_of
    from helikon.durable.records import EffectRecord, step_record
    from helikon.run.config import RunConfig
    from helikon.run.legacy import checked, rewrites, to_check
    from helikon.run.loop import Stopped, awaits_decisions, perform
    from helikon.run.snapshot import ApprovalMismatch, RunSnapshot
    from helikon.run.spec import AgentSpec, HandoffTo
    from helikon.temporal import messages as m
    from helikon.temporal.registry import AgentFacts, UnknownAgent, registry_for
    from helikon.trace.times import CallTimes, StepTime, iso

# Workflow code: re-imported in the sandbox, which checks it (not passed through).
from helikon.temporal.calls import (
    CANCELED,
    GUARDRAIL_ROWS,
    INPUT_GUARDRAIL_ROWS,
    cause_of,
    refused,
)
from helikon.temporal.effects import WorkflowEffects


@workflow.defn(name=m.WORKFLOW)
class HelikonWorkflow(WorkflowEffects):
    """One run (see the module docstring). Start it with a `RunRequest` as JSON data."""

    def __init__(self) -> None:
        self.request: m.RunRequest | None = None
        self.facts: AgentFacts | None = None
        self.state: Any = None
        self.seq = 0
        self.model_calls = 0
        self.input_guarded = False
        self.steps: list[m.Step] = []
        self.effects: list[EffectRecord] = []
        self.create = False
        self.pending: tuple[ApprovalRequest, ...] = ()
        self.decisions: tuple[ApprovalDecision, ...] | None = None
        self.stopping: Cancel | Fail | None = None
        self.produced: Any = None  # the input the action in flight produced
        self.deadline = 0.0
        self.took: float | None = None
        self.timed: CallTimes = ()

    # ------------------------------------------------------------ the run

    @workflow.run
    async def run(self, data: Any) -> Any:
        request = self._start(data)
        facts = self._facts
        next_input: Any
        if request.seq == 0:
            next_input = await self._new(request)
        else:
            await self._continue(request)
            next_input = None
        while True:
            if next_input is not None:
                action = await self._apply(next_input)
                if self.state.phase in TERMINAL_PHASES:
                    break
                if not awaits_decisions(action) and self._should_continue():
                    await self._flush()
                    if self.stopping is None:  # a cancel during the write: stop here instead
                        workflow.continue_as_new(m.to_payload(self._continued()))
            else:
                action = next_action_of(self.state, facts.ctx)
            next_input = await self._perform(action)
            if next_input is None:  # a nested run ended at its suspension (NESTED_SUSPENDS)
                break
        await self._flush()
        ended = m.to_payload(m.RunOutcome(request.run_id, self.state, self.seq))
        if self._cancelled() and workflow.patched(CANCELED):
            workflow.upsert_memo({m.OUTCOME_MEMO: ended})
            raise asyncio.CancelledError(describe(self.state.error))
        return ended

    async def _continue(self, request: m.RunRequest) -> None:
        """Take a continued run's state from its stored head (no input: the next action is
        the head's pending one)."""
        facts = self._facts
        head: m.Head = await self._read("helikon_head", request.run_id, m.Head)
        if head.chart_digest != facts.digest:
            raise refused(
                f"run {request.run_id!r} ran on chart {head.chart_digest[:12]}, but this "
                f"worker's agent runs chart {facts.digest[:12]}: it cannot continue here"
            )
        if head.tools:
            self.facts = self._facts_with(head.tools)
        self.state, self.seq, self.model_calls = head.state, head.seq, head.model_calls
        self.input_guarded = head.model_calls > 0

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
            raise refused(str(exc)) from None
        info = workflow.info()
        if request.run_id != info.workflow_id:
            raise refused(
                f"the workflow id {info.workflow_id!r} is not the run id {request.run_id!r}: "
                "start a run with its run id as the workflow id"
            )
        try:
            registry = registry_for(request.task_queue or info.task_queue)
            self.facts = registry.facts(
                request.agent,
                request.token_budget,
                chart=request.chart,
                config_of=request.config_of,
            )
        except UnknownAgent as exc:
            raise refused(str(exc)) from None
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
            started = RunStarted(facts.agent.name, request.run_id)
            self.effects.append(EffectRecord(0, started, iso(workflow.now().timestamp())))
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
            data = await self.stoppable(
                workflow.execute_activity(
                    "helikon_list",
                    m.to_payload(m.ListTools(self._facts.agent.name)),
                    activity_id="0:list",
                    start_to_close_timeout=timedelta(seconds=options.list_timeout),
                    retry_policy=RetryPolicy(maximum_attempts=options.rerun_attempts),
                )
            )
        except Stopped:
            return self._halted
        except ActivityError as exc:
            return Fail(ToolsUnavailable("", f"listing the tools failed: {cause_of(exc)}"))
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
            return registry_for(self._queue).facts(  # chart: a kept version stays (chart_versions)
                request.agent,
                request.token_budget,
                chart=request.chart,
                listed=tools,
                config_of=request.config_of,
            )
        except UnknownAgent as exc:
            raise refused(str(exc)) from None

    def _should_continue(self) -> bool:
        info = workflow.info()
        limit = self._options.continue_after_events
        long = limit is not None and info.get_current_history_length() >= limit
        return (long or info.is_continue_as_new_suggested()) and workflow.all_handlers_finished()

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
            timeout=request.timeout,
            config_of=request.config_of,
        )

    # ------------------------------------------------------------ transitions

    async def _apply(self, inp: Any) -> NextAction:
        """One transition (on a chart without a CheckingOutput phase, checked by the output
        guardrails: helikon.run.legacy), kept to be written with the run's next write."""
        match, outcome = self.transition(inp)
        tripped = False
        if to_check(self, outcome, rewrites(self._facts.ctx.table)):
            inp, match, outcome, tripped = await checked(self, inp, match, outcome)
        assert match is not None
        self.seq += 1
        # The workflow's clock only; how long the effect ran, its activity measured.
        time = StepTime.of(workflow.now().timestamp(), self.took, self.timed)
        self.took, self.timed = None, ()
        record = None
        if tripped:  # not what `transition` gives: the writer cannot rebuild it
            record = step_record(self.seq, inp, match, outcome, time)
        self.steps.append(m.Step(self.seq, inp, match.row.index, record, time))
        self.state = outcome.next_state
        return outcome.next_action

    async def _perform(self, action: NextAction) -> Any:
        """The input `action` produces, by the loop's rules (its events are written as the
        effects emit them); None when a nested run suspended, which ends it."""
        if action.kind == "check_guardrails" and not _patched(action):
            raise refused("a history recorded before guardrails were rows checks nothing here")
        self.produced = None
        async for _ in perform(self, action):
            pass
        inp, self.produced = self.produced, None
        if inp is None and not awaits_decisions(action):
            raise refused(f"the Temporal runtime cannot perform action {action.kind!r}")
        return inp

    # ------------------------------------------------------------ the loop's port

    @property
    def agent(self) -> AgentSpec:
        return self._facts.agent

    @property
    def config(self) -> RunConfig:
        return self._facts.config

    @property
    def depth(self) -> int:
        return self._request.depth

    @property
    def handoffs(self) -> Mapping[str, HandoffTo]:
        return self._facts.handoffs

    @property
    def checks_input(self) -> bool:
        return "CheckingInput" in self._facts.ctx.table.dispatch

    def transition(self, inp: Any) -> tuple[Match | None, TransitionOutcome]:
        return matched_transition(self.state, inp, self._facts.ctx)

    def take_input(self, inp: Any) -> None:
        self.produced = inp

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


def _listed(data: Any) -> list[Any]:
    if not isinstance(data, list):
        raise m.PayloadError(f"decisions must be a list of decisions, got {type(data).__name__}")
    return data


def _patched(check: Any) -> bool:
    """Whether a guardrail check is performed as an action here: the answer's under
    `GUARDRAIL_ROWS`, the input's (no answer) under `INPUT_GUARDRAIL_ROWS`."""
    return workflow.patched(GUARDRAIL_ROWS if check.output is not None else INPUT_GUARDRAIL_ROWS)
