"""Property tests of `transition` over random runs (hypothesis).

`runs()` plays the driver. From each state's `next_action_of` it draws a plausible next input:
a model response (text and/or tool calls, handoff tools, "ask"/"deny" tools, any finish
reason, random usage) for `CallModel`, tool results for some, all, extra or duplicate call ids
for `ExecuteTools`, decisions (some binding, some with a wrong hash or an unknown id) for
`AwaitApproval`, a target's success or failure for `Handoff`. At any step it may instead
cancel, fail the run, or feed an input the phase never waits for. Every step is recorded, and
each test checks one rule of SEMANTICS.md over the recorded runs.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, example, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from pydantic import BaseModel

from helikon import (
    DEFAULT_TABLE,
    AgentEvent,
    ApprovalDecision,
    ApprovalRequest,
    AssistantMessage,
    BudgetExceeded,
    CallingModel,
    Cancelled,
    Failed,
    FinalOutput,
    GuardrailTripped,
    Item,
    MaxTurnsExceeded,
    MessageOutput,
    ModelResponse,
    Start,
    Terminate,
    TimedOut,
    ToolCall,
    ToolFailed,
    ToolResult,
    ToolResults,
    TransitionCtx,
    TransitionOutcome,
    Usage,
    UserMessage,
    arguments_hash,
    initial_state,
    transition,
)
from helikon.core import (
    ApplyingHandoff,
    ApprovalDecisions,
    AwaitApproval,
    CallModel,
    Cancel,
    Compacting,
    Done,
    EmptyModelResponse,
    ExecuteTools,
    ExecutingTools,
    Fail,
    Finalizing,
    Handoff,
    HandoffResult,
    InvalidStructuredOutput,
    LoopState,
    MaxAgentDepthExceeded,
    ModelCallFailed,
    ModelOutputTruncated,
    ModelRequest,
    NeedsApproval,
    NextAction,
    OutputSpec,
    Reasoning,
    RepairingOutput,
    ToolsUnavailable,
    TransitionInput,
    UnexpectedInput,
    match_row,
    next_action_of,
)
from helikon.core.codec import dumps, loads
from helikon.core.errors import GuardrailFailed
from helikon.core.state import CheckGuardrails, GuardrailVerdict
from helikon.core.table import GuardRef

RUNS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TERMINAL = ("Done", "Failed")
MODEL_PHASES = {
    "CallingModel": "loop",
    "Finalizing": "structured",
    "RepairingOutput": "structured",
    "Compacting": "compaction",
}
RESULT_STATUSES = {"executed", "errored", "denied", "rejected", "skipped", "cancelled"}
SPENDING_KINDS = ("model_response", "tool_results", "handoff_result", "cancel", "fail")
MAX_STEPS = 120  # far above what a run can take when the driver answers every action
# Hypothesis favours the ends of a list it samples from: rare choices go in the middle.
INTERRUPTIONS = st.sampled_from(["go"] * 9 + ["cancel", "fail", "stray"] + ["go"] * 9)
INTERRUPTIBLE = (
    *("CallingModel", "ExecutingTools", "NeedsApproval", "ApplyingHandoff"),
    *("Finalizing", "RepairingOutput", "Compacting", "CheckingOutput", "CheckingInput"),
)
VERDICTS = (
    GuardrailVerdict(),
    GuardrailVerdict(GuardrailTripped("pii", "output", "names a person")),
    GuardrailVerdict(GuardrailFailed("pii", "output", "RuntimeError: down")),
)
INPUT_VERDICTS = (
    GuardrailVerdict(),
    GuardrailVerdict(GuardrailTripped("pii", "input", "asks for a password")),
    GuardrailVerdict(GuardrailFailed("pii", "input", "RuntimeError: down")),
)
SHAPES = st.sampled_from(
    [
        *("tools", "text", "tools", "any", "handoff", "tools", "empty"),
        *("tools", "truncated", "tools", "handoff", "text", "tools"),
    ]
)


class Verdict(BaseModel):
    score: int
    label: str


VERDICT = OutputSpec.of(Verdict)
VALID_JSON = '{"score": 7, "label": "fine"}'
INVALID_JSON = '{"score": "high"}'


def danger_policy(call: ToolCall) -> Any:
    """A pure run policy: calls whose arguments mention danger need a human."""
    return "ask" if "danger" in call.arguments else None


# ---------------------------------------------------------------- shared strategies

usages = st.builds(
    lambda i, o, r: Usage(i, o, i + o, r),
    st.integers(0, 400),
    st.integers(0, 400),
    st.integers(0, 1),
)
argument_texts = st.sampled_from(
    ['{"q": "weather"}', "{}", '{"danger": true}', '{"q": ', "not json", ""]
)
finish_reasons = st.sampled_from(["stop", "tool_calls", "length", "content_filter", "stop"])
texts = st.sampled_from(
    [None, "Here you go.", "Let me look.", VALID_JSON, "", "   ", INVALID_JSON, "not json"]
)
structured_texts = st.sampled_from([VALID_JSON, INVALID_JSON, VALID_JSON, "plain words", ""])
agent_errors = st.one_of(
    st.builds(MaxTurnsExceeded, st.integers(1, 6)),
    st.builds(BudgetExceeded, st.integers(0, 99), st.integers(0, 99)),
    st.builds(ModelOutputTruncated, st.text(max_size=5)),
    st.builds(EmptyModelResponse, finish_reasons),
    st.builds(InvalidStructuredOutput, st.tuples(st.text(max_size=5)), st.text(max_size=5)),
    st.builds(Cancelled, st.text(max_size=5)),
    st.builds(GuardrailTripped, st.just("pii"), st.sampled_from(["input", "output"])),
    st.builds(MaxAgentDepthExceeded, st.integers(0, 8), st.just("sub")),
    st.builds(ModelCallFailed, st.sampled_from(["rate_limited", "unavailable", "exhausted"])),
    st.builds(ToolFailed, st.just("search"), st.just("call_0"), st.text(max_size=5)),
    st.builds(ToolsUnavailable, st.just("files"), st.text(max_size=5)),
    st.builds(TimedOut, st.floats(0, 60)),
    st.builds(UnexpectedInput, st.just("CallingModel"), st.just("tool_results")),
)


@st.composite
def contexts(draw: Any, compaction: bool | None = None) -> TransitionCtx:
    """A run's context: limits, budget, compaction, output type, tools and handoffs."""
    tools: dict[str, Any] = {}
    if draw(st.booleans()):
        for name in ("search", "calc"):
            if draw(st.booleans()):
                tools[name] = draw(st.sampled_from(["allow", "ask", "deny"]))
        for name in ("ask", "deny"):  # tools named for their fixed permission
            if draw(st.booleans()):
                tools[name] = name
    handoffs = draw(
        st.sampled_from(
            [{}, {"transfer_to_billing": "billing"}, {"transfer_to_billing": "billing", "x": "y"}]
        )
    )
    if compaction is None:
        threshold = draw(st.none() | st.integers(1, 1500))
    else:
        threshold = draw(st.integers(1, 1500)) if compaction else None
    return TransitionCtx(
        table=DEFAULT_TABLE,
        agent="root",
        max_turns=draw(st.integers(1, 6)),
        token_budget=draw(st.sampled_from([None, 1200, 0, 300, 4000, None])),
        compaction_threshold=threshold,
        tools=tools,
        handoffs=handoffs,
        call_policy=draw(st.sampled_from([None, danger_policy])),
        output=draw(st.sampled_from([None, VERDICT])),
        output_guardrails=draw(st.sampled_from([(), ("pii",)])),
        input_guardrails=draw(st.sampled_from([(), ("pii",)])),
    )


