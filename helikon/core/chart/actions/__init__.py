"""The default chart's named actions: pure builders of a transition's outcome.

An action receives (state, input, ctx, target), where `target` is the phase the chart's row
names, and returns the `TransitionOutcome`: the next state (in phase `target`), the events in
order, the next action and the items to append. Actions never mutate their arguments.

Every tool call the model asked for leaves here with exactly one result, whichever way the
batch ends (executed, denied, rejected, skipped or cancelled).

This module is the registry: `ACTIONS`, the names a chart's rows may use, and
`IMPLICIT_ACTIONS`, those of the rows the compiler adds. The actions live beside it, by what
they consume:

- outcome.py: the pieces every action builds from (entering a model-calling phase, failing)
- batch.py: a tool batch's bookkeeping (one result per call, permissions, approval decisions)
- response.py: a run's start, a model response, the structured output of the constrained turn
- results.py: approval decisions and tool results coming back, the turn limit, a summary
- phases.py: custom phases (a model call with its prompt) and effect phases
- stops.py: a handoff's end and the rows from any phase (cancel, fail, absorb, reject)
- guardrails.py: the guardrails' phases (the answer held, then completed or failed; a start
  held, then resumed or failed)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from helikon.core.chart.actions.guardrails import (
    check_handoff,
    check_output,
    check_structured,
    complete_checked,
    fail_guardrail,
    hold_input,
    resume_input,
)
from helikon.core.chart.actions.outcome import MODEL_PHASES, model_phase
from helikon.core.chart.actions.phases import (
    enter_effect,
    enter_phase,
    keep_effect_result,
    keep_reply,
)
from helikon.core.chart.actions.response import (
    apply_handoff,
    complete,
    complete_structured,
    execute_tools,
    fail_budget,
    fail_duplicate_calls,
    fail_empty,
    fail_structured,
    fail_truncated,
    finalize,
    repair,
    request_approval,
    start_turn,
)
from helikon.core.chart.actions.results import (
    apply_summary,
    compact,
    fail_max_turns,
    next_turn,
    record_decisions,
    run_approved,
)
from helikon.core.chart.actions.stops import (
    absorb,
    cancel_run,
    complete_handoff,
    fail_handoff,
    fail_run,
    reject_input,
)
from helikon.core.context import TransitionCtx
from helikon.core.state import TransitionOutcome

Action = Callable[[Any, Any, TransitionCtx, str], TransitionOutcome]

ACTIONS: Mapping[str, Action] = {
    action.__name__: action
    for action in (
        start_turn,
        fail_budget,
        fail_truncated,
        fail_empty,
        fail_duplicate_calls,
        apply_handoff,
        request_approval,
        execute_tools,
        finalize,
        complete,
        run_approved,
        record_decisions,
        fail_max_turns,
        compact,
        next_turn,
        apply_summary,
        complete_structured,
        repair,
        fail_structured,
        complete_handoff,
        fail_handoff,
        cancel_run,
        fail_run,
        enter_phase,
        keep_reply,
        enter_effect,
        keep_effect_result,
        check_output,
        check_structured,
        check_handoff,
        complete_checked,
        fail_guardrail,
        resume_input,
    )
}
IMPLICIT_ACTIONS: Mapping[str, Action] = {"absorb": absorb, "reject_input": reject_input}

__all__ = [
    "ACTIONS",
    "IMPLICIT_ACTIONS",
    "MODEL_PHASES",
    "Action",
    "absorb",
    "apply_handoff",
    "apply_summary",
    "cancel_run",
    "check_handoff",
    "check_output",
    "check_structured",
    "compact",
    "complete",
    "complete_checked",
    "complete_handoff",
    "complete_structured",
    "enter_effect",
    "enter_phase",
    "execute_tools",
    "fail_budget",
    "fail_duplicate_calls",
    "fail_empty",
    "fail_guardrail",
    "fail_handoff",
    "fail_max_turns",
    "fail_run",
    "fail_structured",
    "fail_truncated",
    "finalize",
    "hold_input",
    "keep_effect_result",
    "keep_reply",
    "model_phase",
    "next_turn",
    "record_decisions",
    "reject_input",
    "repair",
    "request_approval",
    "resume_input",
    "run_approved",
    "start_turn",
]
