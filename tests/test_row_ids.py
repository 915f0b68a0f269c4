"""One row numbering everywhere: `Row.index` is the id every view shows.

Diagrams (both layouts, DOT and Mermaid), the Markdown table, `helikon table`, traces, the
terminal debugger and the studio all name a row by the same number; and renumbering nothing
means no shipped chart's digest moves (stored runs and recorded Temporal histories are keyed
by it), which the pinned digests below hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helikon import DEFAULT_TABLE, RunContext, ScriptedModel
from helikon.cli.charts import format_table
from helikon.cli.docs import chart_files, chart_page
from helikon.cli.loading import load_module
from helikon.debug import Debugger
from helikon.debug.view import describe_row, step_line
from helikon.export import chart_to_dot, chart_to_markdown, chart_to_mermaid, extract
from helikon.studio.view import step_summary

CHARTS = Path(__file__).resolve().parents[1] / "charts"

# Today's digests. A change here changes what every stored run and recorded history of
# these charts is keyed by: it needs a migration, not a new pin.
# Moved once, on purpose: the output guardrails' check became a phase of the chart
# (CheckingOutput, issue 20 point 4); runs stored and histories recorded on a15a890f… resume
# on that version, which the package keeps (helikon.run.chart_versions). Moved again: the
# input guardrails' check became rows (CheckingInput, the start rows' twins, issue 20 point
# 4); runs and histories on 7e19d021… resume on that version, kept likewise.
DEFAULT_DIGEST = "ce4ffbf8ef40ab555817b8525e39eafe43f873fc3f21f4745e2f5b0ed74a3612"
PINNED = {
    "approval_gated": DEFAULT_DIGEST,
    "budget_assistant": DEFAULT_DIGEST,
    # Moved once, on purpose: its plan became a turn, so Planning's reply is checked
    # against max_turns by an implicit row (issue 19, point 10); a run stored before counts
    # turns otherwise, and must not resume on this table. Moved again with the default
    # chart's rows it is built on (the output guardrails' phase, then the input's rows).
    "plan_act": "2dfac3fed60f6252c9a496fe4a1f9ebfa63c265191d74ac68b3eac6f5e466919",
    # Built on the default chart's rows: moved with them (the output guardrails' phase, then
    # the input's rows).
    "retrieve_answer": "59b1f61aa3bbb29226f4121c40438b2b797317460fae45174dc09a3b115ca56f",
    "triage": DEFAULT_DIGEST,
}


def test_the_default_charts_digest_is_pinned() -> None:
    assert DEFAULT_TABLE.digest == DEFAULT_DIGEST


def test_every_shipped_charts_digest_is_pinned() -> None:
    digests = {path.stem: chart_page(path).table.digest for path in chart_files(CHARTS)}
    assert digests == PINNED


def test_row_ids_are_positions_in_the_table() -> None:
    assert [row.index for row in DEFAULT_TABLE.rows] == list(range(len(DEFAULT_TABLE.rows)))


def test_within_a_phase_and_input_a_lower_id_is_tried_first() -> None:
    for phase, by_kind in DEFAULT_TABLE.dispatch.items():
        for kind in by_kind:
            ids = [row.index for row in DEFAULT_TABLE.rows_for(phase, kind)]
            assert ids == sorted(ids), (phase, kind)


@pytest.mark.parametrize("render", [chart_to_dot, chart_to_mermaid], ids=["dot", "mermaid"])
def test_detailed_diagram_labels_name_each_row_by_its_id(render: object) -> None:
    text = render(DEFAULT_TABLE)  # type: ignore[operator]
    graph = extract(DEFAULT_TABLE)
    for transition in graph.transitions:
        assert transition.label.startswith("#" + ",".join(map(str, transition.rows)) + " ")
        assert transition.label in text or transition.label.replace(";", ",") in text
    handoff = next(r for r in DEFAULT_TABLE.rows if r.action == "apply_handoff")
    assert f"#{handoff.index} model_response [has_handoff] / apply_handoff" in text


def test_the_markdown_table_has_a_row_column() -> None:
    markdown = chart_to_markdown(DEFAULT_TABLE)
    assert "| row | from | input | guards | to | action |" in markdown
    complete = next(r for r in DEFAULT_TABLE.rows if r.action == "complete")
    assert f"| {complete.index} | `CallingModel` | `model_response` | otherwise |" in markdown
    cancels = [r.index for r in DEFAULT_TABLE.rows if r.action == "cancel_run"]
    assert f"| {', '.join(map(str, cancels))} | any non-terminal phase | `cancel` |" in markdown


async def test_table_trace_debugger_and_studio_name_a_fired_row_alike() -> None:
    budget = load_module(str(CHARTS / "budget_assistant.py"))
    agent = budget.agent(ScriptedModel(budget.script()))
    debugger = Debugger.live(agent, budget.EXAMPLE_INPUT, context=RunContext(budget.deps()))
    printed = format_table(DEFAULT_TABLE, implicit=True).splitlines()
    fired = []
    while (step := await debugger.step()) is not None:
        row = step.match.row
        fired.append(row.index)
        assert describe_row(row).startswith(f"row {row.index}: ")
        assert f"· row {row.index} {row.action}" in step_line(step)
        assert step_summary(step)["row"] == row.index
        line = printed[2 + row.index].split()
        assert (line[0], line[1], line[-1]) == (str(row.index), row.source, row.action)
        assert f"#{row.index} {row.input_kind}" in chart_to_dot(DEFAULT_TABLE)
    assert len(fired) >= 4