# ---------------------------------------------------------------- the driver


@dataclass
class Step:
    """One recorded transition, with the JSON of its arguments and outcome when it ran."""

    state: Any
    inp: Any
    outcome: TransitionOutcome
    state_json: str
    inp_json: str
    outcome_json: str


class Run:
    """A recorded run (a plain class: hypothesis prints its short `repr`)."""

    def __init__(self, ctx: TransitionCtx) -> None:
        self.ctx = ctx
        self.ctx_facts = ctx_facts(ctx)
        self.steps: list[Step] = []

    @property
    def final(self) -> Any:
        return self.steps[-1].outcome.next_state

    @property
    def states(self) -> list[Any]:
        return [self.steps[0].state, *(step.outcome.next_state for step in self.steps)]

    @property
    def appends(self) -> list[Any]:
        return [item for step in self.steps for item in step.outcome.conversation_appends]

    def __repr__(self) -> str:
        """A short trace: hypothesis prints it for a failing example."""
        lines = [f"Run(ctx={self.ctx_facts!r})"]
        for step in self.steps:
            lines.append(f"  {step.state!r}\n    <- {step.inp!r}")
        lines.append(f"  => {self.final!r}")
        return re.sub(r"x{20,}", lambda m: f"x*{len(m.group())}", "\n".join(lines))

    def model_calls(self) -> Counter[str]:
        """Model responses the run consumed, by kind: loop, structured or compaction."""
        return Counter(
            MODEL_PHASES[step.state.phase]
            for step in self.steps
            if isinstance(step.inp, ModelResponse) and step.state.phase in MODEL_PHASES
        )


