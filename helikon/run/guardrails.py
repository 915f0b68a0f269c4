"""Guardrails: checks on a run's input (before the first model call) and its final output.

A check returns a `GuardrailResult`, a bool (true trips the wire) or an awaitable of either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from helikon.core.errors import GuardrailFailed, GuardrailTripped
from helikon.core.items import FinalOutput, Item, UserMessage
from helikon.core.state import TransitionOutcome
from helikon.core.transition import trip_output_guardrail
from helikon.run.config import RunContext


@dataclass(frozen=True)
class GuardrailResult:
    """A guardrail's verdict: `tripwire` true stops the run."""

    tripwire: bool
    message: str = ""


GuardrailAnswer = GuardrailResult | bool | Awaitable[GuardrailResult | bool]


@dataclass(frozen=True)
class InputGuardrail:
    """Checked on the user's input before the first model call."""

    name: str
    check: Callable[[str, RunContext[Any]], GuardrailAnswer]


@dataclass(frozen=True)
class OutputGuardrail:
    """Checked on the final output before the run completes."""

    name: str
    check: Callable[[FinalOutput, RunContext[Any]], GuardrailAnswer]


async def verdict(answer: Any) -> GuardrailResult:
    """A check's answer as a `GuardrailResult` (awaited when it is awaitable)."""
    if isinstance(answer, Awaitable):
        answer = await answer
    return answer if isinstance(answer, GuardrailResult) else GuardrailResult(bool(answer))


async def tripped_input(
    guardrails: Sequence[InputGuardrail], items: Sequence[Item], context: RunContext[Any]
) -> GuardrailTripped | GuardrailFailed | None:
    """The first input guardrail that trips on the run's user messages, as an error; a check
    that raises is `GuardrailFailed` (it cannot decide, so the run fails closed)."""
    text = "\n".join(item.content for item in items if isinstance(item, UserMessage))
    for guardrail in guardrails:
        try:
            result = await verdict(guardrail.check(text, context))
        except Exception as exc:
            return GuardrailFailed(guardrail.name, "input", f"{type(exc).__name__}: {exc}")
        if result.tripwire:
            return GuardrailTripped(guardrail.name, "input", result.message)
    return None


async def checked_output(
    guardrails: Sequence[OutputGuardrail], outcome: TransitionOutcome, context: RunContext[Any]
) -> TransitionOutcome:
    """A completing step's outcome, or the failing one when an output guardrail trips or its
    check raises."""
    output = outcome.next_state.output  # type: ignore[union-attr]  # Done, checked by caller
    error = await tripped_output(guardrails, output, context)
    return outcome if error is None else trip_output_guardrail(outcome, error)


def recorded_verdict(recorded: TransitionOutcome) -> GuardrailTripped | GuardrailFailed | None:
    """The output guardrails' verdict on a completing step, as its recorded outcome holds
    it: the error a guardrail failed the run with, or None (the step completed)."""
    state = recorded.next_state
    error = getattr(state, "error", None) if state.phase == "Failed" else None
    if isinstance(error, GuardrailTripped | GuardrailFailed) and error.stage == "output":
        return error
    return None


async def tripped_output(
    guardrails: Sequence[OutputGuardrail], output: FinalOutput, context: RunContext[Any]
) -> GuardrailTripped | GuardrailFailed | None:
    """The first output guardrail that trips on `output`, as an error; a check that raises
    is `GuardrailFailed`."""
    for guardrail in guardrails:
        try:
            result = await verdict(guardrail.check(output, context))
        except Exception as exc:
            return GuardrailFailed(guardrail.name, "output", f"{type(exc).__name__}: {exc}")
        if result.tripwire:
            return GuardrailTripped(guardrail.name, "output", result.message)
    return None
