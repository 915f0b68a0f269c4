"""Trace exporters: a recorded run -> TraceView -> HTML, Mermaid and Markdown.

The run is real: a `ScriptedModel` drives a concierge agent through tool calls (one with
bad arguments, one denied by policy), an approval decided in process (one call approved,
one rejected), and a handoff to a reporter whose typed output is repaired once; the driver
records it with `TraceWriter`. Its tool output, its user input and its model text carry
HTML and script tags, which every exporter must show as text.

Golden files live in tests/golden/ (`trace_run.html`, `.mmd`, `.md`) and must equal the
exporters' output byte for byte. The golden HTML shows the chart as DOT text (`svg=False`)
so it does not depend on the Graphviz version. After an intended change, regenerate them
and review the diff:

    HELIKON_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_export_trace.py

The page is also opened in headless Chromium (Debian's `chromium`) over the DevTools
protocol (the `websockets` package): it must log no error, fetch nothing, and run none of
the injected script.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from pydantic import BaseModel

from helikon import (
    DEFAULT_TABLE,
    Agent,
    ApprovalDecision,
    ApprovalRequest,
    AssistantMessage,
    GuardrailResult,
    InputGuardrail,
    RunConfig,
    RunContext,
    ScriptedModel,
    ToolCall,
    Usage,
    tool,
)
from helikon.core import TransitionTable
from helikon.core.errors import RunError
from helikon.export import (
    ChartEdge,
    ChartGraph,
    ChartNode,
    ChartTransition,
    TraceOverlay,
    TraceView,
    extract_trace,
    render,
    to_dot,
    trace_to_html,
    trace_to_markdown,
    trace_to_mermaid,
)
from helikon.export.trace_html import inline_svg
from helikon.export.trace_markdown import to_markdown as trace_markdown
from helikon.export.trace_mermaid import text as mermaid_text
from helikon.export.trace_mermaid import to_mermaid as trace_mermaid
from helikon.export.trace_view import (
    ErrorView,
    GuardrailView,
    HandoffView,
    Message,
    ModelCall,
    Outcome,
    RepairView,
    RunSection,
    Step,
    ToolCallView,
    ToolOutcome,
    Turn,
)
from helikon.models.scripted import ScriptedTurn
from helikon.run.driver import Run
from helikon.run.results import RunResultStreaming
from helikon.trace import (
    TickingClock,
    Trace,
    TraceHeader,
    TraceWriter,
    TransitionTrace,
    read_trace,
    using_clock,
)

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("HELIKON_UPDATE_GOLDEN") == "1"

SCRIPT = "<script>alert(1)</script>"
PWN = "<script>window.__pwned = 1; document.title = 'pwned'</script>"
IMG = '<img src="x" onerror="window.__pwned = 2">'
USER_INPUT = f"I was charged twice for invoice INV-7. {IMG}"
ROOT_ID = "run-root"


class Report(BaseModel):
    invoice: str
    refunded: float
    summary: str


@tool(read_only=True)
def lookup_invoice(number: str) -> dict[str, Any]:
    """Look an invoice up.

    Args:
        number: the invoice number, e.g. "INV-7".
    """
    return {"number": number, "amount": 49.0, "paid": 2, "note": f"{SCRIPT} {PWN}"}


@tool(needs_approval=True)
def refund(invoice: str, amount: float) -> str:
    """Refund part of an invoice. Every refund needs a human's approval.

    Args:
        invoice: the invoice number.
        amount: how much, in EUR.
    """
    return f"refunded {amount:.2f} EUR on {invoice}"


@tool(permission="deny")
def close_account(reason: str) -> str:
    """Close the user's account (never allowed here).

    Args:
        reason: why.
    """
    return "closed"


def decide(request: ApprovalRequest, context: RunContext[Any]) -> ApprovalDecision:
    """The human in the loop: refunds under 100 EUR are fine, larger ones are not."""
    amount = json.loads(request.call.arguments)["amount"]
    if amount < 100:
        return request.approve("within the desk's limit")
    return request.reject("over the 100 EUR limit")


def usage(tokens_in: int, tokens_out: int) -> Usage:
    return Usage(tokens_in, tokens_out, tokens_in + tokens_out, 1)


def script() -> list[Any]:
    """The model's turns in run order: the concierge's, then the reporter's."""
    return [
        ScriptedTurn(
            [
                AssistantMessage(f"Let me look that up. <b>bold?</b> {SCRIPT}"),
                ToolCall("call_lookup", "lookup_invoice", '{"number": "INV-7"}'),
                ToolCall("call_bad", "lookup_invoice", '{"number": 7'),
                ToolCall("call_close", "close_account", '{"reason": "angry"}'),
            ],
            usage(120, 40),
        ),
        ScriptedTurn(
            [
                ToolCall("call_refund", "refund", '{"invoice": "INV-7", "amount": 49}'),
                ToolCall("call_greedy", "refund", '{"invoice": "INV-7", "amount": 4900}'),
            ],
            usage(260, 30),
        ),
        ScriptedTurn([ToolCall("call_handoff", "transfer_to_reporter", "{}")], usage(320, 12)),
        ScriptedTurn([AssistantMessage("Refunded 49 EUR on INV-7.")], usage(400, 9)),
        ScriptedTurn(
            [
                AssistantMessage(
                    '{"invoice": "INV-7", "refunded": 49.0, '
                    '"summary": "Refunded the double charge."}'
                )
            ],
            usage(450, 25),
        ),
    ]


