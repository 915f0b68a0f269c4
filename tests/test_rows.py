"""One case per row of the default chart (SEMANTICS.md, "Rows of the default chart").

A case is (state, input, ctx) -> the whole outcome: the next state, the events in order, the
next action and the conversation appends, all written out by hand from the contract. A case's
id names the row it must take, `<phase>+<input kind>:<guard>` (`default` for a row without a
guard, `absorbed` and `unexpected` for the table's implicit rows), optionally followed by
`/<variant>`; `test_row` checks that the table took that very row, and
`test_every_row_of_the_default_chart_has_a_case` that no declared row lacks a case.
No fixtures: every value a case needs is built right here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from helikon import (
    ApprovalDecision,
    ApprovalRequest,
    AssistantMessage,
    FinalOutput,
    ModelResponse,
    Start,
    ToolCall,
    ToolResult,
    ToolResults,
    TransitionCtx,
    Usage,
    UserMessage,
    transition,
)
from helikon.core import ApprovalDecisions, Cancel, HandoffResult, OutputSpec, match_row
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.context import COMPACT_PROMPT
from helikon.core.errors import (
    BudgetExceeded,
    Cancelled,
    EmptyModelResponse,
    GuardrailFailed,
    GuardrailTripped,
    InvalidStructuredOutput,
    MaxTurnsExceeded,
    ModelCallFailed,
    ModelOutputTruncated,
    UnexpectedInput,
)
from helikon.core.events import (
    ApprovalRequested,
    GuardrailTriggered,
    HandoffItem,
    MessageOutput,
    PermissionDenied,
    RepairStarted,
    RunCompleted,
    RunFailed,
    StructuredOutputFailed,
    ToolCallItem,
    ToolOutputItem,
    TurnStarted,
)
from helikon.core.items import CompactionSummary, Reasoning
from helikon.core.state import (
    ApplyingHandoff,
    AwaitApproval,
    CallingModel,
    CallModel,
    CheckGuardrails,
    CheckingInput,
    CheckingOutput,
    Compacting,
    Done,
    ExecuteTools,
    ExecutingTools,
    Fail,
    Failed,
    Finalizing,
    GuardrailVerdict,
    Handoff,
    ModelRequest,
    NeedsApproval,
    RepairingOutput,
    Terminate,
)
from helikon.core.table import Row

# ---------------------------------------------------------------- the values cases share


def used(input_tokens: int, output_tokens: int, requests: int = 1) -> Usage:
    return Usage(input_tokens, output_tokens, input_tokens + output_tokens, requests)


U1 = used(100, 20)  # what the run spent before this step
U2 = used(200, 30)  # what this step's model call (or tools, or handoff target) spent
U12 = Usage(300, 50, 350, 2)  # U1 + U2, written out
U2_CONTEXT = 230  # U2's input plus output: the context size after that call


def said(text: str) -> AssistantMessage:
    return AssistantMessage(text)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ran(call: ToolCall, content: str) -> ToolResult:
    return ToolResult(call.call_id, content)


def cancelled(call: ToolCall, why: str) -> ToolResult:
    return ToolResult(call.call_id, why, True, "cancelled")


LOOKUP = ToolCall("c1", "lookup", '{"q": "weather"}')  # allowed
WRITE = ToolCall("c2", "x", '{"path": "/tmp/a"}')  # asks
REMOVE = ToolCall("c3", "rm", '{"path": "/"}')  # denied
WRITE_B = ToolCall("c4", "x", '{"path": "/tmp/b"}')  # asks
TRANSFER = ToolCall("h1", "transfer_to_billing", "{}")
CUT_OFF = ToolCall("c9", "lookup", '{"q": "wea')  # arguments cut off mid-stream

ASK_WRITE = ApprovalRequest(WRITE, sha256(WRITE.arguments))
ASK_WRITE_B = ApprovalRequest(WRITE_B, sha256(WRITE_B.arguments))
REMOVE_DENIED = ToolResult("c3", "denied by policy: rm", True, "denied")

WEATHER = ran(LOOKUP, "sunny, 21C")
WRITTEN = ran(WRITE, "wrote /tmp/a")

CANCELLED = "cancelled: the run was cancelled"
FAILED = "cancelled: the run failed"


class Answer(BaseModel):
    answer: str
    confidence: int


OUT = OutputSpec.of(Answer)
ANSWER_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "Answer", "schema": Answer.model_json_schema(), "strict": True},
}
VALID = '{"answer": "4", "confidence": 90}'
VALID_VALUE = {"answer": "4", "confidence": 90}
INVALID = '{"answer": "4"}'
INVALID_ERRORS = ("confidence: Field required",)
STILL_INVALID = '{"confidence": 90}'
STILL_INVALID_ERRORS = ("answer: Field required",)

PLAIN = TransitionCtx(table=DEFAULT_TABLE)
TOOLS = TransitionCtx(table=DEFAULT_TABLE, tools={"lookup": "allow"})
POLICY = TransitionCtx(table=DEFAULT_TABLE, tools={"lookup": "allow", "x": "ask", "rm": "deny"})
TYPED = TransitionCtx(table=DEFAULT_TABLE, output=OUT)
TYPED_WITH_TOOLS = TransitionCtx(table=DEFAULT_TABLE, tools={"lookup": "allow"}, output=OUT)
HANDOFFS = TransitionCtx(
    table=DEFAULT_TABLE,
    agent="triage",
    tools={"lookup": "allow"},
    handoffs={"transfer_to_billing": "billing"},
)
GUARDED = TransitionCtx(table=DEFAULT_TABLE, tools={"lookup": "allow"}, output_guardrails=("pii",))
TYPED_GUARDED = TransitionCtx(table=DEFAULT_TABLE, output=OUT, output_guardrails=("pii",))
HANDOFFS_GUARDED = TransitionCtx(
    table=DEFAULT_TABLE,
    agent="triage",
    tools={"lookup": "allow"},
    handoffs={"transfer_to_billing": "billing"},
    output_guardrails=("pii",),
)

INPUT_GUARDED = TransitionCtx(table=DEFAULT_TABLE, input_guardrails=("pii",))
TYPED_INPUT_GUARDED = TransitionCtx(table=DEFAULT_TABLE, output=OUT, input_guardrails=("pii",))

DUPLICATE = ModelCallFailed("bad_response", "the response holds two tool calls with call id 'c2'")
TURN = CallModel(ModelRequest("turn"))
FINALIZE = CallModel(ModelRequest("finalize", tools=False, response_format=ANSWER_FORMAT))
COMPACT = CallModel(ModelRequest("compact", tools=False, prompt=COMPACT_PROMPT))
REPAIR = CallModel(
    ModelRequest("repair", tools=False, response_format=ANSWER_FORMAT, repair_errors=INVALID_ERRORS)
)
TERMINATE = Terminate()
HI = UserMessage("What is the weather?")


def tool_phase(turn: int = 1, usage: Usage = U1, context_tokens: int = 0) -> ExecutingTools:
    """The batch (lookup, rm) with rm already denied by policy."""
    return ExecutingTools((LOOKUP, REMOVE), turn, usage, (REMOVE_DENIED,), context_tokens)


def approval_phase() -> NeedsApproval:
    """The batch (lookup, x, rm, x'): lookup allowed, both x asking, rm denied by policy."""
    calls = (LOOKUP, WRITE, REMOVE, WRITE_B)
    return NeedsApproval((ASK_WRITE, ASK_WRITE_B), (LOOKUP,), 1, U1, calls, (REMOVE_DENIED,), 50)


def decisions(*decided: ApprovalDecision) -> ApprovalDecisions:
    return ApprovalDecisions(decided)


# ---------------------------------------------------------------- a case


@dataclass(frozen=True)
class Case:
    """(state, input, ctx) and the outcome the contract expects; `id` names the row."""

    id: str
    state: Any
    inp: Any
    ctx: TransitionCtx
    next_state: Any
    events: tuple[Any, ...]
    action: Any
    appends: tuple[Any, ...] = ()
    xfail: str | None = None


def row_key(row: Row) -> str:
    guards = " and ".join(map(str, row.guards))
    implicit = {"absorb": "absorbed", "reject_input": "unexpected"}.get(row.action, "default")
    return f"{row.source}+{row.input_kind}:{guards or implicit}"


# ---------------------------------------------------------------- CallingModel + start

START_CASES = [
    Case(
        "CallingModel+start:budget_exhausted",
        CallingModel(0, used(600, 400)),
        Start((HI,)),
        TransitionCtx(table=DEFAULT_TABLE, token_budget=1000),
        Failed(BudgetExceeded(1000, 1000), used(600, 400)),
        (RunFailed(BudgetExceeded(1000, 1000)),),
        TERMINATE,
        (HI,),
    ),
    Case(
        # the start held for the input guardrails: its events and appends stand
        "CallingModel+start:input_guarded and output_only",
        CallingModel(),
        Start((HI,)),
        TYPED_INPUT_GUARDED,
        CheckingInput(Finalizing(0), FINALIZE, CallingModel(), Start((HI,))),
        (TurnStarted(0),),
        CheckGuardrails(None),
        (HI,),
    ),
    Case(
        "CallingModel+start:input_guarded",
        CallingModel(),
        Start((HI,)),
        INPUT_GUARDED,
        CheckingInput(CallingModel(0), TURN, CallingModel(), Start((HI,))),
        (TurnStarted(0),),
        CheckGuardrails(None),
        (HI,),
    ),
    Case(
        "CallingModel+start:output_only",
        CallingModel(),
        Start((HI,)),
        TYPED,
        Finalizing(0),
        (TurnStarted(0),),
        FINALIZE,
        (HI,),
    ),
    Case(
        "CallingModel+start:default",
        CallingModel(),
        Start((HI,)),
        PLAIN,
        CallingModel(0),
        (TurnStarted(0),),
        TURN,
        (HI,),
    ),
    Case(
        "CallingModel+start:default/one-token-under-budget",
        CallingModel(0, used(600, 399)),
        Start((HI,)),
        TransitionCtx(table=DEFAULT_TABLE, token_budget=1000),
        CallingModel(0, used(600, 399)),
        (TurnStarted(0),),
        TURN,
        (HI,),
    ),
    Case(
        "CallingModel+start:default/output-type-with-tools",
        CallingModel(),
        Start((HI,)),
        TYPED_WITH_TOOLS,
        CallingModel(0),
        (TurnStarted(0),),
        TURN,
        (HI,),
    ),
]

# ---------------------------------------------------------------- CallingModel + model_response

BATCH = (said("Let me check."), LOOKUP, REMOVE)
ASKING = (said("Writing two files."), LOOKUP, WRITE, REMOVE, WRITE_B)
HANDING_OFF = (said("Passing you on."), LOOKUP, TRANSFER, WRITE)
SKIPPED = "skipped: control transferred to billing"

RESPONSE_CASES = [
    Case(
        "CallingModel+model_response:truncated",
        CallingModel(1, U1),
        ModelResponse((said("The weather is"), CUT_OFF), U2, "length"),
        TOOLS,
        Failed(ModelOutputTruncated("The weather is"), U12),
        (MessageOutput(said("The weather is")), RunFailed(ModelOutputTruncated("The weather is"))),
        TERMINATE,
        (said("The weather is"),),  # the partial text stays; the cut-off call never existed
    ),
    Case(
        "CallingModel+model_response:truncated/text-only",
        CallingModel(1, U1),
        ModelResponse((said("It is sun"),), U2, "length"),
        PLAIN,
        Failed(ModelOutputTruncated("It is sun"), U12),
        (MessageOutput(said("It is sun")), RunFailed(ModelOutputTruncated("It is sun"))),
        TERMINATE,
        (said("It is sun"),),
    ),
    Case(
        "CallingModel+model_response:truncated/no-text",
        CallingModel(1, U1),
        ModelResponse((CUT_OFF,), U2, "length"),
        TOOLS,
        Failed(ModelOutputTruncated(""), U12),
        (RunFailed(ModelOutputTruncated("")),),
        TERMINATE,
    ),
    Case(
        "CallingModel+model_response:empty",
        CallingModel(1, U1),
        ModelResponse((), U2, "stop"),
        PLAIN,
        Failed(EmptyModelResponse("stop"), U12),
        (RunFailed(EmptyModelResponse("stop")),),
        TERMINATE,
    ),
    Case(
        # Two calls share an id (a transition fed directly; the driver's assembler merges
        # streamed fragments per id): refused, so no result or approval is ambiguous.
        "CallingModel+model_response:duplicate_call_ids",
        CallingModel(1, U1),
        ModelResponse((said("two"), WRITE, ToolCall(WRITE.call_id, "lookup", "{}")), U2),
        POLICY,
        Failed(DUPLICATE, U12),
        (RunFailed(DUPLICATE),),
        TERMINATE,
        (said("two"),),
    ),
    Case(
        "CallingModel+model_response:empty/reasoning-only",
        CallingModel(1, U1),
        ModelResponse((Reasoning("hmm"),), U2, "content_filter"),
        PLAIN,
        Failed(EmptyModelResponse("content_filter"), U12),
        (RunFailed(EmptyModelResponse("content_filter")),),
        TERMINATE,
        (Reasoning("hmm"),),
    ),
    Case(
        "CallingModel+model_response:has_handoff",
        CallingModel(1, U1),
        ModelResponse(HANDING_OFF, U2),
        HANDOFFS,
        ApplyingHandoff("billing", "h1", 1, U12),
        (
            MessageOutput(said("Passing you on.")),
            ToolCallItem(LOOKUP),
            ToolCallItem(TRANSFER),
            ToolCallItem(WRITE),
            ToolOutputItem(ToolResult("c1", SKIPPED, False, "skipped")),
            ToolOutputItem(ToolResult("h1", "transferred to billing")),
            ToolOutputItem(ToolResult("c2", SKIPPED, False, "skipped")),
            HandoffItem("triage", "billing"),
        ),
        Handoff("billing", "h1"),
        (
            *HANDING_OFF,
            ToolResult("c1", SKIPPED, False, "skipped"),
            ToolResult("h1", "transferred to billing"),
            ToolResult("c2", SKIPPED, False, "skipped"),
        ),
    ),
    Case(
        # the handoff wins over a call that would otherwise ask for approval
        "CallingModel+model_response:has_handoff/over-an-asking-call",
        CallingModel(1, U1),
        ModelResponse((WRITE, TRANSFER), U2),
        TransitionCtx(
            table=DEFAULT_TABLE,
            agent="triage",
            tools={"x": "ask"},
            handoffs={"transfer_to_billing": "billing"},
        ),
        ApplyingHandoff("billing", "h1", 1, U12),
        (
            ToolCallItem(WRITE),
            ToolCallItem(TRANSFER),
            ToolOutputItem(ToolResult("c2", SKIPPED, False, "skipped")),
            ToolOutputItem(ToolResult("h1", "transferred to billing")),
            HandoffItem("triage", "billing"),
        ),
        Handoff("billing", "h1"),
        (
            WRITE,
            TRANSFER,
            ToolResult("c2", SKIPPED, False, "skipped"),
            ToolResult("h1", "transferred to billing"),
        ),
    ),
    Case(
        "CallingModel+model_response:needs_approval",
        CallingModel(1, U1),
        ModelResponse(ASKING, U2),
        POLICY,
        NeedsApproval(
            (ASK_WRITE, ASK_WRITE_B),
            (LOOKUP,),
            1,
            U12,
            (LOOKUP, WRITE, REMOVE, WRITE_B),
            (REMOVE_DENIED,),
            U2_CONTEXT,
        ),
        (
            MessageOutput(said("Writing two files.")),
            ToolCallItem(LOOKUP),
            ToolCallItem(WRITE),
            ToolCallItem(REMOVE),
            ToolCallItem(WRITE_B),
            PermissionDenied("c3", "rm", "policy"),
            ApprovalRequested.of(ASK_WRITE),
            ApprovalRequested.of(ASK_WRITE_B),
        ),
        AwaitApproval((ASK_WRITE, ASK_WRITE_B)),
        ASKING,
    ),
    Case(
        # the run's per-call policy asks even though the tool itself is allowed
        "CallingModel+model_response:needs_approval/call-policy",
        CallingModel(1, U1),
        ModelResponse((LOOKUP, WRITE), U2),
        TransitionCtx(
            table=DEFAULT_TABLE,
            tools={"lookup": "allow", "x": "allow"},
            call_policy=lambda call: "ask" if "/tmp" in call.arguments else None,
        ),
        NeedsApproval((ASK_WRITE,), (LOOKUP,), 1, U12, (LOOKUP, WRITE), (), U2_CONTEXT),
        (ToolCallItem(LOOKUP), ToolCallItem(WRITE), ApprovalRequested.of(ASK_WRITE)),
        AwaitApproval((ASK_WRITE,)),
        (LOOKUP, WRITE),
    ),
    Case(
        "CallingModel+model_response:has_tool_calls",
        CallingModel(1, U1),
        ModelResponse(BATCH, U2),
        POLICY,
        ExecutingTools((LOOKUP, REMOVE), 1, U12, (REMOVE_DENIED,), U2_CONTEXT),
        (
            MessageOutput(said("Let me check.")),
            ToolCallItem(LOOKUP),
            ToolCallItem(REMOVE),
            PermissionDenied("c3", "rm", "policy"),
        ),
        ExecuteTools((LOOKUP,)),
        BATCH,
    ),
    Case(
        # every call of the batch denied: nothing runs, each keeps its denial
        "CallingModel+model_response:has_tool_calls/all-denied",
        CallingModel(1, U1),
        ModelResponse((REMOVE,), U2),
        POLICY,
        ExecutingTools((REMOVE,), 1, U12, (REMOVE_DENIED,), U2_CONTEXT),
        (ToolCallItem(REMOVE), PermissionDenied("c3", "rm", "policy")),
        ExecuteTools(()),
        (REMOVE,),
    ),
    Case(
        # a handoff is a call the model asked for: the run's policy denies it like any other
        # (SEMANTICS.md: "Each call passes its permission check ... before it runs")
        "CallingModel+model_response:has_tool_calls/denied-handoff",
        CallingModel(1, U1),
        ModelResponse((TRANSFER,), U2),
        TransitionCtx(
            table=DEFAULT_TABLE,
            agent="triage",
            tools={"transfer_to_billing": "deny"},
            handoffs={"transfer_to_billing": "billing"},
        ),
        ExecutingTools(
            (TRANSFER,),
            1,
            U12,
            (ToolResult("h1", "denied by policy: transfer_to_billing", True, "denied"),),
            U2_CONTEXT,
        ),
        (ToolCallItem(TRANSFER), PermissionDenied("h1", "transfer_to_billing", "policy")),
        ExecuteTools(()),
        (TRANSFER,),
    ),
    Case(
        # a handoff cannot wait for approval: "ask" on it fails closed, as a denial
        "CallingModel+model_response:has_tool_calls/ask-handoff",
        CallingModel(1, U1),
        ModelResponse((TRANSFER,), U2),
        TransitionCtx(
            table=DEFAULT_TABLE,
            agent="triage",
            tools={"transfer_to_billing": "ask"},
            handoffs={"transfer_to_billing": "billing"},
        ),
        ExecutingTools(
            (TRANSFER,),
            1,
            U12,
            (ToolResult("h1", "denied by policy: transfer_to_billing", True, "denied"),),
            U2_CONTEXT,
        ),
        (ToolCallItem(TRANSFER), PermissionDenied("h1", "transfer_to_billing", "policy")),
        ExecuteTools(()),
        (TRANSFER,),
    ),
    Case(
        # no policy at all: every call runs, even one for a tool nobody declared
        "CallingModel+model_response:has_tool_calls/unrestricted",
        CallingModel(1, U1),
        ModelResponse((LOOKUP, REMOVE), U2),
        PLAIN,
        ExecutingTools((LOOKUP, REMOVE), 1, U12, (), U2_CONTEXT),
        (ToolCallItem(LOOKUP), ToolCallItem(REMOVE)),
        ExecuteTools((LOOKUP, REMOVE)),
        (LOOKUP, REMOVE),
    ),
    Case(
        # finish_reason=length, but the call arrived whole: not truncated
        "CallingModel+model_response:has_tool_calls/length-with-complete-call",
        CallingModel(1, U1),
        ModelResponse((LOOKUP,), U2, "length"),
        TOOLS,
        ExecutingTools((LOOKUP,), 1, U12, (), U2_CONTEXT),
        (ToolCallItem(LOOKUP),),
        ExecuteTools((LOOKUP,)),
        (LOOKUP,),
    ),
    Case(
        "CallingModel+model_response:has_output_type",
        CallingModel(1, U1),
        ModelResponse((said("It is sunny."),), U2),
        TYPED_WITH_TOOLS,
        Finalizing(2, U12),
        (MessageOutput(said("It is sunny.")), TurnStarted(2)),
        FINALIZE,
        (said("It is sunny."),),
    ),
    Case(
        "CallingModel+model_response:default",
        CallingModel(1, U1),
        ModelResponse((said("It is sunny."),), U2),
        TOOLS,
        Done(FinalOutput("It is sunny.", None, U12)),
        (
            MessageOutput(said("It is sunny.")),
            RunCompleted.of(FinalOutput("It is sunny.", None, U12)),
        ),
        TERMINATE,
        (said("It is sunny."),),
    ),
    Case(
        "CallingModel+model_response:default/with-reasoning",
        CallingModel(1, U1),
        ModelResponse((Reasoning("easy"), said("It is sunny.")), U2),
        TOOLS,
        Done(FinalOutput("It is sunny.", None, U12)),
        (
            MessageOutput(said("It is sunny.")),
            RunCompleted.of(FinalOutput("It is sunny.", None, U12)),
        ),
        TERMINATE,
        (Reasoning("easy"), said("It is sunny.")),
    ),
]

# ---------------------------------------------------------------- NeedsApproval + decisions

ALL_CALLS = (LOOKUP, WRITE, REMOVE, WRITE_B)
WRITE_B_REJECTED = ToolResult("c4", "not today: x", True, "rejected")

APPROVAL_CASES = [
    Case(
        "NeedsApproval+approval_decisions:all_decided",
        approval_phase(),
        decisions(ASK_WRITE.approve(), ASK_WRITE_B.reject("not today")),
        POLICY,
        ExecutingTools(ALL_CALLS, 1, U1, (REMOVE_DENIED, WRITE_B_REJECTED), 50),
        (PermissionDenied("c4", "x", "rejected"),),
        ExecuteTools((LOOKUP, WRITE)),  # the allowed call runs with the approved one
    ),
    Case(
        "NeedsApproval+approval_decisions:all_decided/all-approved",
        approval_phase(),
        decisions(
            ApprovalDecision("c4", sha256(WRITE_B.arguments), True),
            ApprovalDecision("c2", sha256(WRITE.arguments), True),
        ),
        POLICY,
        ExecutingTools(ALL_CALLS, 1, U1, (REMOVE_DENIED,), 50),
        (),
        ExecuteTools((LOOKUP, WRITE, WRITE_B)),
    ),
    Case(
        # a decision for a call the policy denied binds nothing: that call stays denied
        "NeedsApproval+approval_decisions:all_decided/approving-a-denied-call",
        approval_phase(),
        decisions(
            ApprovalDecision("c3", sha256(REMOVE.arguments), True),
            ASK_WRITE.approve(),
            ASK_WRITE_B.approve(),
        ),
        POLICY,
        ExecutingTools(ALL_CALLS, 1, U1, (REMOVE_DENIED,), 50),
        (),
        ExecuteTools((LOOKUP, WRITE, WRITE_B)),
    ),
    Case(
        "NeedsApproval+approval_decisions:all_decided/rejected-without-reason",
        approval_phase(),
        decisions(ASK_WRITE.reject(), ASK_WRITE_B.reject()),
        POLICY,
        ExecutingTools(
            ALL_CALLS,
            1,
            U1,
            (
                REMOVE_DENIED,
                ToolResult("c2", "rejected by the user: x", True, "rejected"),
                ToolResult("c4", "rejected by the user: x", True, "rejected"),
            ),
            50,
        ),
        (PermissionDenied("c2", "x", "rejected"), PermissionDenied("c4", "x", "rejected")),
        ExecuteTools((LOOKUP,)),
    ),
    Case(
        "NeedsApproval+approval_decisions:default/partial",
        approval_phase(),
        decisions(ASK_WRITE.approve()),
        POLICY,
        NeedsApproval((ASK_WRITE_B,), (LOOKUP, WRITE), 1, U1, ALL_CALLS, (REMOVE_DENIED,), 50),
        (),
        AwaitApproval((ASK_WRITE_B,)),
    ),
    Case(
        "NeedsApproval+approval_decisions:default/partial-rejection",
        approval_phase(),
        decisions(ASK_WRITE_B.reject("not today")),
        POLICY,
        NeedsApproval(
            (ASK_WRITE,), (LOOKUP,), 1, U1, ALL_CALLS, (REMOVE_DENIED, WRITE_B_REJECTED), 50
        ),
        (PermissionDenied("c4", "x", "rejected"),),
        AwaitApproval((ASK_WRITE,)),
    ),
    Case(
        # approving other arguments than the call's is refused: the call stays pending
        "NeedsApproval+approval_decisions:default/wrong-arguments-hash",
        approval_phase(),
        decisions(
            ApprovalDecision("c2", sha256('{"path": "/etc/passwd"}'), True),
            ASK_WRITE_B.approve(),
        ),
        POLICY,
        NeedsApproval((ASK_WRITE,), (LOOKUP, WRITE_B), 1, U1, ALL_CALLS, (REMOVE_DENIED,), 50),
        (),
        AwaitApproval((ASK_WRITE,)),
    ),
    Case(
        "NeedsApproval+approval_decisions:default/unknown-call",
        approval_phase(),
        decisions(ApprovalDecision("c7", sha256(WRITE.arguments), True)),
        POLICY,
        approval_phase(),
        (),
        AwaitApproval((ASK_WRITE, ASK_WRITE_B)),
    ),
]

# ---------------------------------------------------------------- ExecutingTools + tool_results

SETTLED = (WEATHER, REMOVE_DENIED)  # the batch's results in call order
SETTLED_EVENTS = (ToolOutputItem(WEATHER), ToolOutputItem(REMOVE_DENIED))

TOOL_CASES = [
    Case(
        # max_turns=3: this batch came from call 3 (turn 2); its outputs, then the failure
        "ExecutingTools+tool_results:turn_limit_reached",
        tool_phase(turn=2),
        ToolResults((WEATHER,), U2),
        TransitionCtx(table=DEFAULT_TABLE, tools={"lookup": "allow", "rm": "deny"}, max_turns=3),
        Failed(MaxTurnsExceeded(3), U12),
        (*SETTLED_EVENTS, RunFailed(MaxTurnsExceeded(3))),
        TERMINATE,
        SETTLED,
    ),
    Case(
        "ExecutingTools+tool_results:default/turn-limit-one-call-away",
        tool_phase(turn=1),
        ToolResults((WEATHER,)),
        TransitionCtx(table=DEFAULT_TABLE, max_turns=3),
        CallingModel(2, U1),
        (*SETTLED_EVENTS, TurnStarted(2)),
        TURN,
        SETTLED,
    ),
    Case(
        # 990 context tokens + 40 characters of results (10 tokens) reach the threshold
        "ExecutingTools+tool_results:over_context_budget",
        tool_phase(context_tokens=990),
        ToolResults((ran(LOOKUP, "x" * 40),)),
        TransitionCtx(table=DEFAULT_TABLE, compaction_threshold=1000),
        Compacting(1, U1),
        (ToolOutputItem(ran(LOOKUP, "x" * 40)), ToolOutputItem(REMOVE_DENIED)),
        COMPACT,
        (ran(LOOKUP, "x" * 40), REMOVE_DENIED),
    ),
    Case(
        "ExecutingTools+tool_results:default/under-context-budget",
        tool_phase(context_tokens=990),
        ToolResults((ran(LOOKUP, "x" * 36),)),
        TransitionCtx(table=DEFAULT_TABLE, compaction_threshold=1000),
        CallingModel(2, U1),
        (ToolOutputItem(ran(LOOKUP, "x" * 36)), ToolOutputItem(REMOVE_DENIED), TurnStarted(2)),
        TURN,
        (ran(LOOKUP, "x" * 36), REMOVE_DENIED),
    ),
    Case(
        # the tools' own spending (a sub-agent) is what crosses the budget
        "ExecutingTools+tool_results:budget_exhausted",
        tool_phase(usage=used(800, 100)),
        ToolResults((WEATHER,), used(80, 20)),
        TransitionCtx(table=DEFAULT_TABLE, token_budget=1000),
        Failed(BudgetExceeded(1000, 1000), Usage(880, 120, 1000, 2)),
        (*SETTLED_EVENTS, RunFailed(BudgetExceeded(1000, 1000))),
        TERMINATE,
        SETTLED,
    ),
    Case(
        "ExecutingTools+tool_results:default",
        tool_phase(),
        ToolResults((WEATHER,), U2),
        PLAIN,
        CallingModel(2, U12),
        (*SETTLED_EVENTS, TurnStarted(2)),
        TURN,
        SETTLED,
    ),
    Case(
        # a result the driver reports for a denied call does not replace its denial
        "ExecutingTools+tool_results:default/result-for-a-denied-call",
        tool_phase(),
        ToolResults((WEATHER, ran(REMOVE, "removed /"))),
        PLAIN,
        CallingModel(2, U1),
        (*SETTLED_EVENTS, TurnStarted(2)),
        TURN,
        SETTLED,
    ),
    Case(
        # results come back in call order, and a call without one gets an error result
        "ExecutingTools+tool_results:default/out-of-order-and-missing",
        ExecutingTools((LOOKUP, WRITE, WRITE_B), 1, U1),
        ToolResults((WRITTEN, WEATHER, ToolResult("ghost", "?"))),
        PLAIN,
        CallingModel(2, U1),
        (
            ToolOutputItem(WEATHER),
            ToolOutputItem(WRITTEN),
            ToolOutputItem(ToolResult("c4", "error: the tool returned no result", True, "errored")),
            TurnStarted(2),
        ),
        TURN,
        (
            WEATHER,
            WRITTEN,
            ToolResult("c4", "error: the tool returned no result", True, "errored"),
        ),
    ),
]

# ---------------------------------------------------------------- the other model phases

REPAIRING = RepairingOutput(2, U1, 1, INVALID_ERRORS)

MODEL_PHASE_CASES = [
    Case(
        "Compacting+model_response:default",
        Compacting(1, U1),
        ModelResponse((said("Summary: the user wants the weather; it is sunny."),), U2),
        TOOLS,
        CallingModel(2, U12),
        (TurnStarted(2),),
        TURN,
        (CompactionSummary("Summary: the user wants the weather; it is sunny."),),
    ),
    Case(
        # an empty summary would hide the whole conversation: it is not appended
        "Compacting+model_response:default/empty-summary",
        Compacting(1, U1),
        ModelResponse((said("  "),), U2),
        TOOLS,
        CallingModel(2, U12),
        (TurnStarted(2),),
        TURN,
        (),
    ),
    Case(
        "Finalizing+model_response:default",
        Finalizing(2, U1),
        ModelResponse((said(VALID),), U2),
        TYPED,
        Done(FinalOutput(VALID, VALID_VALUE, U12)),
        (MessageOutput(said(VALID)), RunCompleted.of(FinalOutput(VALID, VALID_VALUE, U12))),
        TERMINATE,
        (said(VALID),),
    ),
    Case(
        "Finalizing+model_response:not output_valid",
        Finalizing(2, U1),
        ModelResponse((said(INVALID),), U2),
        TYPED,
        RepairingOutput(2, U12, 1, INVALID_ERRORS),
        (MessageOutput(said(INVALID)), RepairStarted(1, INVALID_ERRORS)),
        REPAIR,
        (said(INVALID),),
    ),
    Case(
        "RepairingOutput+model_response:default",
        REPAIRING,
        ModelResponse((said(VALID),), U2),
        TYPED,
        Done(FinalOutput(VALID, VALID_VALUE, U12)),
        (MessageOutput(said(VALID)), RunCompleted.of(FinalOutput(VALID, VALID_VALUE, U12))),
        TERMINATE,
        (said(VALID),),
    ),
    Case(
        # the failure quotes the repair's own errors, not the first attempt's
        "RepairingOutput+model_response:not output_valid",
        REPAIRING,
        ModelResponse((said(STILL_INVALID),), U2),
        TYPED,
        Failed(InvalidStructuredOutput(STILL_INVALID_ERRORS, STILL_INVALID), U12),
        (
            MessageOutput(said(STILL_INVALID)),
            StructuredOutputFailed(STILL_INVALID_ERRORS, STILL_INVALID),
            RunFailed(InvalidStructuredOutput(STILL_INVALID_ERRORS, STILL_INVALID)),
        ),
        TERMINATE,
        (said(STILL_INVALID),),
    ),
]

# ---------------------------------------------------------------- ApplyingHandoff + result

HANDED_OFF = ApplyingHandoff("billing", "h1", 1, U1)

HANDOFF_CASES = [
    Case(
        # usage is this run's plus the target's
        "ApplyingHandoff+handoff_result:default",
        HANDED_OFF,
        HandoffResult(output=FinalOutput("Refunded.", None, U2), usage=U2),
        HANDOFFS,
        Done(FinalOutput("Refunded.", None, U12)),
        (RunCompleted.of(FinalOutput("Refunded.", None, U12)),),
        TERMINATE,
    ),
    Case(
        "ApplyingHandoff+handoff_result:not succeeded",
        HANDED_OFF,
        HandoffResult(error=MaxTurnsExceeded(5), usage=U2),
        HANDOFFS,
        Failed(MaxTurnsExceeded(5), U12),
        (RunFailed(MaxTurnsExceeded(5)),),
        TERMINATE,
    ),
]

# ---------------------------------------------------------------- the output guardrails' check

SUNNY = FinalOutput("It is sunny.", None, U12)
HELD = CheckingOutput(SUNNY)
TYPED_ANSWER = FinalOutput(VALID, VALID_VALUE, U12)
TRIPPED = GuardrailTripped("pii", "output", "names a person")
RAISED = GuardrailFailed("pii", "output", "RuntimeError: down")

GUARDRAIL_CASES = [
    Case(
        # the answer is held: its events stand, RunCompleted waits for the verdict
        "CallingModel+model_response:output_guarded",
        CallingModel(1, U1),
        ModelResponse((said("It is sunny."),), U2),
        GUARDED,
        HELD,
        (MessageOutput(said("It is sunny.")),),
        CheckGuardrails(SUNNY),
        (said("It is sunny."),),
    ),
    Case(
        "Finalizing+model_response:output_guarded",
        Finalizing(2, U1),
        ModelResponse((said(VALID),), U2),
        TYPED_GUARDED,
        CheckingOutput(TYPED_ANSWER),
        (MessageOutput(said(VALID)),),
        CheckGuardrails(TYPED_ANSWER),
        (said(VALID),),
    ),
    Case(
        # an invalid answer is repaired first; the guardrails see only a valid one
        "Finalizing+model_response:not output_valid/guarded",
        Finalizing(2, U1),
        ModelResponse((said(INVALID),), U2),
        TYPED_GUARDED,
        RepairingOutput(2, U12, 1, INVALID_ERRORS),
        (MessageOutput(said(INVALID)), RepairStarted(1, INVALID_ERRORS)),
        REPAIR,
        (said(INVALID),),
    ),
    Case(
        "RepairingOutput+model_response:output_guarded",
        REPAIRING,
        ModelResponse((said(VALID),), U2),
        TYPED_GUARDED,
        CheckingOutput(TYPED_ANSWER),
        (MessageOutput(said(VALID)),),
        CheckGuardrails(TYPED_ANSWER),
        (said(VALID),),
    ),
    Case(
        "ApplyingHandoff+handoff_result:output_guarded",
        HANDED_OFF,
        HandoffResult(output=FinalOutput("Refunded.", None, U2), usage=U2),
        HANDOFFS_GUARDED,
        CheckingOutput(FinalOutput("Refunded.", None, U12)),
        (),
        CheckGuardrails(FinalOutput("Refunded.", None, U12)),
    ),
    Case(
        "CheckingOutput+guardrail_verdict:passed",
        HELD,
        GuardrailVerdict(),
        GUARDED,
        Done(SUNNY),
        (RunCompleted.of(SUNNY),),
        TERMINATE,
    ),
    Case(
        "CheckingOutput+guardrail_verdict:default",
        HELD,
        GuardrailVerdict(TRIPPED),
        GUARDED,
        Failed(TRIPPED, U12),
        (GuardrailTriggered("pii", "output", "names a person"), RunFailed(TRIPPED)),
        TERMINATE,
    ),
    Case(
        # a check that raised did not trigger: RunFailed only
        "CheckingOutput+guardrail_verdict:default/raised",
        HELD,
        GuardrailVerdict(RAISED),
        GUARDED,
        Failed(RAISED, U12),
        (RunFailed(RAISED),),
        TERMINATE,
    ),
]

# ---------------------------------------------------------------- CheckingInput

CHECKING_TURN = CheckingInput(CallingModel(0), TURN, CallingModel(), Start((HI,)))
CHECKING_FINALIZE = CheckingInput(Finalizing(0), FINALIZE, CallingModel(), Start((HI,)))
INPUT_TRIPPED = GuardrailTripped("pii", "input", "asks for a password")
INPUT_RAISED = GuardrailFailed("pii", "input", "RuntimeError: down")

CHECKING_INPUT_CASES = [
    Case(
        "CheckingInput+guardrail_verdict:passed and output_only",
        CHECKING_FINALIZE,
        GuardrailVerdict(),
        TYPED_INPUT_GUARDED,
        Finalizing(0),
        (),
        FINALIZE,
    ),
    Case(
        "CheckingInput+guardrail_verdict:passed",
        CHECKING_TURN,
        GuardrailVerdict(),
        INPUT_GUARDED,
        CallingModel(0),
        (),
        TURN,
    ),
    Case(
        "CheckingInput+guardrail_verdict:default",
        CHECKING_TURN,
        GuardrailVerdict(INPUT_TRIPPED),
        INPUT_GUARDED,
        Failed(INPUT_TRIPPED),
        (GuardrailTriggered("pii", "input", "asks for a password"), RunFailed(INPUT_TRIPPED)),
        TERMINATE,
    ),
    Case(
        # a check that raised did not trigger: RunFailed only
        "CheckingInput+guardrail_verdict:default/raised",
        CHECKING_FINALIZE,
        GuardrailVerdict(INPUT_RAISED),
        TYPED_INPUT_GUARDED,
        Failed(INPUT_RAISED),
        (RunFailed(INPUT_RAISED),),
        TERMINATE,
    ),
]

# ---------------------------------------------------------------- from any phase

# One state of every non-terminal phase, each having spent U1.
NON_TERMINAL: dict[str, Any] = {
    "CallingModel": CallingModel(1, U1),
    "ExecutingTools": tool_phase(),
    "NeedsApproval": approval_phase(),
    "ApplyingHandoff": HANDED_OFF,
    "Finalizing": Finalizing(2, U1),
    "RepairingOutput": REPAIRING,
    "Compacting": Compacting(1, U1),
    "CheckingOutput": CheckingOutput(FinalOutput("It is sunny.", None, U1)),
    "CheckingInput": CheckingInput(CallingModel(0, U1), TURN, CallingModel(0, U1), Start((HI,))),
}


def closing(phase: str, why: str) -> tuple[ToolResult, ...]:
    """The results that close a phase's unfinished calls (a denied call keeps its denial)."""
    if phase == "ExecutingTools":
        return (cancelled(LOOKUP, why), REMOVE_DENIED)
    if phase == "NeedsApproval":
        return (
            cancelled(LOOKUP, why),
            cancelled(WRITE, why),
            REMOVE_DENIED,
            cancelled(WRITE_B, why),
        )
    return ()


OUTAGE = ModelCallFailed("unavailable", "503 from upstream", 503)

ANY_PHASE_CASES = [
    *(
        Case(
            f"{phase}+cancel:default",
            state,
            Cancel("user pressed stop"),
            POLICY,
            Failed(Cancelled("user pressed stop"), U1),
            (RunFailed(Cancelled("user pressed stop")),),
            TERMINATE,
            closing(phase, CANCELLED),
        )
        for phase, state in NON_TERMINAL.items()
    ),
    *(
        Case(
            f"{phase}+fail:default",
            state,
            Fail(OUTAGE),
            POLICY,
            Failed(OUTAGE, U1),
            (RunFailed(OUTAGE),),
            TERMINATE,
            closing(phase, FAILED),
        )
        for phase, state in NON_TERMINAL.items()
    ),
    # A stop carries what was spent before it landed (finished sub-agents, a failed model
    # call): it counts toward the failed run's usage.
    *(
        Case(
            f"{phase}+cancel:default/spent",
            state,
            Cancel("user pressed stop", (), U2),
            POLICY,
            Failed(Cancelled("user pressed stop"), U12),
            (RunFailed(Cancelled("user pressed stop")),),
            TERMINATE,
            closing(phase, CANCELLED),
        )
        for phase, state in NON_TERMINAL.items()
    ),
    *(
        Case(
            f"{phase}+fail:default/spent",
            state,
            Fail(OUTAGE, (), U2),
            POLICY,
            Failed(OUTAGE, U12),
            (RunFailed(OUTAGE),),
            TERMINATE,
            closing(phase, FAILED),
        )
        for phase, state in NON_TERMINAL.items()
    ),
    Case(
        "ExecutingTools+fail:default/finished-and-spent",
        tool_phase(),
        Fail(OUTAGE, (WEATHER,), U2),
        POLICY,
        Failed(OUTAGE, U12),
        (RunFailed(OUTAGE),),
        TERMINATE,
        (WEATHER, REMOVE_DENIED),
    ),
]

# One input of every kind.
INPUTS: dict[str, Any] = {
    "start": Start((HI,)),
    "model_response": ModelResponse((said("late"),), U2),
    "tool_results": ToolResults((WEATHER,), U2),
    "approval_decisions": decisions(ASK_WRITE.approve()),
    "handoff_result": HandoffResult(output=FinalOutput("late", None, U2), usage=U2),
    "guardrail_verdict": GuardrailVerdict(),
    "cancel": Cancel("too late"),
    "fail": Fail(OUTAGE),
}
TERMINAL = {
    "Done": Done(FinalOutput("It is sunny.", None, U1)),
    "Failed": Failed(MaxTurnsExceeded(3), U1),
}

ABSORBING_CASES = [
    Case(f"{phase}+{kind}:absorbed", state, inp, POLICY, state, (), TERMINATE)
    for phase, state in TERMINAL.items()
    for kind, inp in INPUTS.items()
]

AWAITED = {
    "CallingModel": {"start", "model_response"},
    "ExecutingTools": {"tool_results"},
    "NeedsApproval": {"approval_decisions"},
    "ApplyingHandoff": {"handoff_result"},
    "Finalizing": {"model_response"},
    "RepairingOutput": {"model_response"},
    "Compacting": {"model_response"},
    "CheckingOutput": {"guardrail_verdict"},
    "CheckingInput": {"guardrail_verdict"},
}

UNEXPECTED_CASES = [
    Case(
        f"{phase}+{kind}:unexpected",
        state,
        inp,
        POLICY,
        Failed(UnexpectedInput(phase, kind), U1),
        (RunFailed(UnexpectedInput(phase, kind)),),
        TERMINATE,
        closing(phase, FAILED),
    )
    for phase, state in NON_TERMINAL.items()
    for kind, inp in INPUTS.items()
    if kind not in AWAITED[phase] | {"cancel", "fail"}
]

CASES = [
    *START_CASES,
    *RESPONSE_CASES,
    *APPROVAL_CASES,
    *TOOL_CASES,
    *MODEL_PHASE_CASES,
    *HANDOFF_CASES,
    *GUARDRAIL_CASES,
    *CHECKING_INPUT_CASES,
    *ANY_PHASE_CASES,
    *ABSORBING_CASES,
    *UNEXPECTED_CASES,
]


def params(cases: Iterable[Case]) -> list[Any]:
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else [],
        )
        for case in cases
    ]