def ctx_facts(ctx: TransitionCtx) -> tuple[Any, ...]:
    limits = (ctx.agent, ctx.max_turns, ctx.token_budget, ctx.compaction_threshold)
    return (*limits, dict(ctx.tools), dict(ctx.handoffs), ctx.output, dict(ctx.prompts))


class Driver:
    """Answers each `NextAction` with a plausible (and sometimes a stray) input."""

    def __init__(self, draw: Any, ctx: TransitionCtx) -> None:
        self.draw = draw
        self.ctx = ctx
        self.ids = itertools.count()
        self.rounds = 0  # approval rounds on the current batch
        # The phase this run is interrupted in, the first time it gets there (if it does).
        self.interrupt_in = draw(st.sampled_from([*INTERRUPTIBLE, None]))

    def first(self) -> Any:
        return self.interruption() or Start((UserMessage("How am I doing?"),))

    def answer(self, state: Any, action: Any) -> Any:
        self.rounds = self.rounds + 1 if isinstance(action, AwaitApproval) else 0
        forced = state.phase == self.interrupt_in
        if forced:
            self.interrupt_in = None
        stray = self.interruption(forced)
        if stray is not None:
            return stray
        if isinstance(action, CallModel):
            return self.model_response(action.request)
        if isinstance(action, ExecuteTools):
            return self.tool_results(action.calls, getattr(state, "calls", ()))
        if isinstance(action, AwaitApproval):
            return self.decisions(action.pending)
        if isinstance(action, CheckGuardrails):
            verdicts = INPUT_VERDICTS if action.output is None else VERDICTS
            return self.draw(st.sampled_from(verdicts))
        assert isinstance(action, Handoff), action
        return self.handoff_result()

    def interruption(self, forced: bool = False) -> Any:
        """Usually None; sometimes (or when `forced`) a Cancel, a Fail, or any input."""
        choice = self.draw(st.sampled_from(["cancel", "fail"]) if forced else INTERRUPTIONS)
        # A stop may carry what was spent before it landed (sub-agents, a failed call).
        if choice == "cancel":
            reason = self.draw(st.sampled_from(["", "user pressed stop"]))
            return Cancel(reason, (), self.draw(usages))
        if choice == "fail":
            return Fail(self.draw(agent_errors), (), self.draw(usages))
        if choice == "stray":
            return self.stray()
        return None

    def stray(self) -> Any:
        kind = self.draw(st.sampled_from(["start", "model", "tools", "decisions", "handoff"]))
        if kind == "start":
            return Start((UserMessage("again"),))
        if kind == "model":
            return self.model_response(ModelRequest("turn"))
        if kind == "tools":
            return self.tool_results((), ())
        if kind == "decisions":
            return ApprovalDecisions((ApprovalDecision("nobody", "0" * 64, True),))
        return self.handoff_result()

    def model_response(self, request: ModelRequest) -> ModelResponse:
        """A response of some shape: tool calls, text, a handoff, empty, truncated, any."""
        draw = self.draw
        shape = draw(SHAPES) if request.tools else draw(st.sampled_from(["text", "any"]))
        finish = draw(finish_reasons) if shape == "any" else "stop"
        items: list[Any] = []
        if draw(st.integers(0, 3)) == 3:
            items.append(Reasoning("thinking"))
        text = draw(structured_texts if request.response_format else texts)
        if shape in ("text", "any", "handoff", "truncated") or draw(st.booleans()):
            items.append(AssistantMessage("" if shape == "empty" else text or "Sure."))
        if shape in ("tools", "handoff", "any") and request.tools:
            names = sorted({*self.ctx.tools, "unknown_tool"})
            if shape != "tools":
                names += sorted(self.ctx.handoffs)
            if shape == "handoff" and self.ctx.handoffs:
                handoff = draw(st.sampled_from(sorted(self.ctx.handoffs)))
                items.append(ToolCall(f"call_{next(self.ids)}", handoff, "{}"))
            for _ in range(draw(st.sampled_from([1, 2, 3, 1] if shape == "tools" else [0, 1, 2]))):
                call_id = f"call_{next(self.ids)}"
                items.append(ToolCall(call_id, draw(st.sampled_from(names)), draw(argument_texts)))
        if shape == "truncated":
            finish = "length"
            if request.tools and draw(st.booleans()):
                items.append(ToolCall(f"call_{next(self.ids)}", "search", '{"q": "wea'))
        items = draw(st.permutations(items))
        return ModelResponse(tuple(items), draw(usages), finish)

    def tool_results(self, runnable: tuple[ToolCall, ...], batch: tuple[ToolCall, ...]) -> Any:
        draw = self.draw
        if draw(st.booleans()):
            results = [self.result(call.call_id) for call in runnable]
        else:  # some missing, some twice, some for calls not run or not in the batch
            results = []
            for call in runnable:
                results += [self.result(call.call_id)] * draw(st.sampled_from([1, 0, 2]))
            others = [call.call_id for call in batch] + ["ghost"]
            for _ in range(draw(st.integers(0, 2))):
                results.append(self.result(draw(st.sampled_from(others))))
            results = draw(st.permutations(results))
        usage = draw(st.sampled_from([Usage(), Usage()]) | usages)
        return ToolResults(tuple(results), usage)

    def result(self, call_id: str) -> ToolResult:
        errored = self.draw(st.booleans())
        content = "x" * self.draw(st.sampled_from([5, 0, 800, 6000]))
        return ToolResult(call_id, content, errored, "errored" if errored else "executed")

    def decisions(self, pending: tuple[ApprovalRequest, ...]) -> ApprovalDecisions:
        draw = self.draw
        ways = ["approve", "reject", "omit", "wrong_hash", "wrong_id"]
        if self.rounds > 3:  # a patient human, but not an endless one
            ways = ["approve", "reject"]
        decisions: list[ApprovalDecision] = []
        for request in pending:
            call, way = request.call, draw(st.sampled_from(ways))
            if way == "approve":
                decisions.append(request.approve())
            elif way == "reject":
                decisions.append(request.reject(draw(st.sampled_from(["", "too risky"]))))
            elif way == "wrong_hash":
                other = arguments_hash(call.arguments + " ")
                decisions.append(ApprovalDecision(call.call_id, other, True))
            elif way == "wrong_id":
                decisions.append(ApprovalDecision("ghost", request.arguments_hash, True))
        if draw(st.integers(0, 3)) == 3:
            decisions.append(ApprovalDecision("nobody", "0" * 64, True))
        return ApprovalDecisions(tuple(draw(st.permutations(decisions))))

    def handoff_result(self) -> HandoffResult:
        draw = self.draw
        usage = draw(usages)
        way = draw(st.sampled_from(["ok", "error", "neither", "both"]))
        output = FinalOutput("handled", None, usage) if way in ("ok", "both") else None
        error = draw(agent_errors) if way in ("error", "both") else None
        return HandoffResult(output, error, usage)