def agents(model: ScriptedModel) -> Agent:
    reporter = Agent(
        name="reporter",
        model=model,
        instructions="Write the case up as a Report.",
        output_type=Report,
        description="Writes the case up.",
    )
    return Agent(
        name="concierge",
        model=model,
        instructions="Help with invoices; hand the case to the reporter when done.",
        tools=[lookup_invoice, refund, close_account],
        handoffs=[reporter],
        on_approval=decide,
        config=RunConfig(max_turns=6),
    )


async def record(path: Path, agent: Agent, text: str, run_id: str) -> None:
    with TraceWriter(path) as writer:
        run = Run(agent, input=text, run_id=run_id, trace=writer)
        with contextlib.suppress(RunError):  # a failed run is recorded all the same
            await RunResultStreaming(run).collect()


def recorded(path: Path, agent: Agent, text: str = USER_INPUT, run_id: str = ROOT_ID) -> Trace:
    """The run recorded under a fixed clock (every read a quarter second after the one
    before), so its times, and the golden files that show them, are the same every time."""
    with using_clock(TickingClock()):
        asyncio.run(record(path, agent, text, run_id))
    return read_trace(path)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path = tmp_path_factory.mktemp("trace") / "run.jsonl"
    return recorded(path, agents(ScriptedModel(script())))


@pytest.fixture(scope="module")
def view(trace: Trace) -> TraceView:
    return extract_trace(trace)