def names(events: Iterable[Any]) -> list[str]:
    return [type(event).__name__ for event in events]


@pytest.mark.parametrize("case", params(CASES))
def test_row(case: Case) -> None:
    taken = match_row(case.state, case.inp, case.ctx).row
    assert row_key(taken) == case.id.split("/")[0], f"took row {taken}"
    outcome = transition(case.state, case.inp, case.ctx)
    assert names(outcome.events) == names(case.events)
    assert outcome.events == case.events
    assert outcome.next_state == case.next_state
    assert outcome.next_action == case.action
    assert outcome.conversation_appends == case.appends


def test_every_row_of_the_default_chart_has_a_case() -> None:
    covered = {case.id.split("/")[0] for case in CASES}
    missing = [row_key(row) for row in DEFAULT_TABLE.rows if row_key(row) not in covered]
    assert not missing


def test_case_ids_are_unique() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))


# ---------------------------------------------------------------- whole runs


@dataclass
class Trace:
    state: Any
    events: list[Any]
    appends: list[Any]
    actions: list[Any]


def run(ctx: TransitionCtx, *inputs: Any) -> Trace:
    """Feed `inputs` one after another to a fresh run, collecting what the steps said."""
    trace = Trace(CallingModel(), [], [], [])
    for inp in inputs:
        outcome = transition(trace.state, inp, ctx)
        trace.state = outcome.next_state
        trace.events.extend(outcome.events)
        trace.appends.extend(outcome.conversation_appends)
        trace.actions.append(outcome.next_action)
    return trace


