"""Whatever a model, a tool, a guardrail or a handler does, a run's stream ends once.

Hypothesis drives the real driver (`agent.run`) with a scripted model over random runs:
answers with hostile text (lone surrogates, terminal escapes), tool calls that reuse call
ids, usage with null or negative counts, truncated and empty answers, model failures and a
model that runs out of turns; tools that answer, raise, raise `FatalToolError` or their own
`CancelledError`; calls that need approval, answered by a handler with good and bad answers
(or suspending); guardrails that pass, trip or raise; handoffs; an output type; a token
budget; traced and untraced. Every run must end with exactly one terminal event, last, and
no exception may escape the stream. Tracing must not change how a run ends.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from helikon import (
    Agent,
    AssistantMessage,
    FatalToolError,
    GuardrailResult,
    InputGuardrail,
    ModelError,
    OutputGuardrail,
    RunConfig,
    ScriptedModel,
    ScriptedTurn,
    ToolCall,
    Usage,
    tool,
)
from helikon.core import ModelCallFailed, Reasoning
from helikon.trace import read_trace

TERMINAL = {"run_completed", "run_failed", "run_suspended"}


class Answer(BaseModel):
    total: int


@tool(read_only=True)
def search(query: str) -> str:
    """Search."""
    return f"found {query}"


@tool
def explode(query: str) -> str:
    """A tool that raises."""
    raise RuntimeError(f"boom on {query}")


@tool
def fatal(query: str) -> str:
    """A tool that fails the run."""
    raise FatalToolError("the ledger is gone")


@tool
async def cancels_itself(query: str) -> str:
    """A tool that raises its own CancelledError."""
    raise asyncio.CancelledError()


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay; needs approval."""
    return f"paid {amount}"


TOOLS = [search, explode, fatal, cancels_itself, pay]
NAMES = ["search", "explode", "fatal", "cancels_itself", "pay", "transfer_to_helper", "nope"]

hostile_texts = st.sampled_from(
    [
        "fine",
        "",
        "  ",
        json.loads('"\\ud800 lone"'),
        "\x1b]0;pwned\x07\x1b[2Jcleared",
        "\x9b31m red \x00 nul",
        '{"total": 3}',
        '{"total": "x"}',
        "ok " * 50,
    ]
)
arguments = st.sampled_from(
    [
        '{"query": "q"}',
        '{"amount": 5}',
        "{}",
        "not json",
        '{"query": 1}',
        json.dumps({"q": "\ud800"}),
    ]
)
counts = st.sampled_from([0, 1, 7, 1000, -3, None])
usages = st.builds(Usage, counts, counts, counts, counts)
calls = st.builds(ToolCall, st.sampled_from(["c1", "c2", "c3"]), st.sampled_from(NAMES), arguments)


@st.composite
def turns(draw: Any) -> Any:
    kind = draw(
        st.sampled_from(["answer"] * 3 + ["calls"] * 5 + ["failure", "raises", "reasoning"])
    )
    if kind == "failure":
        reason = draw(st.sampled_from(["rate_limited", "refused", "bad_response"]))

        def fail(request: Any) -> Any:
            raise ModelError(ModelCallFailed(reason, "provider says no"), usage=draw(usages))

        return fail
    if kind == "raises":

        def crash(request: Any) -> Any:
            raise ValueError("adapter bug")

        return crash
    items: list[Any] = []
    if kind == "answer" or (kind == "calls" and draw(st.booleans())):
        items.append(AssistantMessage(draw(hostile_texts)))
    if kind == "reasoning":
        items.append(Reasoning(draw(hostile_texts)))
    if kind == "calls":
        items += draw(st.lists(calls, min_size=1, max_size=3))  # ids may repeat
    finish = draw(st.sampled_from([None] * 4 + ["stop", "length", "tool_calls", "content_filter"]))
    return ScriptedTurn(tuple(items), draw(usages), finish)


def handler_answer(kind: str) -> Any:
    answers: dict[str, Any] = {
        "approve": lambda request, context: True,
        "reject": lambda request, context: request.reject("no thanks"),
        "no string": lambda request, context: "no",
        "unbound": lambda request, context: type(request)(request.call, "0" * 64).approve(),
        "raises": lambda request, context: (_ for _ in ()).throw(OSError("handler down")),
        "suspend": None,
    }
    return answers[kind]


def guardrail_check(kind: str) -> Any:
    checks: dict[str, Any] = {
        "pass": lambda value, context: False,
        "trip": lambda value, context: GuardrailResult(True, "tripped"),
        "raises": lambda value, context: 1 / 0,
    }
    return checks[kind]


GUARDS = ["none"] * 6 + ["pass", "pass", "trip", "raises"]


@st.composite
def scenarios(draw: Any) -> dict[str, Any]:
    return {
        "turns": draw(st.lists(turns(), min_size=1, max_size=6)),
        "helper_turns": draw(st.lists(turns(), min_size=0, max_size=3)),
        "approval": draw(
            st.sampled_from(["approve", "reject", "no string", "unbound", "raises", "suspend"])
        ),
        "input_guard": draw(st.sampled_from(GUARDS)),
        "output_guard": draw(st.sampled_from(GUARDS)),
        "typed": draw(st.booleans()),
        "max_turns": draw(st.integers(1, 4)),
        "budget": draw(st.sampled_from([None, 50, 5000])),
    }


def agent_of(scenario: dict[str, Any]) -> Agent:
    helper = Agent("helper", ScriptedModel(list(scenario["helper_turns"])), tools=[search])
    guards = {
        "input_guardrails": [InputGuardrail("in", guardrail_check(scenario["input_guard"]))]
        if scenario["input_guard"] != "none"
        else [],
        "output_guardrails": [OutputGuardrail("out", guardrail_check(scenario["output_guard"]))]
        if scenario["output_guard"] != "none"
        else [],
    }
    return Agent(
        "root",
        ScriptedModel(list(scenario["turns"])),
        tools=TOOLS,
        handoffs=[helper],
        output_type=Answer if scenario["typed"] else None,
        on_approval=handler_answer(scenario["approval"]),
        config=RunConfig(max_turns=scenario["max_turns"], token_budget=scenario["budget"]),
        **guards,
    )


async def ending(scenario: dict[str, Any], trace: Path | None) -> str:
    """Run the scenario to its end; the terminal event's type (and its error's kind)."""
    streaming = agent_of(scenario).run("start", trace=trace)
    events = [event async for event in streaming]
    terminals = [event for event in events if event.type in TERMINAL]
    assert len(terminals) == 1, [event.type for event in terminals]
    assert events[-1] is terminals[0]
    last = terminals[0]
    return last.type + (f":{last.error.kind}" if last.type == "run_failed" else "")


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_every_run_ends_with_exactly_one_terminal_event(scenario: dict[str, Any]) -> None:
    untraced = asyncio.run(asyncio.wait_for(ending(scenario, None), timeout=30))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.jsonl"
        traced = asyncio.run(asyncio.wait_for(ending(scenario, path), timeout=30))
        read_trace(path)  # what the run wrote reads back
    assert traced == untraced, "tracing changed how the run ended"
