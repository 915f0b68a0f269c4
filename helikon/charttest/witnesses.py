"""Witnesses for helikon's own guards (`helikon.core.chart.guards`), one per guard.

Each builder makes the smallest change that gives its guard the wanted value: a model
response's finish reason, text or calls; the approvals decided; how a handoff ended; the
guardrail's verdict; or the setup (an output type, a limit, a probe tool, the synthetic
handoff target, the probe guardrail, for the output or the input). Calls go to the
probe tools only, so every result a path plans is one the driver can produce; a handoff goes
to the synthetic target, whose run the path scripts.
"""

from __future__ import annotations

from collections.abc import Mapping

from helikon.charttest.draft import Draft, Witness
from helikon.charttest.inputs import tripped
from helikon.charttest.setup import (
    CHILD_ERROR,
    CHILD_TEXT,
    CHILD_USAGE,
    INVALID_ANSWER,
    PROBE_ASK_TOOL,
    PROBE_HANDOFF,
    PROBE_TOOL,
    VALID_PROBE_ANSWER,
)
from helikon.core.chart.guards import is_complete_json, opening_turn
from helikon.core.items import ZERO_USAGE, FinalOutput, ToolCall
from helikon.core.state import ApprovalDecisions, GuardrailVerdict, HandoffResult


def _spent(draft: Draft) -> int:
    """Tokens the budget guard counts: the run's so far and the input's."""
    usage = getattr(draft.input, "usage", ZERO_USAGE)
    return int(draft.state.usage.total_tokens + usage.total_tokens)


def _exhaust_budget(draft: Draft) -> Draft | None:
    spent = _spent(draft)
    if spent == 0:  # nothing spent yet: the run starts having spent a token
        return draft.with_setup(spent=1, token_budget=1)
    budget = draft.ctx.token_budget
    return draft if budget is not None and budget <= spent else draft.with_setup(token_budget=spent)


def _keep_budget(draft: Draft) -> Draft | None:
    budget = draft.ctx.token_budget
    if budget is None or _spent(draft) < budget:
        return draft
    return draft.with_setup(token_budget=None)


def _output_only(draft: Draft) -> Draft | None:
    output = "probe" if draft.setup.output == "none" else draft.setup.output
    return draft.with_setup(output=output, bare=True, probes=(), handoff=False)


def _not_output_only(draft: Draft) -> Draft | None:
    ctx = draft.ctx
    if ctx.output is None or ctx.tools or ctx.handoffs:
        return draft
    return draft.under(draft.setup.with_probe("allow"))


def _truncate(draft: Draft) -> Draft | None:
    whole = draft.keep_calls(lambda call: not is_complete_json(call.arguments))
    return whole.with_finish("length")


def _finish(draft: Draft) -> Draft | None:
    return draft.with_finish("stop") if draft.input.finish_reason == "length" else draft


def _empty(draft: Draft) -> Draft | None:
    return draft.with_items(())


def _say_something(draft: Draft) -> Draft | None:
    if draft.calls or draft.text.strip():
        return draft
    return draft.with_text("ok")


def _duplicate_ids(draft: Draft) -> Draft | None:
    called = draft if draft.calls else _call_probe(draft)
    if called is None:
        return None
    first = called.calls[0]
    return called.add_call(PROBE_TOOL, "{}", call_id=first.call_id)


def _unique_ids(draft: Draft) -> Draft | None:
    seen: set[str] = set()
    items = []
    for item in draft.items:
        if type(item) is ToolCall:
            if item.call_id in seen:
                continue
            seen.add(item.call_id)
        items.append(item)
    return draft.with_items(tuple(items))


def _hand_off(draft: Draft) -> Draft | None:
    if any(call.name == PROBE_HANDOFF for call in draft.calls):
        return draft
    with_target = draft.with_setup(handoff=True)
    return with_target.add_call(PROBE_HANDOFF, "{}")


def _no_handoff(draft: Draft) -> Draft | None:
    return draft.keep_calls(lambda call: call.name not in draft.ctx.handoffs)


def _ask(draft: Draft) -> Draft | None:
    """Two calls that ask, so that a later step can decide one and leave the other."""
    if any(call.name == PROBE_ASK_TOOL for call in draft.calls):
        return draft
    asking = draft.under(draft.setup.with_probe("ask"))
    return asking.add_call(PROBE_ASK_TOOL).add_call(PROBE_ASK_TOOL)


def _no_asking(draft: Draft) -> Draft | None:
    ctx = draft.ctx
    return draft.keep_calls(lambda call: call.name in ctx.handoffs or ctx.permission(call) != "ask")


def _call_probe(draft: Draft) -> Draft | None:
    if draft.calls:
        return draft
    return draft.under(draft.setup.with_probe("allow")).add_call(PROBE_TOOL)


def _no_calls(draft: Draft) -> Draft | None:
    return draft.keep_calls(lambda call: False)


