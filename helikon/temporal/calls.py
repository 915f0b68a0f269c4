"""How the workflow calls out: activities awaited stoppably, store writes riding on them.

`WorkflowCalls` holds a run's workflow state (the request, the agent's facts, the run's state
and seq, the steps and events not written yet, the stop) and the ways it reaches outside:

- The stoppable wait (`stoppable`): an activity or a child workflow awaited so that cancelling
  the workflow, or reaching the run's deadline, stops it with `Stopped`, `stopping` then the
  input the chart gets (`Cancel`, `Fail(TimedOut)`). The wait for approval decisions is not
  timed: the deadline restarts once they come (`_restart_deadline`).
- Writes: what the run has not written yet rides on its next activity (`_take`, `_written`),
  or is flushed by `helikon_write`; a store activity is awaited to its end even when the
  workflow is cancelled meanwhile (`_unstopped`).
- The wait for a nested run's child workflow (`nested_end`): to its end, as it keeps the
  run's deadline itself; a cancel of the workflow cancels it with the cancel's reason.
- The patches that changed these (`CANCELED`, `TRUE_CAUSE`, `DEADLINE_TIMES_OUT`,
  `NESTED_STOPS`, `SUSPENSION_RESETS_DEADLINE`, and `AGENT_TOOL_ARGUMENTS`, `CHILD_CONFIG`,
  `NESTED_SUSPENDS` and `HANDLER_ASKED`, which helikon.temporal.effects reads): what a
  workflow schedules and the input a stop feeds the chart are fixed by the histories
  recorded before them, which replay unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any, NoReturn

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
    from helikon.core.errors import TimedOut
    from helikon.core.state import Cancel, Fail, NeedsApproval
    from helikon.durable.records import EffectRecord
    from helikon.run.loop import Stopped
    from helikon.temporal import messages as m
    from helikon.temporal.options import TemporalOptions
    from helikon.temporal.registry import AgentFacts, registry_for
    from helikon.trace.times import CallTimes


CANCELED = "helikon-cancelled-run-ends-canceled"
"""The patch under which a run the workflow's cancellation ended ends its workflow Canceled
(histories recorded before it completed such a workflow normally, and still replay so)."""


TRUE_CAUSE = "helikon-refused-call-tells-its-cause"
"""The patch under which a call that is not run again, failed for a cause other than its
worker's loss (a result Temporal refused), tells that cause rather than "interrupted"
(histories recorded before it said "interrupted", and still replay so)."""


DEADLINE_TIMES_OUT = "helikon-deadline-cancelled-call-times-out"
"""The patch under which an activity the run's deadline cancelled (`asyncio.wait_for` cancels
it, and its handle raises the cancelled `ActivityError` rather than `TimeoutError`) stops the
run with `Fail(TimedOut)`, as a local run's deadline does (histories recorded before it took
such a call for a cancel of the workflow, `Cancel('cancelled')`, and still replay so)."""


NESTED_STOPS = "helikon-nested-run-takes-the-stop"
"""The patch under which a nested run's child workflow is awaited to its end (`nested_end`)
rather than stoppably: the deadline, which the child keeps too, ends the child `TimedOut`
and the run with `Fail(TimedOut)`, and a cancel of the workflow cancels the child with its
reason and is the run's `Cancel`, as in process (histories recorded before it cancelled the
child without a reason at either, took its end for the run's input, and still replay so)."""


GUARDRAIL_ROWS = "helikon-guardrails-as-rows"
"""The patch under which a run checks its answer in the chart's CheckingOutput phase: the
`CheckGuardrails` action performed as any other (the `helikon_guardrail` activity), its
verdict the next input (histories recorded before it ran on the default chart a15a890f…,
which has no such phase: they replay on it by the old rewrite, helikon.run.legacy, and never
reach this action)."""


INPUT_GUARDRAIL_ROWS = "helikon-input-guardrails-as-rows"
"""The patch under which a run checks its input in the chart's CheckingInput phase: the
`CheckGuardrails(None)` action performed as any other (the `helikon_guardrail` activity, as
the loop's rule ran it before the first model call), its verdict the next input (histories
recorded before it ran on a default chart without that phase, a15a890f… or 7e19d021…: they
replay on it by the loop's rule and never reach this action)."""


AGENT_TOOL_ARGUMENTS = "helikon-agent-tool-checks-its-schema"
"""The patch under which an agent as a tool called with arguments its schema refuses gets
the tool's own schema check as its error result (`Tool.invalid_arguments`, as in process),
and a call with fields besides `input` is refused (histories recorded before it read
`input` alone, said "takes {'input': text}" when it could not, and still replay so)."""


CHILD_CONFIG = "helikon-nested-run-takes-its-roots-config"
"""The patch under which a nested run (a handoff target, an agent as a tool) takes its root's
`RunConfig` (`RunRequest.config_of`): its tool policy, `max_turns`, limits and model
settings, as in process, where nesting never resets turns, budget or permissions (histories
recorded before it started nested runs on their own agents' configs, and still replay so)."""


