"""Running a path through the real driver, and checking each step took its planned row.

Theory of operation: the path's model responses become the turns of a `ScriptedModel` (with
the synthetic handoff target's turns where it runs); the probe tools return the results the
path planned; approvals are answered by an in-process handler, or, when a step leaves some
calls pending, by resuming the suspended run with the decisions planned. A `Recorder`, the
run's trace sink, records the row and guard outcomes of every transition the root run
applies (the match the run computed with the outcome: each guard runs once a step), and
between a transition and the effect that follows it, it stops the run where the path says:
`run.cancel()` for a `Cancel`. A `Fail` is the effect's own failure: the model call raises
`ModelError`, a probe raises `FatalToolError`, the approval handler raises, a chart's effect
(a probe too) raises, or, during a handoff or an output guardrail's check, the synthetic
target or the probe guardrail arms the root run's deadline and waits for it. After its last
step a path's run is cancelled unless it ended; those transitions count toward coverage, and
only the planned ones are checked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from helikon.charttest.bench import Bench, variant
from helikon.charttest.inputs import EFFECT_FAILURE, FATAL_MESSAGE, HANDLER_FAILURE
from helikon.charttest.paths import ChartPath, PathStep, approval_mode
from helikon.charttest.setup import (
    CHILD_TEXT,
    CHILD_USAGE,
    PROBE_BLOCK_TOOL,
    PROBE_EFFECT_OUTPUT,
    PROBE_OUTPUT,
)
from helikon.charttest.targets import Checked
from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.errors import FatalToolError, ModelError
from helikon.core.events import RunSuspended
from helikon.core.items import AssistantMessage, ToolCall, Usage
from helikon.core.state import TERMINAL_PHASES, CallModel, Handoff
from helikon.core.transition import initial_state, matched_transition, next_action_of, transition
from helikon.models.base import ModelInput
from helikon.models.scripted import ScriptedModel, ScriptedTurn, Turn
from helikon.run.config import RunContext
from helikon.run.driver import Run
from helikon.run.guardrails import GuardrailResult
from helikon.run.results import RunResultStreaming
from helikon.trace import TracedRun, TransitionRecord

PATH_TIMEOUT = 30.0
"""Seconds one path's runs may take before the path counts as stuck."""
TAIL_REASON = "helikon test: the path ends here"

Hit = tuple[int, Checked]
"""A transition as coverage counts it: the row it took and the guards it checked."""


@dataclass(frozen=True)
class PathRun:
    """How a path ran: `via` driver or transition, the rows it hit, and what went wrong."""

    path: ChartPath
    via: str
    hits: tuple[Hit, ...]
    failure: str | None = None


def states_of(bench: Bench, path: ChartPath) -> list[Any]:
    """The states the path's steps apply to, over `transition` (the first is the initial)."""
    ctx = bench.ctx(path.setup)
    state = initial_state(ctx, Usage(path.setup.spent, 0, path.setup.spent, 0))
    states = [state]
    for step in path.steps:
        state = transition(state, step.input, ctx).next_state
        states.append(state)
    return states


def check_over_transition(bench: Bench, path: ChartPath) -> PathRun:
    """Run the path over the pure `transition` and check every step's row and guards
    (matched with the outcome: each guard runs once a step)."""
    ctx = bench.ctx(path.setup)
    state = initial_state(ctx, Usage(path.setup.spent, 0, path.setup.spent, 0))
    hits = []
    for step in path.steps:
        match, outcome = matched_transition(state, step.input, ctx)
        hits.append((match.row.index, match.checked))
        state = outcome.next_state
    return PathRun(path, "transition", tuple(hits), _divergence(path, hits))


