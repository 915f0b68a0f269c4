"""The default loop, authored as a python-statemachine chart.

Each `State` is a phase (its name is the phase name), each event an input kind, each
transition a row: `cond=` names guards, `unless=` negated guards, `on=` the one action.
Alternatives of an event are tried in order, so order is priority. `compile_chart` turns the
class into a `TransitionTable`; nothing here runs at run time.
"""

from __future__ import annotations

from typing import Any, ClassVar

from statemachine import State, StateChart


class LoopChart(StateChart[Any]):
    """Base class for helikon loop charts.

    python-statemachine's own graph checks are switched off so that `compile_chart` makes
    them, with errors that name the state and the input. A chart may set `awaits` (phase ->
    input kinds it waits for, for custom phases that wait for more than a model response)
    and `prompts` (phase -> instructions for a model-calling custom phase), and
    `checks_input` (check the input guardrails as rows at the run's start:
    `ChartSpec.checks_input`).
    """

    validate_disconnected_states = False
    validate_trap_states = False
    validate_final_reachability = False
    awaits: ClassVar[dict[str, tuple[str, ...]]] = {}
    prompts: ClassVar[dict[str, str]] = {}
    checks_input: ClassVar[bool] = False


class AgentLoopChart(LoopChart):
    """helikon's default agent loop: the input guardrails' check at the start (its start
    rows' twins and CheckingInput, derived: `checks_input`), model, tools, approvals,
    handoffs, structured output with one repair, compaction, the output guardrails' check
    before the run completes, and cancellation from any phase."""

    checks_input = True

    calling_model = State("CallingModel", initial=True)
    executing_tools = State("ExecutingTools")
    approval = State("NeedsApproval")
    applying_handoff = State("ApplyingHandoff")
    finalizing = State("Finalizing")
    repairing_output = State("RepairingOutput")
    checking_output = State("CheckingOutput")
    compacting = State("Compacting")
    done = State("Done", final=True)
    failed = State("Failed", final=True)

    start = (
        calling_model.to(failed, cond="budget_exhausted", on="fail_budget")
        | calling_model.to(finalizing, cond="output_only", on="start_turn")
        | calling_model.to.itself(on="start_turn")
    )
    model_response = (
        calling_model.to(failed, cond="truncated", on="fail_truncated")
        | calling_model.to(failed, cond="empty", on="fail_empty")
        | calling_model.to(failed, cond="duplicate_call_ids", on="fail_duplicate_calls")
        | calling_model.to(applying_handoff, cond="has_handoff", on="apply_handoff")
        | calling_model.to(approval, cond="needs_approval", on="request_approval")
        | calling_model.to(executing_tools, cond="has_tool_calls", on="execute_tools")
        | calling_model.to(finalizing, cond="has_output_type", on="finalize")
        | calling_model.to(checking_output, cond="output_guarded", on="check_output")
        | calling_model.to(done, on="complete")
        | compacting.to(calling_model, on="apply_summary")
        | finalizing.to(repairing_output, unless="output_valid", on="repair")
        | finalizing.to(checking_output, cond="output_guarded", on="check_structured")
        | finalizing.to(done, on="complete_structured")
        | repairing_output.to(failed, unless="output_valid", on="fail_structured")
        | repairing_output.to(checking_output, cond="output_guarded", on="check_structured")
        | repairing_output.to(done, on="complete_structured")
    )
    approval_decisions = approval.to(
        executing_tools, cond="all_decided", on="run_approved"
    ) | approval.to.itself(on="record_decisions")
    tool_results = (
        executing_tools.to(failed, cond="turn_limit_reached", on="fail_max_turns")
        | executing_tools.to(compacting, cond="over_context_budget", on="compact")
        | executing_tools.to(failed, cond="budget_exhausted", on="fail_budget")
        | executing_tools.to(calling_model, on="next_turn")
    )
    handoff_result = (
        applying_handoff.to(failed, unless="succeeded", on="fail_handoff")
        | applying_handoff.to(checking_output, cond="output_guarded", on="check_handoff")
        | applying_handoff.to(done, on="complete_handoff")
    )
    guardrail_verdict = checking_output.to(
        done, cond="passed", on="complete_checked"
    ) | checking_output.to(failed, on="fail_guardrail")
    cancel = failed.from_.any(on="cancel_run")
    fail = failed.from_.any(on="fail_run")


AGENT_LOOP: Any = AgentLoopChart