SUSPENSION_RESETS_DEADLINE = "helikon-suspension-resets-the-deadline"
"""The patch under which a run's deadline does not run while it waits for approval decisions,
and its `RunConfig.timeout` counts afresh once they come, as `agent.resume` counts it for a
local run, whose stream ends at the suspension (histories recorded before it kept the
deadline across the wait, and a run decided after it failed `TimedOut`, and still replay
so)."""


NESTED_SUSPENDS = "helikon-nested-run-ends-at-its-suspension"
"""The patch under which a nested run (a handoff target, an agent as a tool) that waits for
approval ends its workflow at its suspension, its `RunSuspended` written and the run left
suspended, as a local nested run's stream ends there: its handoff ends cancelled, its call
gets an error result (histories recorded before it waited for the `decide` update with its
parent waiting on it, and still replay so)."""


HANDLER_ASKED = "helikon-approval-handler-is-asked"
"""The patch under which a run whose agent has an `on_approval` handler asks it, in the
`helikon_approval` activity, rather than waiting for the `decide` update, as a local run
asks it (histories recorded before it waited for the update, and still replay so)."""


PAYLOADS_TOO_LARGE = "PayloadsTooLarge"
"""The type of the failure the Temporal SDK gives an activity whose answer is over
Temporal's payload limit (`CLAIM_THRESHOLD` keeps a helikon worker's answers under it)."""