ZERO = Usage()


def calls_lookup(call_id: str, usage: Usage = ZERO) -> ModelResponse:
    return ModelResponse((ToolCall(call_id, "lookup", "{}"),), usage)


def looked_up(call_id: str, usage: Usage = ZERO) -> ToolResults:
    return ToolResults((ToolResult(call_id, "sunny"),), usage)


def answers(text: str, usage: Usage = ZERO) -> ModelResponse:
    return ModelResponse((said(text),), usage)


def test_the_reference_sequence() -> None:
    """SEMANTICS.md, "Reference sequence": one tool call, then a text answer. RunStarted,
    ToolCallDelta and TokenDelta come from the driver; the core emits the rest."""
    trace = run(TOOLS, Start((HI,)), calls_lookup("c1"), looked_up("c1"), answers("It is sunny."))
    assert names(trace.events) == [
        "TurnStarted",
        "ToolCallItem",
        "ToolOutputItem",
        "TurnStarted",
        "MessageOutput",
        "RunCompleted",
    ]
    assert trace.events[0] == TurnStarted(0)
    assert trace.events[3] == TurnStarted(1)
    assert names(trace.actions) == ["CallModel", "ExecuteTools", "CallModel", "Terminate"]
    assert trace.appends == [
        HI,
        ToolCall("c1", "lookup", "{}"),
        ToolResult("c1", "sunny"),
        said("It is sunny."),
    ]
    assert trace.state == Done(FinalOutput("It is sunny.", None, ZERO))