def _with_output_type(draft: Draft) -> Draft | None:
    return draft if draft.ctx.output is not None else draft.with_setup(output="probe")


def _without_output_type(draft: Draft) -> Draft | None:
    return draft if draft.ctx.output is None else draft.with_setup(output="none")


def _decide_all(draft: Draft) -> Draft | None:
    pending = getattr(draft.state, "pending", ())
    return draft.with_input(ApprovalDecisions(tuple(request.approve() for request in pending)))


def _decide_some(draft: Draft) -> Draft | None:
    """The first call approved, the rest left waiting (none decided when only one waits)."""
    pending = tuple(getattr(draft.state, "pending", ()))
    if not pending:
        return None  # with nothing pending, every call is decided
    decided = (pending[0].approve(),) if len(pending) > 1 else ()
    return draft.with_input(ApprovalDecisions(decided))


def _turns_used(draft: Draft) -> Draft | None:
    opening = opening_turn(draft.state, draft.input, draft.ctx)
    return draft.with_setup(max_turns=opening) if opening >= 1 else None  # max_turns >= 1


def _turns_left(draft: Draft) -> Draft | None:
    opening = opening_turn(draft.state, draft.input, draft.ctx)
    if opening < draft.ctx.max_turns:
        return draft
    return draft.with_setup(max_turns=opening + 1)


def _context_tokens(draft: Draft) -> int:
    added = sum(len(result.content) for result in getattr(draft.input, "results", ()))
    return int(getattr(draft.state, "context_tokens", 0) + added // 4)


def _over_context(draft: Draft) -> Draft | None:
    tokens = _context_tokens(draft)
    if tokens < 1:
        return None  # no threshold (at least 1) is reached by an empty context
    threshold = draft.ctx.compaction_threshold
    if threshold is not None and threshold <= tokens:
        return draft
    return draft.with_setup(compaction_threshold=tokens)


def _under_context(draft: Draft) -> Draft | None:
    threshold = draft.ctx.compaction_threshold
    if threshold is None or _context_tokens(draft) < threshold:
        return draft
    return draft.with_setup(compaction_threshold=None)


def _valid_output(draft: Draft) -> Draft | None:
    # An agent's own output type cannot be built from text in general: use the probe type.
    typed = draft if draft.setup.output == "probe" else draft.with_setup(output="probe")
    return _no_calls(typed.with_text(VALID_PROBE_ANSWER))


def _invalid_output(draft: Draft) -> Draft | None:
    typed = _with_output_type(draft)
    return None if typed is None else typed.with_text(INVALID_ANSWER)


def _guarded(draft: Draft) -> Draft | None:
    return draft.with_setup(guarded=True)


def _unguarded(draft: Draft) -> Draft | None:
    return draft.with_setup(guarded=False)


def _input_guarded(draft: Draft) -> Draft | None:
    return draft.with_setup(input_guarded=True)


def _input_unguarded(draft: Draft) -> Draft | None:
    return draft.with_setup(input_guarded=False)


def _passed(draft: Draft) -> Draft | None:
    return draft.with_input(GuardrailVerdict())


def _tripped(draft: Draft) -> Draft | None:
    return draft.with_input(GuardrailVerdict(tripped(draft.state)))


def _target_done(draft: Draft) -> Draft | None:
    output = FinalOutput(CHILD_TEXT, None, CHILD_USAGE)
    return draft.with_input(HandoffResult(output, None, CHILD_USAGE))


def _target_failed(draft: Draft) -> Draft | None:
    return draft.with_input(HandoffResult(None, CHILD_ERROR, CHILD_USAGE))


BUILTIN_WITNESSES: Mapping[str, Witness] = {
    "budget_exhausted": Witness(_exhaust_budget, _keep_budget),
    "output_only": Witness(_output_only, _not_output_only),
    "truncated": Witness(_truncate, _finish),
    "empty": Witness(_empty, _say_something),
    "duplicate_call_ids": Witness(_duplicate_ids, _unique_ids),
    "has_handoff": Witness(_hand_off, _no_handoff),
    "needs_approval": Witness(_ask, _no_asking),
    "has_tool_calls": Witness(_call_probe, _no_calls),
    "has_output_type": Witness(_with_output_type, _without_output_type),
    "all_decided": Witness(_decide_all, _decide_some),
    "turn_limit_reached": Witness(_turns_used, _turns_left),
    "over_context_budget": Witness(_over_context, _under_context),
    "output_valid": Witness(_valid_output, _invalid_output),
    "succeeded": Witness(_target_done, _target_failed),
    "output_guarded": Witness(_guarded, _unguarded),
    "input_guarded": Witness(_input_guarded, _input_unguarded),
    "passed": Witness(_passed, _tripped),
}
"""A witness for every guard of `helikon.core.chart.guards.GUARDS`, by the guard's name."""