@st.composite
def runs(draw: Any, compaction: bool | None = None) -> Run:
    """A whole run: the driver answers every action until the run ends (or MAX_STEPS)."""
    ctx = draw(contexts(compaction))
    run = Run(ctx)
    driver = Driver(draw, ctx)
    state, inp = initial_state(ctx), driver.first()
    while True:
        state_json, inp_json = dumps(state), dumps(inp)
        outcome = transition(state, inp, ctx)
        run.steps.append(Step(state, inp, outcome, state_json, inp_json, dumps(outcome)))
        state = outcome.next_state
        if state.phase in TERMINAL or len(run.steps) >= MAX_STEPS:
            return run
        inp = driver.answer(state, next_action_of(state, ctx))


def replay(ctx: TransitionCtx, inputs: list[Any]) -> Run:
    """A run from a fixed script of inputs (for explicit examples)."""
    run, state = Run(ctx), initial_state(ctx)
    for inp in inputs:
        outcome = transition(state, inp, ctx)
        run.steps.append(Step(state, inp, outcome, dumps(state), dumps(inp), dumps(outcome)))
        state = outcome.next_state
    return run


# ---------------------------------------------------------------- properties of runs


@RUNS
@given(runs())
def test_transition_never_raises_and_every_run_ends(run: Run) -> None:
    assert run.final.phase in TERMINAL, f"no terminal phase after {len(run.steps)} steps"
    for step in run.steps:
        assert isinstance(step.outcome, TransitionOutcome)