def _divergence(path: ChartPath, hits: Sequence[Hit]) -> str | None:
    """Where the hits leave the path's plan (None if they follow it)."""
    for position, step in enumerate(path.steps):
        planned = (step.target.row, step.target.checked)
        if position >= len(hits):
            return f"the run stopped after step {position} of {len(path.steps)}"
        if hits[position] != planned:
            row, checked = hits[position]
            took = "".join("T" if value else "F" for _, value in checked) or "-"
            return (
                f"step {position + 1} took row {row} ({took}), "
                f"not row {planned[0]} ({step.target.outcome()})"
            )
    return None


# ---------------------------------------------------------------- through the driver


class Controller:
    """What the path's run asks of the test as it goes; `seq` is the transitions applied."""

    def __init__(self, steps: tuple[PathStep, ...]) -> None:
        self.steps = steps
        self.seq = 0
        self.root: Run | None = None
        self.hits: list[Hit] = []

    def next_input(self) -> Any:
        return self.steps[self.seq].input if self.seq < len(self.steps) else None

    def tool_output(self, call_id: str) -> str:
        inp = self.next_input()
        if inp is not None and inp.kind == "fail":
            raise FatalToolError(FATAL_MESSAGE)
        for result in getattr(inp, "results", ()):
            if result.call_id == call_id:
                content: str = result.content
                return content
        return PROBE_OUTPUT

    def block(self) -> None:
        if self.root is not None:
            self.root.expire_after(0)

    def effect_output(self, effect: str) -> JsonValue:
        inp = self.next_input()
        if inp is not None and inp.kind == "fail":
            raise RuntimeError(EFFECT_FAILURE)
        if inp is not None and inp.kind == "effect_result":
            output: JsonValue = inp.output
            return output
        return PROBE_EFFECT_OUTPUT

    async def verdict(self) -> GuardrailResult:
        inp = self.next_input()
        if inp is not None and inp.kind == "fail":  # the check outlasts the run's deadline
            self.block()
            await asyncio.Event().wait()
        error = getattr(inp, "error", None)
        if error is not None:
            return GuardrailResult(True, error.message)
        return GuardrailResult(False)

    def approve(self, request: ApprovalRequest, context: RunContext[Any]) -> bool:
        inp = self.next_input()
        if inp is not None and inp.kind == "fail":
            raise RuntimeError(HANDLER_FAILURE)
        for decision in getattr(inp, "decisions", ()):
            if decision.call_id == request.call.call_id:
                approved: bool = decision.approved
                return approved
        return True


class Recorder:
    """The root run's trace sink: records each transition's row, stops the run where planned."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def started(self, run: TracedRun) -> None:
        if self.controller.root is None and isinstance(run, Run):
            self.controller.root = run

    def transition(self, run: TracedRun, record: TransitionRecord) -> None:
        controller = self.controller
        if controller.root is None or run.run_id != controller.root.run_id:
            return  # a run nested in the path's run: the handoff target
        match = record.match  # the run matched the row with its outcome: no guard runs again
        assert match is not None, "a run keeps the row it took when it has a trace sink"
        controller.hits.append((match.row.index, match.checked))
        controller.seq = record.seq
        ended = record.outcome.next_state.phase in TERMINAL_PHASES
        upcoming = controller.next_input()
        if isinstance(run, Run) and not ended:
            if upcoming is not None and upcoming.kind == "cancel":
                run.cancel(upcoming.reason)
            elif upcoming is None:
                run.cancel(TAIL_REASON)

    def effect(self, run: TracedRun, event: Any) -> None:
        return None


def turns_of(bench: Bench, path: ChartPath, states: Sequence[Any]) -> list[Turn]:
    """The scripted model's turns: the path's responses, and its handoff target's, in order."""
    ctx = bench.ctx(path.setup)
    turns: list[Turn] = []
    for step, state in zip(path.steps, states, strict=False):
        if state.phase in TERMINAL_PHASES or step.input.kind == "start":
            continue
        action = next_action_of(state, ctx)
        if isinstance(action, CallModel):
            turns += _model_turns(step.input)
        elif isinstance(action, Handoff):
            turns += _target_turns(step.input)
    return turns


