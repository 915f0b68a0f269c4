"""The actions that end a run whatever phase it is in, and a handoff's end.

A handed-off agent finishing or failing ends this run the same way; a cancel or the driver's
error fails it, closing the batch's unfinished calls; a terminal phase absorbs every input; an
input a phase never waits for fails the run closed (UnexpectedInput).
"""

from __future__ import annotations

from typing import Any

from helikon.core.chart.actions.batch import outstanding
from helikon.core.chart.actions.outcome import Outcome, failure, with_usage
from helikon.core.context import TransitionCtx
from helikon.core.errors import Cancelled, UnexpectedInput
from helikon.core.events import RunCompleted
from helikon.core.items import FinalOutput
from helikon.core.state import TERMINATE, Done

# ---------------------------------------------------------------- handoffs


def complete_handoff(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """The target finished: so does this run, with its output and both agents' usage."""
    usage = state.usage + inp.usage
    output = FinalOutput(inp.output.text, inp.output.value, usage)
    return Outcome(Done(output), (RunCompleted.of(output),), TERMINATE, ())


def fail_handoff(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """The target failed: so does this run, with the target's error."""
    error = inp.error if inp.error is not None else UnexpectedInput(state.phase, inp.kind)
    return failure(error, state.usage + inp.usage)


# ---------------------------------------------------------------- from any phase


# ---------------------------------------------------------------- from any phase


def cancel_run(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Fail with Cancelled, counting its usage; unfinished tool calls get a "cancelled" result."""
    closed = outstanding(state, "cancelled", "cancelled: the run was cancelled", inp.results)
    return failure(Cancelled(inp.reason), with_usage(state, inp), (), closed)


def fail_run(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Fail with the driver's error, counting what it carries (finished sub-agents, the
    failed model call); unfinished tool calls get a "cancelled" result."""
    closed = outstanding(state, "cancelled", "cancelled: the run failed", inp.results)
    return failure(inp.error, with_usage(state, inp), (), closed)


def absorb(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """A terminal phase absorbs every input: same state, no events, Terminate."""
    return Outcome(state, (), TERMINATE, ())


def reject_input(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """An input this phase never waits for: fail closed with UnexpectedInput."""
    closed = outstanding(state, "cancelled", "cancelled: the run failed")
    return failure(UnexpectedInput(state.phase, inp.kind), state.usage, (), closed)