def one_of_each_kind() -> list[Any]:
    return [
        Start((UserMessage("hi"),)),
        ModelResponse((AssistantMessage("late"), ToolCall("late_call", "search", "{}"))),
        ToolResults((ToolResult("call_0", "late"),)),
        ApprovalDecisions((ApprovalDecision("call_0", arguments_hash("{}"), True),)),
        HandoffResult(FinalOutput("late"), None),
        Cancel("late"),
        Fail(Cancelled("late")),
    ]


@RUNS
@given(runs(), st.data())
def test_terminal_phases_absorb_every_input(run: Run, data: st.DataObject) -> None:
    final = run.final
    assert final.phase in TERMINAL
    assert next_action_of(final, run.ctx) == Terminate()
    extra = data.draw(any_inputs())
    for inp in [*one_of_each_kind(), extra]:
        outcome = transition(final, inp, run.ctx)
        assert outcome.next_state == final
        assert outcome.events == ()
        assert outcome.next_action == Terminate()
        assert outcome.conversation_appends == ()


@RUNS
@given(runs())
def test_turn_and_usage_never_decrease(run: Run) -> None:
    states = run.states
    for before, after in itertools.pairwise(states):
        for name in ("input_tokens", "output_tokens", "total_tokens", "requests"):
            assert getattr(after.usage, name) >= getattr(before.usage, name), (name, before, after)
    turns = [state.turn for state in states if hasattr(state, "turn")]
    assert turns == sorted(turns)