def load_plan_act() -> Any:
    path = Path(__file__).resolve().parents[1] / "charts" / "plan_act.py"
    spec = importlib.util.spec_from_file_location("charts.plan_act", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool_calls(view: TraceView) -> dict[str, ToolCallView]:
    return {
        entry.call_id: entry
        for run in view.runs
        for turn in run.turns
        for entry in turn.entries
        if isinstance(entry, ToolCallView)
    }


def entries_of(run: RunSection, kind: type[Any]) -> list[Any]:
    return [entry for turn in run.turns for entry in turn.entries if isinstance(entry, kind)]


# ---------------------------------------------------------------- extraction


def test_sections_follow_the_runs_and_nest_the_handoff(trace: Trace, view: TraceView) -> None:
    root = view.root
    assert (root.agent, root.run_id, root.via, root.depth) == ("concierge", ROOT_ID, "root", 0)
    assert root.input == (USER_INPUT,)
    assert [turn.number for turn in root.turns] == [0, 1, 2]
    (handoff,) = entries_of(root, HandoffView)
    assert (handoff.from_agent, handoff.to_agent, handoff.call_id) == (
        "concierge",
        "reporter",
        "call_handoff",
    )
    reporter = handoff.run
    assert reporter is not None
    assert (reporter.agent, reporter.via, reporter.depth) == ("reporter", "handoff", 1)
    # The driver names a handoff's run after the parent's transition that handed off.
    seq = next(t.seq for t in trace.transitions(ROOT_ID) if t.row.action == "apply_handoff")
    assert reporter.run_id == f"{ROOT_ID}/{seq}"
    assert reporter.input == ()  # it continues the conversation: no input of its own
    assert [run.agent for run in view.runs] == ["concierge", "reporter"]
    assert view.detached == ()
    # The handoff's own call shows as the handoff, not as a tool call.
    assert "call_handoff" not in tool_calls(view)


def test_phase_paths_and_rows_come_from_the_transitions(trace: Trace, view: TraceView) -> None:
    assert [turn.phases for turn in view.root.turns] == [
        ("CallingModel", "CallingModel", "ExecutingTools", "CallingModel"),
        ("CallingModel", "NeedsApproval", "ExecutingTools", "CallingModel"),
        ("CallingModel", "ApplyingHandoff", "Done"),
    ]
    reporter = view.runs[1]
    assert [turn.phases for turn in reporter.turns] == [
        ("CallingModel", "Finalizing", "RepairingOutput", "Done")
    ]
    for run in view.runs:
        assert run.rows == tuple(t.row.index for t in trace.transitions(run.run_id))
        assert run.on_chart
        steps = [step for turn in run.turns for step in turn.steps]
        assert [step.action for step in steps] == [
            t.row.action for t in trace.transitions(run.run_id)
        ]
    assert view.table is not None and view.table.digest == DEFAULT_TABLE.digest
    assert not view.table.runnable and view.chart_note == ""  # drawn from the record
    assert view.overlay() == TraceOverlay.from_rows(DEFAULT_TABLE, view.root.rows)
    assert view.overlay(reporter) == TraceOverlay.from_rows(DEFAULT_TABLE, reporter.rows)


def test_model_text_is_the_folded_message_and_calls_are_marked_streamed(
    trace: Trace, view: TraceView
) -> None:
    messages = [m for run in view.runs for m in entries_of(run, Message)]
    assert messages[0] == Message(f"Let me look that up. <b>bold?</b> {SCRIPT}", "concierge")
    assert [m.agent for m in messages] == ["concierge", "reporter", "reporter"]
    deltas = "".join(e.text for e in trace.events(ROOT_ID) if e.type == "token_delta")
    assert deltas == messages[0].text  # the deltas are folded, not repeated
    calls = [c for run in view.runs for c in entries_of(run, ModelCall)]
    assert [c.purpose for c in calls] == ["turn", "turn", "turn", "finalize", "repair"]
    assert all(c.streamed for c in calls)
    assert [c.finish_reason for c in calls][:3] == ["tool_calls"] * 3


def test_tool_calls_carry_arguments_results_approvals_and_denials(view: TraceView) -> None:
    calls = tool_calls(view)
    assert list(calls) == ["call_lookup", "call_bad", "call_close", "call_refund", "call_greedy"]
    lookup = calls["call_lookup"]
    assert lookup.pretty == '{"number": "INV-7"}'
    assert lookup.result is not None and lookup.result.status == "executed"
    assert SCRIPT in lookup.result.content and lookup.result.pretty is not None
    assert not lookup.failed and lookup.approval is None

    bad = calls["call_bad"]
    assert bad.pretty is None  # not JSON: shown as the model wrote it
    assert bad.failed and bad.result is not None and bad.result.status == "errored"

    close = calls["call_close"]
    assert close.denied and close.result is not None and close.result.status == "denied"

    refund_ok, refund_big = calls["call_refund"], calls["call_greedy"]
    assert refund_ok.approval is not None and refund_ok.approval.status == "approved"
    assert refund_ok.approval.reason == "within the desk's limit"
    assert refund_ok.result is not None and refund_ok.result.content.startswith("refunded 49.00")
    assert refund_big.approval is not None and refund_big.approval.status == "rejected"
    assert refund_big.approval.reason == "over the 100 EUR limit"
    assert refund_big.result is not None and refund_big.result.status == "rejected"


def test_repair_usage_and_final_output(view: TraceView) -> None:
    reporter = view.runs[1]
    (repair,) = entries_of(reporter, RepairView)
    assert repair.attempt == 1 and "Invalid JSON" in repair.errors[0]
    assert [turn.usage for turn in view.root.turns] == [
        usage(120, 40),
        usage(260, 30),
        usage(320, 12),
    ]
    assert reporter.turns[0].usage == usage(400, 9) + usage(450, 25)
    assert reporter.usage == usage(400, 9) + usage(450, 25)
    total = sum((turn.usage for run in view.runs for turn in run.turns), Usage())
    assert view.usage == total
    assert view.outcome.status == "completed"
    assert view.outcome.value is not None
    assert json.loads(view.outcome.value) == {
        "invoice": "INV-7",
        "refunded": 49.0,
        "summary": "Refunded the double charge.",
    }


# ---------------------------------------------------------------- other endings


def failing_reporter(model: ScriptedModel) -> Agent:
    return Agent(name="reporter", model=model, output_type=Report)


def test_a_failed_run_shows_its_error_in_red_everywhere(tmp_path: Path) -> None:
    model = ScriptedModel(["not json", f"still not json {SCRIPT}"])
    trace = recorded(tmp_path / "failed.jsonl", failing_reporter(model), "Report.", "run-fail")
    view = extract_trace(trace)
    assert view.outcome.status == "failed"
    error = view.outcome.error
    assert error is not None and error.title == "InvalidStructuredOutput"
    errors = entries_of(view.root, ErrorView)
    assert [e.title for e in errors] == ["StructuredOutputFailed", "InvalidStructuredOutput"]
    assert errors[0].detail == f"still not json {SCRIPT}"

    page = trace_to_html(trace, svg=False)
    assert '<div class="result-box failed">' in page
    assert "<h2>Run failed: InvalidStructuredOutput</h2>" in page
    assert page.count('<div class="entry error">') == 2
    assert '<span class="badge failed">failed</span>' in page
    assert SCRIPT not in page and escape(SCRIPT) in page

    markdown = trace_to_markdown(trace)
    assert "| outcome | **failed** |" in markdown
    assert "## Failed\n\n**InvalidStructuredOutput**: InvalidStructuredOutput(" in markdown
    assert "## Errors\n\n- reporter, turn 0: **StructuredOutputFailed**: " in markdown
    mermaid = trace_to_mermaid(trace)
    assert mermaid.rstrip().splitlines()[-1].startswith("    a0--xuser: failed: ")


def test_a_suspended_run_lists_the_calls_it_waits_for(tmp_path: Path) -> None:
    model = ScriptedModel([[ToolCall("call_refund", "refund", '{"invoice": "A", "amount": 5}')]])
    agent = Agent(name="desk", model=model, tools=[refund])
    trace = recorded(tmp_path / "suspended.jsonl", agent, "Refund A.", "run-wait")
    view = extract_trace(trace)
    assert view.outcome.status == "suspended"
    assert [(p.tool, p.call_id, p.status) for p in view.outcome.pending] == [
        ("refund", "call_refund", "waiting")
    ]
    (call,) = tool_calls(view).values()
    assert call.result is None and call.approval is not None and call.approval.status == "waiting"
    page = trace_to_html(trace, svg=False)
    assert "<h2>Suspended: waiting for approval</h2>" in page
    assert "## Suspended, waiting for approval\n\n- `refund` `" in trace_to_markdown(trace)
    assert "a0-)user: suspended: waiting for approval of refund" in trace_to_mermaid(trace)


def test_an_agent_run_as_a_tool_nests_under_its_call(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [ToolCall("call_ask", "ask_helper", '{"input": "What is 6 x 7?"}')],
            "42, says the helper.",  # the helper's answer
            "The answer is 42.",
        ]
    )
    helper = Agent(name="helper", model=model, instructions="Do arithmetic.")
    agent = Agent(name="asker", model=model, tools=[helper.as_tool("ask_helper")])
    view = extract_trace(recorded(tmp_path / "tool.jsonl", agent, "6 x 7?", "run-ask"))
    call = tool_calls(view)["call_ask"]
    assert call.run is not None
    assert (call.run.agent, call.run.via, call.run.depth) == ("helper", "tool", 1)
    assert call.run.run_id == "run-ask/2:call_ask"  # <run>/<step of the batch>:<call id>
    assert call.run.input == ("What is 6 x 7?",)
    assert call.run.outcome.text == "42, says the helper."
    assert call.result is not None and call.result.content == "42, says the helper."
    assert [run.agent for run in view.runs] == ["asker", "helper"]
    mermaid = trace_to_mermaid(view_trace := read_trace(tmp_path / "tool.jsonl"))
    assert "    tools->>a1: What is 6 x 7?" in mermaid
    assert "    a1-->>tools: done: 42, says the helper." in mermaid
    assert 'id="run-run-ask-2-call_ask"' in trace_to_html(view_trace, svg=False)


