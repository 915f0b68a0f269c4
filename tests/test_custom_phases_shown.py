"""Custom phases are visible: `helikon run` names the phase of a turn outside CallingModel and
prints each effect phase and its effect's result; the HTML, Markdown and Mermaid traces show
an effect's arguments and result; the debugger and the studio name the phase and the result.

The values shown are the ones a trace records (redacted when the run redacts), cut short on
one line where a terminal shows them (`helikon.core.quoting.cut`).
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from browser_support import CHROMIUM, Browser
from pydantic import JsonValue

from helikon import (
    AGENT_LOOP,
    Agent,
    EffectContext,
    RunConfig,
    ScriptedModel,
    ToolCall,
    compile_chart,
    effect,
    extend,
    to,
)
from helikon.cli import main
from helikon.cli.loading import load_module
from helikon.core.quoting import cut
from helikon.debug.debugger import Debugger
from helikon.debug.view import step_report
from helikon.export import extract_trace, trace_to_html, trace_to_markdown, trace_to_mermaid
from helikon.export.console import EventPrinter, StepNotes, streamed_by
from helikon.export.trace_view import EffectView
from helikon.run.driver import Run
from helikon.run.results import RunResultStreaming
from helikon.studio import StudioServer, ThreadedDebugger
from helikon.studio.view import step_summary
from helikon.trace import Sinks, Trace, TraceWriter, read_trace

ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-live-0123456789"
MARKUP = "<b>bold</b>"


def _first_reply(state: Any, inp: Any, ctx: Any) -> bool:
    """The model answers turn 0: its answer is checked before it counts."""
    return bool(state.turn == 0)


# An effect phase in front of the loop (as charts/retrieve_answer.py), and a second one the
# model's first answer enters, so an effect phase also follows streamed text.
LOOKUP = compile_chart(
    extend(AGENT_LOOP, "Lookup")
    .phase("Retrieving", effect="lookup")
    .phase("Checking", effect="check")
    .retarget(
        "CallingModel", "start", "start_turn -> CallingModel", to="Retrieving", on="enter_effect"
    )
    .rows("Retrieving", "effect_result", to("CallingModel", on="keep_effect_result"))
    .insert(
        "CallingModel",
        "model_response",
        to("Checking", cond="first_reply", on="enter_effect"),
        before="complete",
    )
    .rows("Checking", "effect_result", to("CallingModel", on="keep_effect_result"))
    .guards(first_reply=_first_reply)
    .build()
)
DRAFT = "A first draft."
ANSWER = "The answer, checked."
PASSAGES: JsonValue = {"passages": [f"{MARKUP} key {SECRET}", "x" * 300]}


@effect
async def lookup(context: EffectContext) -> JsonValue:
    """Passages for the question: one holds markup and a secret, one is long."""
    return PASSAGES


@effect
async def check(context: EffectContext) -> JsonValue:
    return {"checked": True}


def lookup_agent(config: RunConfig | None = None) -> Agent:
    model = ScriptedModel([DRAFT, ANSWER])
    config = config or RunConfig()
    return Agent("looker", model, chart=LOOKUP, effects=[lookup, check], config=config)


def hide_secret(text: str) -> str:
    return text.replace(SECRET, "[secret]")


def json_text(data: JsonValue) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


async def _printed(agent: Agent, trace: Path | None = None) -> str:
    out = io.StringIO()
    printer = EventPrinter(out, colour=False)
    run = Run(agent, input="Look it up.", run_id="run-look")
    notes = StepNotes(printer, run.run_id)
    writer = TraceWriter(trace) if trace is not None else None
    run.trace = Sinks(writer, notes) if writer is not None else notes
    async for event in RunResultStreaming(run):
        printer(event)
    if writer is not None:
        writer.close()
    return out.getvalue()


def printed(agent: Agent, trace: Path | None = None) -> str:
    return asyncio.run(_printed(agent, trace))


# ---------------------------------------------------------------- helikon run


def test_helikon_run_names_the_planning_phase_of_plan_act(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    code = main(["run", "charts/plan_act.py", "--offline", "--store", "none"])
    out = capsys.readouterr().out
    turns = [line for line in out.splitlines() if line.startswith("──")]
    assert (code, turns) == (0, ["── turn 0 · Planning", "── turn 1", "── turn 2"])


def test_helikon_run_prints_the_effect_phase_and_its_result(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(ROOT)
    trace = tmp_path / "run.jsonl"
    argv = ["run", "charts/retrieve_answer.py", "--offline", "--store", "none"]
    assert main([*argv, "--trace", str(trace)]) == 0
    lines = capsys.readouterr().out.splitlines()
    recorded = read_trace(trace)  # the trace is written as before, beside the console
    inputs = [line.input for line in recorded.transitions()]
    result = next(inp for inp in inputs if inp.kind == "effect_result")
    shown = f"  ↳ retrieve returned: {cut(json_text(result.output))}"
    at = lines.index("── Retrieving: effect retrieve")
    assert lines[at + 1 : at + 3] == [shown, "── turn 0"]
    assert shown.endswith(f"… ({len(json_text(result.output))} characters)")


def test_each_effect_phase_and_result_is_printed_in_stream_order() -> None:
    out = printed(lookup_agent())
    passages = json_text(PASSAGES)
    assert out.splitlines()[1:] == [
        "── Retrieving: effect lookup",
        f"  ↳ lookup returned: {cut(passages)}",
        "── turn 0",
        DRAFT,  # streamed, then the effect phase its answer entered
        "── Checking: effect check",
        '  ↳ check returned: {"checked": true}',
        "── turn 1",
        ANSWER,
        "",
        "✓ completed  2 model calls, 0 tokens",
    ]
    assert out.count(DRAFT) == 1  # streamed once, not printed again


def test_the_console_shows_the_redacted_result_a_trace_records(tmp_path: Path) -> None:
    out = printed(lookup_agent(RunConfig(redact=hide_secret)), tmp_path / "run.jsonl")
    assert SECRET not in out
    assert "key [secret]" in out
    assert SECRET not in (tmp_path / "run.jsonl").read_text()


def test_without_the_transitions_the_console_prints_as_before() -> None:
    async def events() -> list[Any]:
        return [event async for event in lookup_agent().run("Look it up.")]

    out = io.StringIO()
    printer = EventPrinter(out, colour=False)
    for event in asyncio.run(events()):
        printer(event)
    assert [line for line in out.getvalue().splitlines() if line.startswith("──")] == [
        "── turn 0",
        "── turn 1",
    ]
    assert "returned" not in out.getvalue()


@pytest.mark.parametrize(
    ("run_id", "streamed"),
    [
        ("r", True),
        ("r/3", True),  # a handoff target: its events continue the stream
        ("r/3/7", True),
        ("r/3:call_a", False),  # an agent run as a tool streams nothing into it
        ("r/3/7:call_b", False),
        ("r/x", False),
        ("rr/3", False),
        ("other", False),
    ],
)
def test_which_runs_stream_into_the_roots_events(run_id: str, streamed: bool) -> None:
    assert streamed_by(run_id, "r") is streamed


# ---------------------------------------------------------------- traces


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path = tmp_path_factory.mktemp("trace") / "run.jsonl"
    printed(lookup_agent(), path)
    return read_trace(path)


def effects_of(trace: Trace) -> list[EffectView]:
    view = extract_trace(trace)
    return [e for turn in view.root.turns for e in turn.entries if isinstance(e, EffectView)]


def test_the_trace_view_holds_each_effect_with_its_arguments_and_result(trace: Trace) -> None:
    retrieving, checking = effects_of(trace)
    question = json_text({"text": "Look it up."})
    assert (retrieving.phase, retrieving.effect, retrieving.arguments) == (
        "Retrieving",
        "lookup",
        question,
    )
    assert retrieving.output == json_text(PASSAGES)
    assert retrieving.pretty == json.dumps(PASSAGES, indent=2, ensure_ascii=False)
    assert (checking.phase, checking.effect, checking.output) == (
        "Checking",
        "check",
        '{"checked": true}',
    )
    assert checking.arguments == json_text({"text": DRAFT})


def test_the_html_trace_shows_the_effect_result_escaped(trace: Trace) -> None:
    page = trace_to_html(trace, svg=False)
    assert page.count('<div class="entry effect">') == 2
    assert "effect <b>lookup</b>" in page and "effect <b>check</b>" in page
    assert MARKUP not in page
    assert "&lt;b&gt;bold&lt;/b&gt; key " + SECRET in page
    assert "{&#34;checked&#34;: true}" in page


def test_markdown_and_mermaid_list_the_effects(trace: Trace) -> None:
    markdown = trace_to_markdown(trace)
    assert "## Effects" in markdown
    assert "| looker | start | Retrieving | `lookup` |" in markdown
    mermaid = trace_to_mermaid(trace)
    assert '    Note over a0: Checking ran check: {"checked": true}' in mermaid


def test_a_redacted_runs_trace_shows_the_redacted_result(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    printed(lookup_agent(RunConfig(redact=hide_secret)), path)
    retrieving = effects_of(read_trace(path))[0]
    assert SECRET not in retrieving.output and "key [secret]" in retrieving.output
    assert SECRET not in trace_to_html(read_trace(path), svg=False)


# ---------------------------------------------------------------- debugger and studio


async def _steps(debugger: Debugger) -> list[Any]:
    steps = []
    while (step := await debugger.step()) is not None:
        steps.append(step)
    return steps


def test_the_debugger_names_the_phase_and_shows_the_effects_result() -> None:
    steps = asyncio.run(_steps(Debugger.live(lookup_agent(), "Look it up.")))
    report = [line for step in steps for line in step_report(step)]
    passages = json_text(PASSAGES)
    moves = [line.split(" · row")[0] for line in report[:5]]  # row numbers are the chart's
    assert moves == [
        "#1 CallingModel → Retrieving  on start",
        "  ── Retrieving: effect lookup",
        "#2 Retrieving → CallingModel  on effect_result",
        f"    ↳ lookup returned: {cut(passages)}",
        "  ── turn 0",
    ]
    assert '    ↳ check returned: {"checked": true}' in report


def test_a_replayed_trace_shows_the_redacted_result(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    printed(lookup_agent(RunConfig(redact=hide_secret)), path)
    steps = asyncio.run(_steps(Debugger.replay(read_trace(path))))
    report = "\n".join(line for step in steps for line in step_report(step))
    assert "↳ lookup returned: " in report and "key [secret]" in report
    assert SECRET not in report


def test_the_studio_names_a_turns_phase_and_carries_the_effects_result() -> None:
    steps = asyncio.run(_steps(Debugger.live(lookup_agent(), "Look it up.")))
    summaries = [step_summary(step) for step in steps]
    assert summaries[0]["effect"] is None
    assert summaries[1]["effect"] == {
        "phase": "Retrieving",
        "effect": "lookup",
        "text": cut(json_text(PASSAGES)),
    }
    assert summaries[3]["effect"] == {
        "phase": "Checking",
        "effect": "check",
        "text": '{"checked": true}',
    }
    turns = [e["text"] for s in summaries for e in s["events"] if e["type"] == "turn_started"]
    assert turns == ['{"turn": 0}', '{"turn": 1}']  # both in CallingModel: numbers alone


def test_the_studio_names_a_custom_turn_phase() -> None:
    plan_act = load_module(str(ROOT / "charts" / "plan_act.py"))
    agent = plan_act.agent(ScriptedModel(plan_act.script()))
    steps = asyncio.run(_steps(Debugger.live(agent, "When?")))
    turns = [
        entry["text"]
        for step in steps
        for entry in step_summary(step)["events"]
        if entry["type"] == "turn_started"
    ]
    assert turns == ["turn 0 · Planning", '{"turn": 1}', '{"turn": 2}']


REVIEW_CHART = '''
from typing import Any

from helikon import AGENT_LOOP, Agent, ToolCall, compile_chart, extend, to, tool
from helikon.core.chart.guards import text_of


def approved(state: Any, inp: Any, ctx: Any) -> bool:
    return text_of(inp.items).startswith("APPROVED")


ReviewChart = (
    extend(AGENT_LOOP, "ReviewChart")
    .phase("Reviewing", prompt="Review the answer; reply APPROVED if it is right.")
    .retarget("CallingModel", "model_response", "complete", to="Reviewing", on="review")
    .rows(
        "Reviewing",
        "model_response",
        to("Done", cond="approved", on="complete"),
        to("CallingModel", on="revise"),
    )
    .guards(approved)
    .actions(review="enter_phase", revise="keep_reply")
    .build()
)
EXAMPLE_INPUT = "Send hi."


@tool(needs_approval=True)
def send(text: str) -> str:
    """Send a message.

    Args:
        text: what to send.
    """
    return "sent"


def agent(model: Any) -> Agent:
    return Agent("sender", model, tools=[send], chart=compile_chart(ReviewChart))


def script() -> list[Any]:
    return [[ToolCall("call_send", "send", '{"text": "hi"}')], "Sent it.", "APPROVED"]
'''


def test_runs_resume_names_the_phase_of_the_turns_it_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(ROOT)
    chart = tmp_path / "review_chart.py"
    chart.write_text(REVIEW_CHART)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ran = main(["run", str(chart), "--offline", "--store", store, "--run-id", "r1"])
    assert (ran, "suspended: waiting for approval of send" in capsys.readouterr().out) == (0, True)
    argv = ["runs", "resume", "r1", "--chart", str(chart), "--approve", "all", "--offline"]
    assert main([*argv, "--store", store]) == 0
    turns = [line for line in capsys.readouterr().out.splitlines() if line.startswith("──")]
    assert turns == ["── turn 1", "── turn 2 · Reviewing"]


def test_a_handoff_targets_phases_show_and_a_tool_agents_do_not() -> None:
    """The target of a handoff continues the stream, so its turns name their phase; an
    agent run as a tool streams nothing into it, so its effect phases print nothing."""
    plan_act = load_module(str(ROOT / "charts" / "plan_act.py"))
    model = ScriptedModel(
        [
            [ToolCall("call_look", "looker", '{"input": "Look it up."}')],
            DRAFT,  # the looker, run as a tool
            ANSWER,
            [ToolCall("call_plan", "transfer_to_planner", "{}")],
            *plan_act.script(),
        ]
    )
    looker = Agent("looker", model, chart=LOOKUP, effects=[lookup, check])
    front = Agent("front", model, tools=[looker.as_tool()], handoffs=[plan_act.agent(model)])
    out = printed(front).splitlines()
    assert "── turn 0 · Planning" in out
    assert out.index("● planner") < out.index("── turn 0 · Planning")
    assert not any("returned" in line or "Retrieving" in line for line in out)


@pytest.mark.skipif(
    CHROMIUM is None or shutil.which("dot") is None,
    reason="the page test needs Debian's chromium and Graphviz's dot",
)
def test_the_studio_page_shows_each_effects_result_as_text(tmp_path: Path) -> None:
    server = StudioServer(ThreadedDebugger(Debugger.live(lookup_agent(), "Look it up.")), port=0)
    server.start()
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(server.url)
        page.wait_for("document.querySelector('#diagram g.node.current') !== null")
        page.click("#continue")
        page.wait_for("document.getElementById('status').textContent === 'finished'")
        shown = page.evaluate(
            "[...document.querySelectorAll('#timeline .effect-result')].map(e => e.textContent)"
        )
        passages = json_text(PASSAGES)
        assert shown == [f"lookup returned {cut(passages)}", 'check returned {"checked": true}']
        assert page.evaluate("document.querySelector('.effect-result code b') === null")
        turns = page.evaluate(
            "[...document.querySelectorAll('#timeline .event-type.turn_started')].length"
        )
        assert turns == 2
        assert page.console_errors() == []
    finally:
        browser.close()
        server.close()