# Tokens a tool batch reports with requests=0 (next_turn once dropped them).
TOOL_USAGE_WITHOUT_REQUESTS = replay(
    TransitionCtx(table=DEFAULT_TABLE, tools={"search": "allow"}),
    [
        Start((UserMessage("hi"),)),
        ModelResponse((ToolCall("call_0", "search", "{}"),), Usage(1, 1, 2, 1)),
        ToolResults((ToolResult("call_0", "ok"),), Usage(0, 1, 1, 0)),
    ],
)


@RUNS
@example(TOOL_USAGE_WITHOUT_REQUESTS)
@given(runs())
def test_usage_is_the_sum_of_what_the_run_consumed(run: Run) -> None:
    """Each model response, tool batch, handoff result, cancel and failure the loop acts on
    adds its usage once (SEMANTICS.md: sub-agents' and handoff targets' usage counts toward
    the run's, and so does what a stop carries); a start or a refused input adds nothing."""
    for step in run.steps:
        row = match_row(step.state, step.inp, run.ctx).row
        consumed = not row.implicit and step.inp.kind in SPENDING_KINDS
        expected = step.state.usage + step.inp.usage if consumed else step.state.usage
        assert step.outcome.next_state.usage == expected, (row, step.inp)


@RUNS
@given(runs(compaction=False))
def test_without_compaction_a_run_ends_within_max_turns_plus_3_model_calls(run: Run) -> None:
    """At most max_turns calls in the tool loop plus the finalizing and repair calls, so
    max_turns + 2 model calls in all (the bound asked for, max_turns + 3, follows)."""
    assert run.final.phase in TERMINAL
    calls = run.model_calls()
    max_turns = run.ctx.max_turns
    assert calls["compaction"] == 0
    assert calls["loop"] <= max_turns
    assert calls["structured"] <= 2
    assert calls.total() <= max_turns + 2 <= max_turns + 3


@RUNS
@given(runs(compaction=True))
def test_with_compaction_a_run_ends_within_2_max_turns_plus_1_model_calls(run: Run) -> None:
    """Compaction replaces the step to the next turn, never the turn limit check: it follows
    a tool batch of a turn below the last, so at most max_turns - 1 compaction calls, on top
    of at most max_turns loop calls and 2 structured calls (2 * max_turns + 1 in all)."""
    assert run.final.phase in TERMINAL
    calls = run.model_calls()
    max_turns = run.ctx.max_turns
    assert calls["loop"] <= max_turns
    assert calls["compaction"] <= max_turns - 1
    assert calls["structured"] <= 2
    assert calls.total() <= 2 * max_turns + 1


@RUNS
@given(runs())
def test_every_tool_call_gets_exactly_one_result(run: Run) -> None:
    assert run.final.phase in TERMINAL
    appends = run.appends
    calls = [item.call_id for item in appends if isinstance(item, ToolCall)]
    results = [item for item in appends if isinstance(item, ToolResult)]
    assert len(calls) == len(set(calls))
    assert Counter(result.call_id for result in results) == Counter(calls)
    assert {result.status for result in results} <= RESULT_STATUSES
    for step in run.steps:  # the calls of a response the loop acts on enter the conversation
        if step.state.phase == "CallingModel" and isinstance(step.inp, ModelResponse):
            kept = {i.call_id for i in step.outcome.conversation_appends if isinstance(i, ToolCall)}
            asked = {i.call_id for i in step.inp.items if isinstance(i, ToolCall)}
            error = getattr(step.outcome.next_state, "error", None)
            truncated = isinstance(error, ModelOutputTruncated)
            assert truncated or asked <= kept


@RUNS
@given(runs())
def test_same_arguments_give_equal_outcomes(run: Run) -> None:
    for step in run.steps:
        again = transition(step.state, step.inp, run.ctx)
        assert again == step.outcome
        assert dumps(again) == step.outcome_json == dumps(step.outcome)