@pytest.mark.parametrize("max_turns", [1, 2, 5])
def test_a_text_answer_on_the_last_allowed_call_completes(max_turns: int) -> None:
    tool_turns = [
        step for n in range(max_turns - 1) for step in (calls_lookup(f"c{n}"), looked_up(f"c{n}"))
    ]
    trace = run(
        TransitionCtx(table=DEFAULT_TABLE, max_turns=max_turns),
        Start(),
        *tool_turns,
        answers("done"),
    )
    assert trace.state == Done(FinalOutput("done", None, ZERO))
    assert [e.turn for e in trace.events if type(e) is TurnStarted] == list(range(max_turns))


@pytest.mark.parametrize("max_turns", [1, 2, 5])
def test_max_turns_fails_after_the_last_calls_tools_have_run(max_turns: int) -> None:
    tool_turns = [
        step for n in range(max_turns) for step in (calls_lookup(f"c{n}"), looked_up(f"c{n}"))
    ]
    trace = run(TransitionCtx(table=DEFAULT_TABLE, max_turns=max_turns), Start(), *tool_turns)
    last = ToolResult(f"c{max_turns - 1}", "sunny")
    assert trace.state == Failed(MaxTurnsExceeded(max_turns))
    assert trace.events[-2:] == [ToolOutputItem(last), RunFailed(MaxTurnsExceeded(max_turns))]
    assert trace.appends[-1] == last
    model_calls = [a for a in trace.actions if type(a) is CallModel]
    assert len(model_calls) == max_turns


