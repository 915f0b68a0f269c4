"""The actions of the guardrails' phases, CheckingOutput and CheckingInput.

A completing row of a run whose agent has output guardrails goes to CheckingOutput instead
of Done (`check_output`, `check_structured`, `check_handoff`: the completing action's own
outcome, held): its events and appends stand, but `RunCompleted` waits, and the action is
`CheckGuardrails` on the answer. The verdict comes back as an input: passed, the run
completes with the answer held (`complete_checked`); a guardrail that tripped, or whose
check raised, fails it (`fail_guardrail`). A stop during the check fails it from
CheckingOutput, as from any phase, the answer's usage counted.

A chart that checks its input as rows (`ChartSpec.checks_input`) gives each start row a
guarded twin in front of it (`input_guarded`): the same action, its outcome held in
CheckingInput (`hold_input`, which the compiled twin runs): its events
and appends stand (the user's input is in the conversation the guardrails check), its action
waits, and the action is `CheckGuardrails(None)`. Passed, the run goes on in the state held,
with the action held (`resume_input`); otherwise it fails as the answer's check does
(`fail_guardrail`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from helikon.core.chart.actions.outcome import Outcome, failure
from helikon.core.chart.actions.response import complete, complete_structured
from helikon.core.chart.actions.stops import complete_handoff
from helikon.core.context import TransitionCtx
from helikon.core.errors import GuardrailTripped
from helikon.core.events import GuardrailTriggered, RunCompleted
from helikon.core.state import TERMINATE, CheckGuardrails, CheckingInput, CheckingOutput, Done


def held(outcome: Outcome) -> Outcome:
    """A completing outcome, its answer held in CheckingOutput for the output guardrails:
    the same events and appends, without `RunCompleted`."""
    done = outcome.next_state
    assert isinstance(done, Done)  # every action held here completes
    output = done.output
    events = tuple(event for event in outcome.events if type(event) is not RunCompleted)
    return Outcome(
        CheckingOutput(output), events, CheckGuardrails(output), outcome.conversation_appends
    )


def check_output(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Hold the response's text (as `complete` would finish with it) for the output
    guardrails."""
    return held(complete(state, inp, ctx, "Done"))


def check_structured(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Hold the validated value (as `complete_structured` would finish with it) for the
    output guardrails."""
    return held(complete_structured(state, inp, ctx, "Done"))


def check_handoff(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Hold the handoff target's output (as `complete_handoff` would finish with it) for
    the output guardrails."""
    return held(complete_handoff(state, inp, ctx, "Done"))


def complete_checked(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """The output guardrails passed: finish with the answer held."""
    return Outcome(Done(state.output), (RunCompleted.of(state.output),), TERMINATE, ())


def fail_guardrail(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """A guardrail refused the answer: fail with its error, `GuardrailTriggered` first when
    it tripped (a check that raised did not trigger: `GuardrailFailed`, `RunFailed` only)."""
    error = inp.error
    triggered = (
        (GuardrailTriggered(error.guardrail, error.stage, error.message),)
        if isinstance(error, GuardrailTripped)
        else ()
    )
    return failure(error, state.usage, triggered)


Action = Callable[[Any, Any, TransitionCtx, str], Outcome]


def hold_input(action: Action, target: str) -> Action:
    """`action`, a start row's to `target`, its outcome held in CheckingInput for the input
    guardrails: the same events and appends, its state and action kept for `resume_input`.
    (Compiled into the start row's twin, whose own target is CheckingInput.)"""

    def held_for_input(state: Any, inp: Any, ctx: TransitionCtx, checking: str) -> Outcome:
        outcome = action(state, inp, ctx, target)
        held: Any = outcome.next_state  # not terminal: only start rows that go on are held
        checking_input = CheckingInput(held, outcome.next_action, state, inp)
        return Outcome(
            checking_input, outcome.events, CheckGuardrails(None), outcome.conversation_appends
        )

    held_for_input.__doc__ = action.__doc__
    return held_for_input


def resume_input(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """The input guardrails passed: go on as the start row held, in its state with its
    action."""
    return Outcome(state.held, (), state.action, ())
