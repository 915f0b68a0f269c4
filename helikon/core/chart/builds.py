"""What each default action builds, checked against its row's target when a chart compiles.

Theory of operation: an action receives its row's target and returns the next state, but
most default actions decide the next state's phase themselves: `complete` builds Done
whatever the row says, `execute_tools` ExecutingTools, `enter_effect` the state of an effect
phase. A row whose target is not what its action builds would enter a phase the table does
not show (or fail at run time), so `check_targets` (helikon.core.chart.validate) refuses it,
naming the row and both phases. Actions are matched by function, so a name bound to a default
action (`record_plan="keep_reply"`) is checked as that action, and a chart's own functions,
whose states helikon cannot know, are not checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from helikon.core.chart import actions as a

MODEL_CALLING = "a model-calling phase"
CUSTOM = "a custom phase"
EFFECT = "an effect phase"

BUILDS: Mapping[Callable[..., Any], str] = {
    a.fail_budget: "Failed",
    a.fail_truncated: "Failed",
    a.fail_empty: "Failed",
    a.fail_duplicate_calls: "Failed",
    a.fail_max_turns: "Failed",
    a.fail_structured: "Failed",
    a.fail_handoff: "Failed",
    a.cancel_run: "Failed",
    a.fail_run: "Failed",
    a.complete: "Done",
    a.complete_structured: "Done",
    a.complete_handoff: "Done",
    a.complete_checked: "Done",
    a.fail_guardrail: "Failed",
    a.check_output: "CheckingOutput",
    a.check_structured: "CheckingOutput",
    a.check_handoff: "CheckingOutput",
    a.apply_handoff: "ApplyingHandoff",
    a.request_approval: "NeedsApproval",
    a.record_decisions: "NeedsApproval",
    a.execute_tools: "ExecutingTools",
    a.run_approved: "ExecutingTools",
    a.repair: "RepairingOutput",
    a.start_turn: MODEL_CALLING,
    a.finalize: MODEL_CALLING,
    a.compact: MODEL_CALLING,
    a.next_turn: MODEL_CALLING,
    a.apply_summary: MODEL_CALLING,
    a.keep_reply: MODEL_CALLING,
    a.keep_effect_result: MODEL_CALLING,
    a.enter_phase: CUSTOM,
    a.enter_effect: EFFECT,
}
"""Default action -> the phase its next state is in, or the kind of phase (the row's target,
which must be of that kind)."""


def built(
    action: Callable[..., Any], target: str, custom: frozenset[str], effects: Mapping[str, str]
) -> str | None:
    """What `action` builds when its row goes to `target`, if that is not `target` (None
    when they agree, or when the action is not a default one). `custom` names the chart's
    custom phases, `effects` its effect phases."""
    builds = BUILDS.get(action)
    if builds is None or builds == target:
        return None
    fits = {
        MODEL_CALLING: target in a.MODEL_PHASES or (target in custom and target not in effects),
        CUSTOM: target in custom and target not in effects,
        EFFECT: target in effects,
    }
    return None if fits.get(builds, False) else builds