class WorkflowCalls:
    """A run's workflow state, and how it calls activities and writes (see the module
    docstring); `HelikonWorkflow` sets the state up."""

    request: m.RunRequest | None
    facts: AgentFacts | None
    state: Any
    seq: int
    model_calls: int
    input_guarded: bool
    steps: list[m.Step]
    effects: list[EffectRecord]
    create: bool
    pending: tuple[ApprovalRequest, ...]
    decisions: tuple[ApprovalDecision, ...] | None
    stopping: Cancel | Fail | None
    deadline: float
    took: float | None  # how long the effect whose input is next ran, as its activity says
    timed: CallTimes  # how long each call of the batch whose results are next ran

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

    @property
    def _options(self) -> TemporalOptions:
        """The worker's activity options (the same on every worker of the task queue)."""
        return registry_for(self._queue).options

    @property
    def _halted(self) -> Cancel | Fail:
        assert self.stopping is not None
        return self.stopping

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
            request.config_of,
        )

    def _written(self, writes: m.Writes) -> None:
        del self.steps[: len(writes.steps)]
        del self.effects[: len(writes.effects)]
        if writes.create:
            self.create = False

    async def _flush(self, *, suspended: bool = False, released: bool = False) -> None:
        if not self.steps and not self.effects:
            return
        writes = replace(self._take(), suspended=suspended, released=released)
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
        run's stop, for the next effect (`stoppable`). Before the `CANCELED` patch the cancel
        cancelled the activity and ended the workflow: a replay of such a history does so."""
        task = asyncio.ensure_future(awaitable)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not workflow.patched(CANCELED):
                task.cancel()
                return await task
            if self.stopping is None:
                self.stopping = cancel_input()
            return await task

    async def _activity(self, name: str, message: Any, kind: Any, timeout: float) -> Any:
        """Run activity `name` on `message` (whose `writes` it writes), stoppably; retried,
        except when Temporal refused its answer (another attempt would be refused too)."""
        data = await self.stoppable(
            workflow.execute_activity(
                name,
                m.to_payload(message),
                start_to_close_timeout=timedelta(seconds=timeout),
                retry_policy=RetryPolicy(non_retryable_error_types=[PAYLOADS_TOO_LARGE]),
            )
        )
        self._written(message.writes)
        return m.from_payload(kind, data, f"{name}'s answer")

    async def stoppable(self, awaitable: Any, *, timed: bool = True) -> Any:
        """Await an effect so that cancelling the workflow and the deadline (unless not
        `timed`) stop it (`Stopped`, with `stopping` the input the chart gets)."""
        if self.stopping is not None:
            close_unstarted(awaitable)
            raise Stopped
        remaining = None
        if self.deadline and timed:
            remaining = self.deadline - workflow.now().timestamp()
            if remaining <= 0:
                close_unstarted(awaitable)
                self._timed_out()
        try:
            if remaining is None:
                return await awaitable
            return await asyncio.wait_for(awaitable, remaining)
        except TimeoutError:
            self._timed_out()
        except asyncio.CancelledError:
            self.stopping = cancel_input()
            raise Stopped from None
        except ActivityError as exc:
            if not was_cancelled(exc):
                raise
            if self._by_deadline() and workflow.patched(DEADLINE_TIMES_OUT):
                self._timed_out()
            self.stopping = cancel_input()
            raise Stopped from None

    async def nested_end(self, child: m.RunRequest) -> Any:
        """The result of nested run `child`'s workflow, awaited to its end: it keeps this
        run's deadline itself, so the wait has no timer of its own. A cancel of the
        workflow (a handoff's wait) cancels the child with its reason, and the stop lands
        on its end; past the deadline once the child ended, the stop is the timeout. A stop
        of the batch the child is a call of cuts the call short once the child ended
        (`CutShort`), as a local batch's stop does.

        Raises:
            ChildWorkflowError: the child's workflow failed, or ended Canceled.
            CutShort: the stop of the batch the child is a call of cut it short.
        """
        if self.stopping is not None:
            raise Stopped
        if self.deadline and workflow.now().timestamp() >= self.deadline:
            self._timed_out()
        try:
            handle = await workflow.start_child_workflow(
                m.WORKFLOW, m.to_payload(child), id=child.run_id
            )
        except asyncio.CancelledError:  # the child's start cancelled: nothing to land on
            if self.stopping is None:
                self.stopping = cancel_input()
            raise Stopped from None
        try:
            data = await asyncio.shield(handle)
        except asyncio.CancelledError:
            if self.stopping is not None:  # the batch it is a call of stopped: cut short
                raise CutShort(await self._child_stopped(handle)) from None
            self.stopping = cancel_input()
            handle.cancel(self.stopping.reason)
            data = await handle
        if self.stopping is None and self._by_deadline():
            self.stopping = Fail(TimedOut(self._timeout))
        return data

    async def _child_stopped(self, handle: Any) -> Any:
        """The result of a child cut short by the run's stop, once it ended: cancelled with
        a cancel's reason, or by the deadline it keeps itself; None when its workflow ended
        otherwise than with a result (Canceled)."""
        if isinstance(self.stopping, Cancel):
            handle.cancel(self.stopping.reason)
        try:
            return await handle
        except ChildWorkflowError:
            return None

    def _by_deadline(self) -> bool:
        """Whether a call cancelled now was cancelled by the run's deadline: it has passed,
        and the workflow was not cancelled (then the stop is that cancel)."""
        if not self.deadline or workflow.cancellation_reason() is not None:
            return False
        return workflow.now().timestamp() >= self.deadline

    @property
    def _timeout(self) -> float:
        """The seconds the run's deadline counts: its root's `RunConfig.timeout` (0.0 when a
        nested run's request, from before `NESTED_STOPS`, does not carry it)."""
        return self._request.timeout or self._facts.config.timeout or 0.0

    def _restart_deadline(self) -> None:
        """The run's timeout counted afresh from now (a run decided after its suspension,
        as `agent.resume` counts it); nothing for a run without one."""
        if self.deadline:
            self.deadline = workflow.now().timestamp() + self._timeout

    def _timed_out(self) -> NoReturn:
        self.stopping = Fail(TimedOut(self._timeout))
        raise Stopped


class CutShort(Exception):
    """Internal: a nested run that is a call of a batch the run's stop cut short ended
    (`nested_end`); `data` is its workflow's result, None when it ended Canceled. Its end is
    not the call's result (a local batch drops a call its stop cut short); what it spent
    still counts."""

    def __init__(self, data: Any) -> None:
        super().__init__("a nested run cut short")
        self.data = data


def refused(message: str) -> ApplicationError:
    return ApplicationError(message, type="RunRefused", non_retryable=True)


def cancel_input() -> Cancel:
    """The input a cancel of the workflow feeds the chart: with the reason the cancel
    request gave (`handle.cancel(reason=...)`), "cancelled" if it gave none."""
    return Cancel(workflow.cancellation_reason() or "cancelled")


def was_cancelled(exc: ActivityError | ChildWorkflowError) -> bool:
    """Whether an activity or a child workflow failed because it was cancelled (the
    workflow, or the deadline)."""
    return isinstance(exc.cause, (CancelledError, asyncio.CancelledError))


def interrupted(exc: ActivityError) -> bool:
    """Whether a call run once failed because its worker was lost (it timed out, so it
    may have run), rather than with a cause to tell (Temporal refused its result, the
    activity raised). Before the `TRUE_CAUSE` patch every such failure was "interrupted":
    a replay of such a history says so again."""
    if isinstance(exc.cause, TemporalTimeout):
        return True
    return not workflow.patched(TRUE_CAUSE)


def too_large(exc: ActivityError) -> bool:
    """Whether Temporal refused the activity's answer: over its payload limit."""
    cause = exc.cause
    return isinstance(cause, ApplicationError) and cause.type == PAYLOADS_TOO_LARGE


def cause_of(exc: BaseException) -> str:
    cause = exc.__cause__
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)


def close_unstarted(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
    cancel = getattr(awaitable, "cancel", None)
    if cancel is not None:
        cancel()


async def all_of(tasks: Sequence[asyncio.Future[None]]) -> None:
    """Every task, or the first exception one raised (the others run on: `settle`)."""
    done, _ = await workflow.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for task in tasks:
        if task in done and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


async def settle(tasks: Sequence[asyncio.Future[None]]) -> None:
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