def test_finalizing_and_repair_are_not_counted_against_max_turns() -> None:
    ctx = TransitionCtx(table=DEFAULT_TABLE, tools={"lookup": "allow"}, output=OUT, max_turns=1)
    trace = run(ctx, Start(), answers("It is 4."), answers(INVALID), answers(VALID))
    assert trace.state == Done(FinalOutput(VALID, VALID_VALUE, ZERO))
    assert names(trace.actions) == ["CallModel", "CallModel", "CallModel", "Terminate"]
    assert [e.turn for e in trace.events if type(e) is TurnStarted] == [0, 1]


def test_usage_is_summed_across_calls() -> None:
    """Every model call's usage, the tools' and a handoff target's add up; nothing twice."""
    ctx = TransitionCtx(
        table=DEFAULT_TABLE, tools={"lookup": "allow"}, handoffs={"transfer_to_billing": "billing"}
    )
    trace = run(
        ctx,
        Start(),
        calls_lookup("c1", used(10, 1)),
        looked_up("c1", used(20, 2)),  # a sub-agent's spending
        calls_lookup("c2", used(30, 3)),
        looked_up("c2"),
        ModelResponse((TRANSFER,), used(40, 4)),
        HandoffResult(output=FinalOutput("ok", None, used(50, 5)), usage=used(50, 5)),
    )
    assert trace.state.usage == Usage(150, 15, 165, 5)
    assert trace.events[-1] == RunCompleted.of(FinalOutput("ok", None, Usage(150, 15, 165, 5)))


def test_usage_is_summed_through_compaction_and_structured_output() -> None:
    ctx = TransitionCtx(
        table=DEFAULT_TABLE, tools={"lookup": "allow"}, output=OUT, compaction_threshold=1
    )
    trace = run(
        ctx,
        Start(),
        calls_lookup("c1", used(10, 1)),
        looked_up("c1"),
        answers("Summary.", used(20, 2)),  # the compaction call
        answers("It is 4.", used(30, 3)),
        answers(INVALID, used(40, 4)),
        answers(VALID, used(50, 5)),
    )
    assert names(trace.events) == [
        "TurnStarted",
        "ToolCallItem",
        "ToolOutputItem",  # then Compacting: no turn opens for the summary call
        "TurnStarted",
        "MessageOutput",
        "TurnStarted",  # Finalizing
        "MessageOutput",
        "RepairStarted",
        "MessageOutput",
        "RunCompleted",
    ]
    assert trace.appends[2] == CompactionSummary("Summary.")
    assert trace.state == Done(FinalOutput(VALID, VALID_VALUE, Usage(150, 15, 165, 5)))