@RUNS
@given(runs())
def test_arguments_are_left_unchanged(run: Run) -> None:
    for step in run.steps:
        assert dumps(step.state) == step.state_json
        assert dumps(step.inp) == step.inp_json
        transition(step.state, step.inp, run.ctx)
        assert dumps(step.state) == step.state_json
        assert dumps(step.inp) == step.inp_json
    assert ctx_facts(run.ctx) == run.ctx_facts


@RUNS
@given(runs())
def test_next_action_of_is_the_action_of_the_outcome(run: Run) -> None:
    for step in run.steps:
        assert next_action_of(step.outcome.next_state, run.ctx) == step.outcome.next_action


def round_trips(value: Any, kind: Any) -> None:
    text = dumps(value, kind)
    back = loads(kind, text)
    assert back == value
    assert dumps(back, kind) == text
    assert dumps(value) == dumps(back)  # the value's own type gives the same JSON


@RUNS
@given(runs())
def test_every_value_of_a_run_round_trips_through_json(run: Run) -> None:
    for step in run.steps:
        round_trips(step.state, LoopState)
        round_trips(step.inp, TransitionInput)
        round_trips(step.outcome, TransitionOutcome)
        round_trips(step.outcome.next_action, NextAction)
        for event in step.outcome.events:
            round_trips(event, AgentEvent)
        for item in step.outcome.conversation_appends:
            round_trips(item, Item)


# Text a JSON wire can deliver: ordinary characters and lone surrogates ("\\ud800" decodes to
# one). A high surrogate followed by a low one is left out: JSON spells that pair and the
# character it encodes the same way, and a wire never delivers it as two code points.
wire_texts = (
    st.lists(st.sampled_from(["a", '"', "\\", "é", "😀", "\ud800", "\udbff", "\udc00", "\udfff"]))
    .map("".join)
    .filter(lambda text: re.search("[\ud800-\udbff][\udc00-\udfff]", text) is None)
)


@settings(max_examples=200, deadline=None)
@given(wire_texts)
def test_text_with_lone_surrogates_round_trips_through_json(text: str) -> None:
    call = ToolCall("c0", "search", text)
    round_trips(ToolResult("c0", text, True, "errored"), Item)
    round_trips(AssistantMessage(text), Item)
    round_trips(call, Item)
    round_trips(ApprovalRequest.for_call(call), ApprovalRequest)
    round_trips(MessageOutput(AssistantMessage(text)), AgentEvent)


# ---------------------------------------------------------------- the driver reaches every row