# ---------------------------------------------------------------- which chart


def test_a_custom_chart_is_drawn_from_the_traces_record(tmp_path: Path) -> None:
    """The trace records its chart, so a custom chart draws without being imported; a
    matching table given is used as is, a table of another chart is noted and not used."""
    plan_act = load_plan_act()
    model = ScriptedModel(plan_act.script())
    trace = recorded(tmp_path / "plan.jsonl", plan_act.agent(model), "When?", "run-plan")
    table: TransitionTable = plan_act.PLAN_ACT_TABLE
    assert trace.header.chart_digest == table.digest != DEFAULT_TABLE.digest

    drawn = extract_trace(trace)
    assert drawn.table is not None and drawn.table.digest == table.digest
    assert not drawn.table.runnable and drawn.chart_note == ""
    assert drawn.overlay() == TraceOverlay.from_rows(table, drawn.root.rows)
    page = trace_to_html(trace, svg=False)
    assert page.count('class="chart-panel"') == 1 and "Planning" in page

    wrong = extract_trace(trace, DEFAULT_TABLE)
    assert wrong.table is not None and wrong.table.digest == table.digest
    assert "is another chart, so the trace's own record of its chart is drawn" in wrong.chart_note

    known = extract_trace(trace, table)
    assert known.table is table and known.chart_note == ""
    assert known.root.turns[0].phases[0] == "Planning"
    assert trace_to_html(trace, table, svg=False) == page