def _model_turns(inp: Any) -> list[Turn]:
    if inp.kind == "model_response":
        return [ScriptedTurn(inp.items, inp.usage, inp.finish_reason)]
    if inp.kind == "fail":
        return [_failing(inp.error, inp.usage)]
    return []  # a cancel lands before the model is called


def _target_turns(inp: Any) -> list[Turn]:
    if inp.kind == "handoff_result":
        if inp.output is not None:
            return [ScriptedTurn((AssistantMessage(inp.output.text or ""),), inp.usage)]
        return [_failing(inp.error, inp.usage)]
    if inp.kind == "cancel":  # the target completes; the cancel then lands
        return [ScriptedTurn((AssistantMessage(CHILD_TEXT),), CHILD_USAGE)]
    if inp.kind == "fail":  # the target blocks until the root run's deadline passes
        return [ScriptedTurn((ToolCall("call_block", PROBE_BLOCK_TOOL, "{}"),), CHILD_USAGE)]
    return []


def _failing(error: Any, usage: Usage) -> Turn:
    def fail(request: ModelInput) -> str:
        raise ModelError(error, usage=usage)

    return fail


async def drive(bench: Bench, path: ChartPath) -> PathRun:
    """Run `path` through the driver and check that each step took its planned row."""
    states = states_of(bench, path)
    mode, _ = approval_mode(path, states)
    controller = Controller(path.steps)
    agent = bench.subject.agent(ScriptedModel(turns_of(bench, path, states)))
    agent = variant(agent, path.setup, controller, approvals=mode == "handler")
    deps = bench.subject.deps
    context = RunContext(deps() if deps is not None else None)
    recorder = Recorder(controller)
    items = path.steps[0].input.items
    spent = path.setup.spent
    if spent:  # a run that starts having spent tokens (a parent's, say): Run takes its usage
        usage = Usage(spent, 0, spent, 0)
        run = Run(agent, input=items, context=context, usage=usage, trace=recorder)
        result = RunResultStreaming(run, timeout=agent.config.timeout)
    else:
        result = agent.run(items, context=context, trace=recorder)
    try:
        async with asyncio.timeout(PATH_TIMEOUT):
            await _play(result, agent, context, recorder)
    except TimeoutError:
        return _ran(path, controller, f"the run did not end within {PATH_TIMEOUT:g} seconds")
    except Exception as exc:
        return _ran(path, controller, f"the driver raised {type(exc).__name__}: {exc}")
    return _ran(path, controller, _divergence(path, controller.hits))


async def _play(
    result: RunResultStreaming, agent: Any, context: RunContext[Any], recorder: Recorder
) -> None:
    """Stream the run to its end, resuming it with the planned decisions while it waits."""
    controller = recorder.controller
    while True:
        last: Any = None
        async for event in result:
            last = event
        inp = controller.next_input()
        run = result.run
        if not isinstance(last, RunSuspended) or run is None or inp is None:
            return
        if inp.kind != "approval_decisions":
            return
        decisions = _bound(inp.decisions, last.pending)
        resumed = Run.from_snapshot(
            agent, run.snapshot(), decisions, context=context, trace=recorder
        )
        controller.root = resumed
        result = RunResultStreaming(resumed, timeout=agent.config.timeout)


def _bound(
    planned: Sequence[ApprovalDecision], pending: Sequence[ApprovalRequest]
) -> list[ApprovalDecision]:
    """The planned decisions, made on the requests the suspension gave (bound to it)."""
    by_id = {request.call.call_id: request for request in pending}
    decided = []
    for decision in planned:
        request = by_id[decision.call_id]
        decided.append(
            request.approve(decision.reason)
            if decision.approved
            else request.reject(decision.reason)
        )
    return decided


def _ran(path: ChartPath, controller: Controller, failure: str | None) -> PathRun:
    return PathRun(path, "driver", tuple(controller.hits), failure)