def test_the_driver_takes_every_row_of_the_default_chart() -> None:
    """The properties above mean something only if the runs reach the whole chart.

    One row is reached through `transition` only (`tests/test_rows.py` covers it): the
    driver's assembler merges streamed fragments by call id, so a response it builds never
    holds two calls with one id.
    """
    wanted = {
        row.index
        for row in DEFAULT_TABLE.rows
        if not row.implicit and row.guards != (GuardRef("duplicate_call_ids"),)
    }
    taken: set[int] = set()

    def covers(run: Run) -> bool:
        taken.update(match_row(step.state, step.inp, run.ctx).row.index for step in run.steps)
        return taken >= wanted

    explore = settings(
        max_examples=8000,  # the search stops once every row was taken; the chart grew
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    try:
        find(runs(), covers, settings=explore)
    except NoSuchExample:
        missing = [DEFAULT_TABLE.rows[index] for index in sorted(wanted - taken)]
        raise AssertionError(f"rows no run took: {missing}") from None


# ---------------------------------------------------------------- any state, any input

call_ids = st.sampled_from(["c0", "c1", "c2", "c3"])
tool_names = st.sampled_from(["search", "calc", "ask", "deny", "transfer_to_billing", "nope"])
tool_calls = st.builds(ToolCall, call_ids, tool_names, argument_texts)
call_batches = st.lists(tool_calls, max_size=4, unique_by=lambda call: call.call_id).map(tuple)
tool_results = st.builds(
    ToolResult,
    call_ids | st.just("ghost"),
    st.text(max_size=8),
    st.booleans(),
    st.sampled_from(sorted(RESULT_STATUSES)),
)
turns = st.integers(0, 8)
final_outputs = st.builds(FinalOutput, st.none() | st.text(max_size=8), st.none(), usages)
items = st.one_of(
    st.builds(AssistantMessage, st.text(max_size=8)),
    st.builds(Reasoning, st.text(max_size=8)),
    tool_calls,
)


def denial(call: ToolCall) -> ToolResult:
    return ToolResult(call.call_id, f"denied: {call.name}", True, "denied")


@st.composite
def executing_tools(draw: Any) -> ExecutingTools:
    calls = draw(call_batches)
    settled = tuple(denial(call) for call in calls if draw(st.booleans()))
    return ExecutingTools(calls, draw(turns), draw(usages), settled, draw(st.integers(0, 2000)))


@st.composite
def needs_approval(draw: Any) -> NeedsApproval:
    """A batch split into pending, allowed and denied calls, as `request_approval` makes it."""
    calls = draw(call_batches)
    roles = {call: draw(st.sampled_from(["pending", "allowed", "settled"])) for call in calls}
    pending = tuple(ApprovalRequest.for_call(c) for c in calls if roles[c] == "pending")
    allowed = tuple(c for c in calls if roles[c] == "allowed")
    settled = tuple(denial(c) for c in calls if roles[c] == "settled")
    return NeedsApproval(pending, allowed, draw(turns), draw(usages), calls, settled, 0)


def any_states() -> st.SearchStrategy[Any]:
    """Every phase of the default chart (a `CustomPhase` belongs to custom charts only)."""
    return st.one_of(
        st.builds(CallingModel, turns, usages),
        executing_tools(),
        needs_approval(),
        st.builds(ApplyingHandoff, st.just("billing"), call_ids, turns, usages),
        st.builds(Finalizing, turns, usages),
        st.builds(RepairingOutput, turns, usages, st.just(1), st.tuples(st.text(max_size=5))),
        st.builds(Compacting, turns, usages),
        st.builds(Done, final_outputs),
        st.builds(Failed, agent_errors, usages),
    )


def any_inputs() -> st.SearchStrategy[Any]:
    hashes = st.sampled_from(
        [arguments_hash(text) for text in ('{"q": "weather"}', "{}", '{"danger": true}')] + ["0"]
    )
    decisions = st.builds(ApprovalDecision, call_ids | st.just("ghost"), hashes, st.booleans())
    return st.one_of(
        st.builds(Start, st.lists(st.builds(UserMessage, st.text(max_size=8))).map(tuple)),
        st.builds(ModelResponse, st.lists(items, max_size=4).map(tuple), usages, finish_reasons),
        st.builds(ToolResults, st.lists(tool_results, max_size=5).map(tuple), usages),
        st.builds(ApprovalDecisions, st.lists(decisions, max_size=5).map(tuple)),
        st.builds(HandoffResult, st.none() | final_outputs, st.none() | agent_errors, usages),
        st.builds(Cancel, st.text(max_size=8)),
        st.builds(Fail, agent_errors),
    )


@settings(max_examples=300, deadline=None)
@given(contexts(), any_states(), any_inputs())
def test_any_state_and_any_input_never_raise(ctx: TransitionCtx, state: Any, inp: Any) -> None:
    outcome = transition(state, inp, ctx)
    assert isinstance(outcome, TransitionOutcome)
    assert outcome.next_state.phase in {phase.name for phase in ctx.table.phases}
    assert outcome == transition(state, inp, ctx)


@settings(max_examples=200, deadline=None)
@given(any_states(), any_inputs())
def test_any_state_and_any_input_round_trip_through_json(state: Any, inp: Any) -> None:
    round_trips(state, LoopState)
    round_trips(inp, TransitionInput)