def test_a_run_on_another_chart_than_the_root_is_not_drawn(trace: Trace) -> None:
    # Pretend the reporter ran on another chart: its rows no longer match the table.
    reporter_id = extract_trace(trace).runs[1].run_id
    lines = []
    for line in trace.lines:
        if isinstance(line, TransitionTrace) and line.run_id == reporter_id:
            line = dataclasses.replace(line, row=dataclasses.replace(line.row, target="Elsewhere"))
        lines.append(line)
    view = extract_trace(Trace(trace.header, lines))
    assert view.root.on_chart and not view.runs[1].on_chart
    assert view.overlay(view.runs[1]) is None
    page = trace_to_html(Trace(trace.header, lines), svg=False)
    assert page.count('class="chart-panel"') == 1
    assert "Not drawn (recorded on another chart): reporter." in page


# ---------------------------------------------------------------- golden files, stability

EXPORTERS = {
    "html": lambda trace: trace_to_html(trace, svg=False),
    "mmd": trace_to_mermaid,
    "md": trace_to_markdown,
}


@pytest.mark.parametrize("suffix", sorted(EXPORTERS))
def test_output_equals_the_golden_file(trace: Trace, suffix: str) -> None:
    text = EXPORTERS[suffix](trace)
    path = GOLDEN / f"trace_run.{suffix}"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_bytes(text.encode())
    assert path.exists(), f"{path} is missing: run with HELIKON_UPDATE_GOLDEN=1"
    assert path.read_bytes() == text.encode(), (
        f"{path.name} differs from the exporter's output; if the change is intended, "
        "regenerate with HELIKON_UPDATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("suffix", sorted(EXPORTERS))
def test_a_second_recording_of_the_run_gives_the_same_bytes(
    trace: Trace, suffix: str, tmp_path: Path
) -> None:
    again = recorded(tmp_path / "again.jsonl", agents(ScriptedModel(script())))
    first, second = EXPORTERS[suffix](trace), EXPORTERS[suffix](again)
    assert first == second
    assert first.endswith("\n") and not first.endswith("\n\n")


def test_the_svg_page_is_stable_and_inlines_the_drawn_path(trace: Trace) -> None:
    page = trace_to_html(trace)
    assert page == trace_to_html(trace)
    assert page.count("<svg ") == 2  # the root's path and the reporter's
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page and "<!--" not in page
    assert "AgentLoopChart (trace overlay)" in page
    assert 'class="chart-panel" data-run="run-root"' in page


def test_without_dot_the_page_shows_the_chart_as_dot_text(
    trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "")
    page = trace_to_html(trace)
    assert "<svg" not in page
    assert "The chart is shown as DOT text: rendering a diagram needs Graphviz" in page
    assert page.count("<pre>digraph &#34;AgentLoopChart&#34; {") == 2


# ---------------------------------------------------------------- escaping


def test_html_escapes_every_text_from_the_trace(trace: Trace) -> None:
    page = trace_to_html(trace, svg=False)
    for raw in (SCRIPT, PWN, IMG, "<b>bold?</b>"):
        assert raw not in page
    assert escape(SCRIPT) in page and escape(IMG) in page
    # One script element: the page's own, allowed by its hash and nothing else.
    assert page.count("<script") == 1
    match = re.search(r"<script>(.*?)</script>", page, re.DOTALL)
    assert match is not None
    digest = base64.b64encode(hashlib.sha256(match.group(1).encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert csp is not None
    assert csp.group(1).startswith("default-src 'none'; ")
    assert f"script-src 'sha256-{digest}'" in csp.group(1)
    assert "http://" not in page.replace('xmlns="http://www.w3.org', "")
    assert "https://" not in page


def test_dot_escapes_a_chart_label_that_holds_markup() -> None:
    evil = "--><script>window.__pwned = 1</script><!--"
    step = ChartTransition((0,), evil, "Done", "model_response", (evil,), evil)
    graph = ChartGraph(
        name=evil,
        initial=evil,
        nodes=(
            ChartNode("__initial__", "initial", "start"),
            ChartNode(evil, "normal", evil, visits=1, current=True),
            ChartNode("Done", "done", "Done"),
        ),
        transitions=(step,),
        edges=(ChartEdge("__initial__", evil), ChartEdge(evil, "Done", (step,))),
        overlaid=True,
    )
    svg = inline_svg(render(to_dot(graph), "svg"))
    assert "<script" not in svg and "<!--" not in svg and "-->" not in svg
    assert "&lt;script&gt;" in svg
    assert svg.startswith("<svg") and svg.endswith("</svg>")


def test_mermaid_text_is_one_inert_line() -> None:
    assert (
        mermaid_text("a;b #c <br> <b>d</b>\n e")
        == "a\u204fb \u266fc \u2039br\u203a \u2039b\u203ad\u2039/b\u203a e"
    )
    assert mermaid_text("x" * 80) == "x" * 59 + "…"
    assert mermaid_text("") == " "


def test_mermaid_lines_hold_no_markup_comment_or_statement_end(trace: Trace) -> None:
    mermaid = trace_to_mermaid(trace)
    lines = mermaid.splitlines()
    assert lines[:4] == ["---", 'title: "concierge · run run-root"', "---", "sequenceDiagram"]
    assert lines[4:9] == [
        "    actor user as user",
        "    participant a0 as concierge",
        "    participant a1 as reporter",
        "    participant model as model",
        "    participant tools as tools",
    ]
    statement = re.compile(r"^    (Note over \w+|\w+(->>|-->>|--x|-\))\w+): .+$")
    for line in lines[9:]:
        assert statement.match(line), line
        label = line.split(": ", 1)[1]
        assert not set(label) & set("<>;#"), line
    assert "    user->>a0: I was charged twice for invoice INV-7. \u2039img src=" in mermaid
    for expected in (
        '    a0->>tools: lookup_invoice({"number": "INV-7"})',
        "    tools--xa0: errored: error: invalid arguments for tool 'lookup_invoice'…",
        "    tools--xa0: denied: denied by policy: close_account",
        '    a0->>user: approve refund({"invoice": "INV-7", "amount": 49})?',
        "    user-->>a0: approved: within the desk's limit",
        "    user--xa0: rejected: over the 100 EUR limit",
        "    a0->>a1: handoff (concierge to reporter)",
        "    a1->>model: finalize",
        "    a1->>model: repair",
    ):
        assert expected in lines
    assert lines[-1].startswith('    a0-->>user: done: { "invoice": "INV-7"')


def outside_code(markdown: str) -> str:
    """The Markdown with its fenced blocks and code spans taken out (they show text as is)."""
    markdown = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", markdown, flags=re.DOTALL | re.MULTILINE)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown)


def test_markdown_tables_keep_their_columns_and_show_markup_as_text(trace: Trace) -> None:
    markdown = trace_to_markdown(trace)
    assert "<" not in outside_code(markdown) and ">" not in outside_code(markdown)
    assert f"```text\n{USER_INPUT}\n```" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    for table in markdown.split("\n\n"):
        lines = [line for line in table.splitlines() if line.startswith("|")]
        assert len({len(re.split(r"(?<!\\)\|", line)) for line in lines}) <= 1, table
    assert rows
    assert "| outcome | **completed** |" in markdown
    assert "| usage | 5 requests · 1666 tokens (1550 in, 116 out) |" in markdown
    assert (
        "| concierge | `run-root` | turn 1 | CallingModel → NeedsApproval → ExecutingTools → "
        "CallingModel | 1 | 2 | 1 request · 290 tokens (260 in, 30 out) |"
    ) in markdown
    assert (
        '| concierge | turn 1 | `refund` | `{"invoice": "INV-7", "amount": 4900}` | rejected | '
        "**rejected** | `over the 100 EUR limit: refund` |"
    ) in markdown
    assert "- concierge, turn 2: handoff concierge → reporter (run `run-root/7`)" in markdown


# ---------------------------------------------------------------- the page in a browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
)


class DevTools:
    """A tiny client of Chromium's DevTools protocol: one tab, its commands and events."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        # Entered explicitly: websockets >= 17.1 deprecates a connection used outside `with`.
        self.socket = connect(url, max_size=None).__enter__()
        self.events: list[dict[str, Any]] = []
        self.last_id = 0
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.last_id += 1
        message: dict[str, Any] = {"id": self.last_id, "method": method, "params": params}
        if method.split(".")[0] != "Target":
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        while True:
            reply = self.receive()
            if reply.get("id") == message["id"]:
                assert "error" not in reply, reply
                result: dict[str, Any] = reply["result"]
                return result

    def receive(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.socket.recv(timeout=30))
        if "method" in message:
            self.events.append(message)
            if message["method"] == "Page.javascriptDialogOpening":
                # An alert() would block the page: dismiss it (and fail the test later).
                self.last_id += 1
                dismiss = {"id": self.last_id, "method": "Page.handleJavaScriptDialog"}
                self.socket.send(
                    json.dumps({**dismiss, "params": {"accept": True}, "sessionId": self.session})
                )
        return message

    def wait_for(self, method: str) -> None:
        while not any(event["method"] == method for event in self.events):
            self.receive()

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def seen(self, *methods: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["method"] in methods]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[DevTools]:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    profile = tmp_path / "profile"
    log = (tmp_path / "chromium.log").open("w")
    process = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and len(port_file.read_text().split()) == 2):
            assert process.poll() is None, "Chromium exited at start"
            assert time.monotonic() < deadline, "Chromium did not open its DevTools port"
            time.sleep(0.05)
        port, path = port_file.read_text().split()
        tools = DevTools(f"ws://127.0.0.1:{port}{path}")
        yield tools
        tools.socket.close()
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def open_page(browser: DevTools, html: str, path: Path) -> str:
    """Write `html` to `path`, open it and wait for its load event; returns its URL."""
    path.write_text(html, encoding="utf-8")
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.send(f"{domain}.enable")
    browser.send("Page.navigate", url=path.as_uri())
    browser.wait_for("Page.loadEventFired")
    return path.as_uri()


def assert_quiet(browser: DevTools, url: str) -> None:
    """Nothing logged as an error or warning (CSP violations are), nothing thrown, no
    dialog opened, and no request made but the page's own."""
    logged = [
        event
        for event in browser.seen("Runtime.consoleAPICalled", "Log.entryAdded")
        if event["params"].get("type", event["params"].get("entry", {}).get("level"))
        in ("error", "warning", "assert")
    ]
    assert logged == []
    assert browser.seen("Runtime.exceptionThrown", "Page.javascriptDialogOpening") == []
    requested = [e["params"]["request"]["url"] for e in browser.seen("Network.requestWillBeSent")]
    assert requested == [url]
    assert browser.seen("Network.loadingFailed") == []


def test_the_page_renders_without_errors_or_requests_and_runs_no_injected_script(
    trace: Trace, tmp_path: Path, browser: DevTools
) -> None:
    url = open_page(browser, trace_to_html(trace), tmp_path / "trace.html")
    assert browser.evaluate("document.title") == "concierge · run run-root · helikon trace"
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.scripts.length") == 1
    text = browser.evaluate("document.body.textContent")
    shown = browser.evaluate("document.body.innerText")
    for raw in (SCRIPT, PWN, IMG, "<b>bold?</b>"):
        assert raw in text and raw in shown
    assert browser.evaluate("document.querySelectorAll('aside.chart svg').length") == 2

    # The page's own script ran (its CSP hash matches): folding, zoom and the run picker.
    turns = "[...document.querySelectorAll('details.turn')]"
    browser.evaluate("document.querySelector('[data-fold=close]').click()")
    assert browser.evaluate(f"{turns}.some(d => d.open)") is False
    browser.evaluate("document.querySelector('[data-fold=open]').click()")
    assert browser.evaluate(f"{turns}.every(d => d.open)") is True
    width = "document.querySelector('aside.chart svg').viewBox.baseVal.width"
    fitted = browser.evaluate(width)
    browser.evaluate("document.querySelector('[data-chart-zoom=in]').click()")
    assert browser.evaluate(width) == pytest.approx(fitted / 1.25)
    panels = "[...document.querySelectorAll('.chart-panel')]"
    shown_panels = f"{panels}.filter(p => !p.hidden).map(p => p.dataset.run)"
    assert browser.evaluate(shown_panels) == ["run-root"]
    browser.evaluate(
        "const s = document.getElementById('chart-run'); s.value = s.options[1].value;"
        "s.dispatchEvent(new Event('change'))"
    )
    assert browser.evaluate(shown_panels) == ["run-root/7"]
    assert_quiet(browser, url)


def test_a_page_without_dot_is_quiet_too(
    tmp_path: Path, browser: DevTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan_act = load_plan_act()
    model = ScriptedModel(plan_act.script())
    trace = recorded(tmp_path / "plan.jsonl", plan_act.agent(model), "When?", "run-plan")
    monkeypatch.setenv("PATH", "")  # no dot: the chart shows as DOT text
    html = trace_to_html(trace)
    url = open_page(browser, html, tmp_path / "dot-text.html")
    assert browser.evaluate("document.querySelector('.chart-panel pre').textContent").startswith(
        'digraph "PlanActChart" {'
    )
    assert_quiet(browser, url)


# ---------------------------------------------------------------- guardrails and compaction


def test_a_tripped_input_guardrail_shows_before_any_model_call(tmp_path: Path) -> None:
    guardrail = InputGuardrail("no-card-numbers", lambda text, ctx: GuardrailResult(True, "a PAN"))
    agent = Agent(name="desk", model=ScriptedModel([]), input_guardrails=[guardrail])
    trace = recorded(tmp_path / "guard.jsonl", agent, "4111 1111 1111 1111", "run-guard")
    view = extract_trace(trace)
    (turn,) = view.root.turns
    kinds = [entry.kind for entry in turn.entries]
    assert kinds == ["guardrail", "error"]  # no model call was made
    assert turn.entries[0] == GuardrailView("no-card-numbers", "input", "a PAN")
    assert view.outcome.error is not None and view.outcome.error.title == "GuardrailTripped"
    assert "input guardrail <b>no-card-numbers</b> tripped" in trace_to_html(trace, svg=False)
    assert "- desk, turn 0: input guardrail `no-card-numbers` tripped: a PAN" in (
        trace_to_markdown(trace)
    )
    assert "    Note over a0: input guardrail no-card-numbers tripped: a PAN" in (
        trace_to_mermaid(trace)
    )


def test_a_compaction_shows_its_summary_and_its_model_call(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [ToolCall("call_lookup", "lookup_invoice", '{"number": "INV-7"}')],
            "Summary: the user asked about INV-7, which was paid twice.",
            "INV-7 was paid twice.",
        ]
    )
    config = RunConfig(compaction_threshold=10)
    agent = Agent(name="desk", model=model, tools=[lookup_invoice], config=config)
    view = extract_trace(recorded(tmp_path / "compact.jsonl", agent, "INV-7?", "run-compact"))
    # The compaction call is not a turn: it ends turn 0, and turn 1 starts after it.
    first, second = view.root.turns
    assert first.phases == (
        "CallingModel",
        "CallingModel",
        "ExecutingTools",
        "Compacting",
        "CallingModel",
    )
    assert [e.purpose for e in first.entries if isinstance(e, ModelCall)] == ["turn", "compact"]
    summaries = [e for e in first.entries if e.kind == "compaction"]
    assert [s.text for s in summaries] == [
        "Summary: the user asked about INV-7, which was paid twice."
    ]
    assert second.phases == ("CallingModel", "Done")
    assert view.outcome.text == "INV-7 was paid twice."


# ---------------------------------------------------------------- traces cut short


def test_a_header_alone_renders_as_an_unfinished_run(trace: Trace) -> None:
    empty = Trace(trace.header, [])
    view = extract_trace(empty)
    assert view.root.turns == () and view.outcome.status == "unfinished"
    assert view.root.path == () and view.overlay() is None
    assert "<h2>Unfinished</h2>" in trace_to_html(empty)
    assert "## Unfinished" in trace_to_markdown(empty)
    assert trace_to_mermaid(empty).endswith("    a0--xuser: unfinished\n")


def test_a_run_whose_parent_line_is_missing_is_shown_detached(trace: Trace) -> None:
    lines = [
        line
        for line in trace.lines
        if not (isinstance(line, TransitionTrace) and line.row.action == "apply_handoff")
    ]
    view = extract_trace(Trace(trace.header, lines))
    (detached,) = view.detached
    assert (detached.agent, detached.via, detached.outcome.status) == (
        "reporter",
        "detached",
        "completed",
    )
    assert [run.agent for run in view.runs] == ["concierge", "reporter"]
    page = trace_to_html(Trace(trace.header, lines), svg=False)
    assert "run not linked to the root" in page


# ---------------------------------------------------------------- renderers from a hand-built view


def small_view() -> TraceView:
    """One run: a model call whose answer has `;` and `#`, a tool call, a guardrail."""
    header = TraceHeader("desk", "run-1", "AgentLoopChart", "0" * 64, "9.9", DEFAULT_TABLE.data())
    call = ToolCallView(
        "c1", "look", '{"q": "a|b"}', None, ToolOutcome("found `x`; #1", "executed")
    )
    turn = Turn(
        0,
        (Step(1, 2, "CallingModel", "start", "CallingModel", "start_turn"),),
        (
            ModelCall("turn", usage(5, 1), "tool_calls"),
            Message("a; b # c", "desk"),
            call,
            GuardrailView("tone", "output", "too curt"),
        ),
        usage(5, 1),
    )
    outcome = Outcome("failed", error=ErrorView("GuardrailTripped", "GuardrailTripped(...)"))
    run = RunSection("run-1", "desk", 0, "root", ("hi",), (turn,), outcome, usage(5, 1), (2,))
    return TraceView(header, run, chart_note="no chart")


def test_mermaid_of_a_hand_built_view() -> None:
    assert trace_mermaid(small_view()).splitlines()[4:] == [
        "    actor user as user",
        "    participant a0 as desk",
        "    participant model as model",
        "    participant tools as tools",
        "    user->>a0: hi",
        "    Note over a0: desk · turn 0",
        "    a0->>model: turn",
        "    model-->>a0: a\u204f b \u266f c",
        '    a0->>tools: look({"q": "a|b"})',
        "    tools-->>a0: executed: found `x`\u204f \u266f1",
        "    Note over a0: output guardrail tone tripped: too curt",
        "    a0--xuser: failed: GuardrailTripped(...)",
    ]


def test_markdown_of_a_hand_built_view() -> None:
    markdown = trace_markdown(small_view())
    assert "| outcome | **failed** |" in markdown
    assert "| chart | AgentLoopChart `000000000000` |" in markdown
    assert '| desk | turn 0 | `look` | `{"q": "a\\|b"}` | — | executed | ``found `x`; #1`` |' in (
        markdown
    )
    assert "- desk, turn 0: output guardrail `tone` tripped: too curt" in markdown
    assert "## Failed\n\n**GuardrailTripped**: GuardrailTripped(...)" in markdown
