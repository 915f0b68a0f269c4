"""`transition(state, input, ctx)`: the loop's one step, a pure function over the table.

Theory of operation: the phase of `state` and the kind of `input` select a short tuple of
rows from the compiled table (`ctx.table`); the first row whose guards all have their
expected values runs its action, which builds the outcome. The table is total, so there is
always a row: terminal phases absorb, and an input a phase never waits for fails the run
closed (`UnexpectedInput`). Nothing here does IO, reads a clock, draws randomness or mutates
its arguments: the same arguments give an equal outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helikon.core.chart.actions import model_phase
from helikon.core.context import TransitionCtx
from helikon.core.errors import GuardrailFailed, GuardrailTripped, NotInChart
from helikon.core.events import GuardrailTriggered, RunCompleted, RunFailed
from helikon.core.items import ZERO_USAGE, Usage
from helikon.core.state import (
    TERMINATE,
    ApplyingHandoff,
    AwaitApproval,
    CallModel,
    CheckGuardrails,
    CheckingInput,
    CheckingOutput,
    EffectPhase,
    ExecuteTools,
    ExecutingTools,
    Failed,
    Handoff,
    NeedsApproval,
    NextAction,
    RepairingOutput,
    RunEffect,
    TransitionOutcome,
)
from helikon.core.table import CompiledRow, Row


def transition(state: Any, inp: Any, ctx: TransitionCtx) -> TransitionOutcome:
    """Apply one input to one state.

    Args:
        state: the current `LoopState`.
        inp: the `TransitionInput` the driver observed (a model response, tool results...).
        ctx: the run's fixed facts, including the compiled table.

    Returns:
        The `TransitionOutcome`: next state, events in order, next action, appends.
    """
    try:
        rows = ctx.table.dispatch[state.phase][inp.kind]
    except (KeyError, AttributeError):
        raise not_in_chart(state, inp, ctx) from None
    for checks, action, target, _ in rows:
        for guard, expected in checks:
            held = guard(state, inp, ctx)  # a custom guard may answer any value: its truth
            if held is not expected and (held.__class__ is bool or bool(held) is not expected):
                break
        else:
            return action(state, inp, ctx, target)
    raise AssertionError("unreachable: a compiled table always ends in a fallback row")


def not_in_chart(state: Any, inp: Any, ctx: TransitionCtx) -> NotInChart:
    """The error for a (state, input) the chart has no rows for."""
    table = ctx.table
    phase = getattr(state, "phase", None)
    kind = getattr(inp, "kind", None)
    if phase not in table.dispatch:
        phases = ", ".join(p.name for p in table.phases)
        return NotInChart(
            f"state {type(state).__name__} is in phase {phase!r}, which chart {table.name!r} "
            f"does not have (its phases: {phases})"
        )
    return NotInChart(
        f"input {type(inp).__name__} (kind {kind!r}) is not an input chart {table.name!r} "
        f"knows in phase {phase!r}"
    )


@dataclass(frozen=True, slots=True)
class Match:
    """Which row a transition takes, and the value of every guard checked on the way."""

    row: Row
    checked: tuple[tuple[str, bool], ...]


def match_row(state: Any, inp: Any, ctx: TransitionCtx) -> Match:
    """The row `transition` takes for these arguments, with each guard checked and its value.

    Traces and the debugger use this; it evaluates the same guards as `transition`.
    """
    return _matched(state, inp, ctx)[1]


def matched_transition(state: Any, inp: Any, ctx: TransitionCtx) -> tuple[Match, TransitionOutcome]:
    """`transition` and `match_row` in one pass: the row taken, with every guard checked,
    and the outcome. Traces and run stores record both; each guard runs once."""
    compiled, match = _matched(state, inp, ctx)
    return match, compiled.action(state, inp, ctx, compiled.target)


def _matched(state: Any, inp: Any, ctx: TransitionCtx) -> tuple[CompiledRow, Match]:
    """The first compiled row whose guards hold, and the match that names every guard
    checked on the way to it."""
    checked: list[tuple[str, bool]] = []
    try:
        rows = ctx.table.dispatch[state.phase][inp.kind]
    except (KeyError, AttributeError):
        raise not_in_chart(state, inp, ctx) from None
    for compiled in rows:
        holds = True
        for ref, (guard, expected) in zip(compiled.row.guards, compiled.checks, strict=True):
            value = bool(guard(state, inp, ctx))
            checked.append((ref.name, value))
            if value is not expected:
                holds = False
                break
        if holds:
            return compiled, Match(compiled.row, tuple(checked))
    raise AssertionError("unreachable: a compiled table always ends in a fallback row")


def initial_state(ctx: TransitionCtx, usage: Usage = ZERO_USAGE) -> Any:
    """The state a new run starts in: the chart's initial phase at turn 0."""
    return model_phase(ctx.table.initial, 0, usage)


def next_action_of(state: Any, ctx: TransitionCtx) -> NextAction:
    """The next action of `state`: what the driver must do next in it, the basis for
    resuming from a snapshot (`pending_action` before; that name still works, and warns).

    It equals the `next_action` of the outcome that produced `state`.
    """
    phase = state.phase
    if phase not in ctx.table.dispatch:
        raise not_in_chart(state, None, ctx)
    if ctx.table.phase(phase).final:
        return TERMINATE
    if isinstance(state, ExecutingTools):
        done = {result.call_id for result in state.settled}
        return ExecuteTools(tuple(call for call in state.calls if call.call_id not in done))
    if isinstance(state, NeedsApproval):
        return AwaitApproval(state.pending)
    if isinstance(state, ApplyingHandoff):
        return Handoff(state.target, state.call_id)
    if isinstance(state, RepairingOutput):
        return CallModel(ctx.repair_request(state.errors))
    if isinstance(state, EffectPhase):
        return RunEffect(state.effect, state.args)
    if isinstance(state, CheckingOutput):
        return CheckGuardrails(state.output)
    if isinstance(state, CheckingInput):
        return CheckGuardrails(None)
    return CallModel(ctx.request_for(phase))


def trip_output_guardrail(
    outcome: TransitionOutcome, error: GuardrailTripped | GuardrailFailed
) -> TransitionOutcome:
    """The outcome of a completing step whose output an output guardrail refused, on a
    chart without a CheckingOutput phase (the old rule: helikon.run.legacy applies it).

    The step's own events and appends stand, except that `RunCompleted` gives way to
    `GuardrailTriggered`, `RunFailed` (SEMANTICS.md, Guardrails); the run ends in Failed. A
    guardrail whose check raised (`GuardrailFailed`) did not trigger: only `RunFailed`.
    """
    kept = tuple(event for event in outcome.events if type(event) is not RunCompleted)
    usage = outcome.next_state.usage
    triggered = (
        (GuardrailTriggered(error.guardrail, "output", error.message),)
        if isinstance(error, GuardrailTripped)
        else ()
    )
    events = (*kept, *triggered, RunFailed(error))
    return TransitionOutcome(Failed(error, usage), events, TERMINATE, outcome.conversation_appends)


def __getattr__(name: str) -> object:
    # a renamed name (helikon._moved.RENAMED), with a warning; imported here, so the pure
    # core loads no module outside it (tests/test_pure_core.py)
    if name.startswith("__"):  # the import system's probes (__path__, ...): not a name
        raise AttributeError(name)
    from helikon._moved import moved

    return moved(name, __name__)
