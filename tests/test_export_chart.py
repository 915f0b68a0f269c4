"""Chart exporters: extract -> ChartGraph -> DOT, Mermaid, Markdown; JSON; rendering with dot.

Golden files live in tests/golden/ (`<chart>.dot`, `.mmd`, `.md`, `.json`) and must equal the
exporters' output byte for byte. After an intended change to a chart or an exporter,
regenerate them and review the diff:

    HELIKON_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_export_chart.py
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helikon import DEFAULT_TABLE
from helikon.core import TransitionTable
from helikon.export import (
    ChartEdge,
    ChartGraph,
    ChartGroup,
    ChartNode,
    ChartTransition,
    ChartView,
    Doc,
    RenderError,
    TraceOverlay,
    chart_to_dot,
    chart_to_json,
    chart_to_markdown,
    chart_to_mermaid,
    compact_ids,
    extract,
    render,
    to_dot,
    to_markdown,
    to_mermaid,
)

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("HELIKON_UPDATE_GOLDEN") == "1"

# Row indices of the default chart: start, tool call, next turn (twice), then a text answer.


def row_index(source: str, input_kind: str, target: str, action: str) -> int:
    """The default chart's row with these ends and action (found, not hard-coded)."""
    wanted = (source, input_kind, target, action)
    return next(
        r.index
        for r in DEFAULT_TABLE.rows
        if (r.source, r.input_kind, r.target, r.action) == wanted
    )


START = row_index("CallingModel", "start", "CallingModel", "start_turn")
TOOL_CALLS = row_index("CallingModel", "model_response", "ExecutingTools", "execute_tools")
NEXT_TURN = row_index("ExecutingTools", "tool_results", "CallingModel", "next_turn")
COMPLETE = row_index("CallingModel", "model_response", "Done", "complete")
TOOL_RUN = (START, TOOL_CALLS, NEXT_TURN, TOOL_CALLS, NEXT_TURN, COMPLETE)


def load_chart(name: str, table: str) -> TransitionTable:
    path = ROOT / "charts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"charts.{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    loaded: TransitionTable = getattr(module, table)
    return loaded


CHARTS: dict[str, TransitionTable] = {
    "default_chart": DEFAULT_TABLE,
    "plan_act": load_chart("plan_act", "PLAN_ACT_TABLE"),
    "retrieve_answer": load_chart("retrieve_answer", "RETRIEVE_ANSWER_TABLE"),
}

EXPORTERS: dict[str, Callable[[TransitionTable], str]] = {
    "dot": chart_to_dot,
    "mmd": chart_to_mermaid,
    "md": chart_to_markdown,
    "json": chart_to_json,
    "overview.dot": lambda table: chart_to_dot(table, layout="overview"),
    "overview.mmd": lambda table: chart_to_mermaid(table, layout="overview"),
}


def phase_names(table: TransitionTable) -> list[str]:
    return [phase.name for phase in table.phases]


def guard_names(table: TransitionTable) -> set[str]:
    return {ref.name for row in table.rows for ref in row.guards}


# ---------------------------------------------------------------- golden files


@pytest.mark.parametrize("suffix", sorted(EXPORTERS))
@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_output_equals_the_golden_file(chart: str, suffix: str) -> None:
    text = EXPORTERS[suffix](CHARTS[chart])
    path = GOLDEN / f"{chart}.{suffix}"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_bytes(text.encode())
    assert path.exists(), f"{path} is missing: run with HELIKON_UPDATE_GOLDEN=1"
    assert path.read_bytes() == text.encode(), (
        f"{path.name} differs from the exporter's output; if the change is intended, "
        "regenerate with HELIKON_UPDATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("suffix", sorted(EXPORTERS))
@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_output_is_stable_and_ends_in_a_newline(chart: str, suffix: str) -> None:
    first, second = (EXPORTERS[suffix](CHARTS[chart]) for _ in range(2))
    assert first == second
    assert first.endswith("\n") and not first.endswith("\n\n")


def test_output_does_not_depend_on_hash_seed() -> None:
    script = (
        "from helikon import DEFAULT_TABLE as t; from helikon.export import *; "
        "print(chart_to_dot(t) + chart_to_mermaid(t) + chart_to_markdown(t), end='')"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


# ---------------------------------------------------------------- every phase, guard, terminal


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_every_phase_and_guard_appears_in_every_format(chart: str) -> None:
    table = CHARTS[chart]
    for suffix, export in EXPORTERS.items():
        text = export(table)
        # An overview names the phases; its rows' guards are in the table beside it.
        guards = guard_names(table) if "overview" not in suffix else set()
        for name in [*phase_names(table), *guards]:
            assert name in text, f"{name} missing from the {suffix} export of {chart}"


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_dot_draws_done_and_failed_as_distinct_terminals(chart: str) -> None:
    lines = chart_to_dot(CHARTS[chart]).splitlines()
    done = next(line for line in lines if line.strip().startswith('"Done" ['))
    failed = next(line for line in lines if line.strip().startswith('"Failed" ['))
    assert 'shape="doublecircle"' in done and 'shape="doublecircle"' in failed
    assert 'fillcolor="#d4f1d4"' in done and 'fillcolor="#f8d7d5"' in failed
    assert '  { rank=sink; "Done"; "Failed"; }' in lines


def test_dot_marks_the_initial_phase_and_styles_custom_phases() -> None:
    dot = chart_to_dot(DEFAULT_TABLE)
    assert '"__initial__" [shape="point"' in dot
    assert '"__initial__" -> "CallingModel";' in dot
    assert "dashed" not in dot.split("subgraph")[0]  # no custom phase in the default chart
    assert 'shape="box", style="rounded,filled"' in dot


def test_dot_edge_labels_carry_row_id_input_guards_and_action() -> None:
    dot = chart_to_dot(DEFAULT_TABLE)
    assert "#8 model_response [has_handoff] / apply_handoff\\l" in dot
    assert "#24 tool_results / next_turn\\l" in dot
    assert "#50 model_response / apply_summary\\l" in dot
    # A row every phase shares names the row of each phase.
    assert "#14,19,25,29,34,39,44,48,51 cancel / cancel_run\\l" in dot


def test_mermaid_marks_start_ends_and_terminal_classes() -> None:
    mermaid = chart_to_mermaid(DEFAULT_TABLE)
    lines = [line.strip() for line in mermaid.splitlines()]
    assert lines[:4] == ["---", "title: AgentLoopChart", "---", "stateDiagram-v2"]
    for expected in (
        "[*] --> CallingModel",
        "Done --> [*]",
        "Failed --> [*]",
        "class Done done",
        "class Failed failed",
        "CallingModel --> ApplyingHandoff : #8 model_response [has_handoff] / apply_handoff",
        "Running --> Failed : #14,19,25,29,34,39,44,48,51 cancel / cancel_run",
    ):
        assert expected in lines
    for name in ("done", "failed", "custom", "visited", "current"):
        assert any(line.startswith(f"classDef {name} ") for line in lines)


def test_markdown_lists_rows_by_id_and_documents_guards_and_actions() -> None:
    markdown = chart_to_markdown(DEFAULT_TABLE)
    table, guards = markdown.split("## Guards")
    guards, actions = guards.split("## Actions")
    lines = [line.split(" | ") for line in table.splitlines() if line.startswith("| ")]
    rows = [" | ".join(cells) for cells in lines if cells[1] == "`CallingModel`"]
    assert [row.split(" | ")[0] for row in rows] == [f"| {i}" for i in range(14)]
    assert [row.split(" | ")[4] for row in rows[:5]] == [
        "`Failed`",
        "`CheckingInput`",
        "`Finalizing`",
        "`CheckingInput`",
        "`CallingModel`",
    ]
    assert [row.split(" | ")[4] for row in rows[5:14]] == [
        "`Failed`",
        "`Failed`",
        "`Failed`",
        "`ApplyingHandoff`",
        "`NeedsApproval`",
        "`ExecutingTools`",
        "`Finalizing`",
        "`CheckingOutput`",
        "`Done`",
    ]
    assert "| 13 | `CallingModel` | `model_response` | otherwise | `Done` | `complete` |" in table
    assert (
        "| 14, 19, 25, 29, 34, 39, 44, 48, 51 | any non-terminal phase | `cancel` | — | `Failed` | "
        "`cancel_run` |"
    ) in table
    for name, doc in DEFAULT_TABLE.guard_docs.items():
        assert f"- `{name}`: {' '.join(doc.split())}" in guards
    for name in ("complete", "next_turn", "cancel_run"):
        assert f"- `{name}`: {DEFAULT_TABLE.action_docs[name]}" in actions
    assert "absorb" not in markdown and "reject_input" not in markdown


def test_json_is_the_table_data_with_a_checkable_digest() -> None:
    data = json.loads(chart_to_json(DEFAULT_TABLE))
    digest = data.pop("digest")
    assert data == DEFAULT_TABLE.as_data()
    compact = json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert digest == hashlib.sha256(compact.encode()).hexdigest() == DEFAULT_TABLE.digest


# ---------------------------------------------------------------- the overview layout


def edge_labels(dot: str) -> dict[tuple[str, str], str]:
    """(source, target) -> label text of each labelled edge in `dot`."""
    found = re.findall(
        r'^  "([^"]+)" -> "([^"]+)" \[(?:ltail="[^"]*", )?label="([^"]*)"', dot, re.M
    )
    return {(source, target): label for source, target, label in found}


@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_overview_draws_one_edge_per_source_and_target_labelled_with_row_ids(chart: str) -> None:
    table = CHARTS[chart]
    graph = extract(table)
    labels = edge_labels(chart_to_dot(table, layout="overview"))
    pairs = [(e.source, e.target) for e in graph.edges if e.transitions]
    assert len(labels) == len(pairs) == len(set(pairs))
    shown: list[int] = []
    for edge in graph.edges[1:]:
        source = (
            graph.group.members[-1]
            if graph.group and edge.source == graph.group.id
            else edge.source
        )
        label = labels[(source, edge.target)]
        assert label == "\\n".join(compact_ids(edge.rows, 5))
        shown += edge.rows
    # Every declared row is on exactly one edge, by its id.
    assert sorted(shown) == [r.index for r in table.rows if not r.implicit]


def test_overview_labels_hold_no_guard_or_action() -> None:
    dot = chart_to_dot(DEFAULT_TABLE, layout="overview")
    for name in [*DEFAULT_TABLE.guard_docs, *DEFAULT_TABLE.action_docs]:
        assert name not in dot
    assert '"CallingModel" -> "Failed" [label="0, 5-7"' in dot
    mermaid = chart_to_mermaid(DEFAULT_TABLE, layout="overview")
    assert "    CallingModel --> Failed : 0, 5-7\n" in mermaid
    assert (
        "    Running --> Failed : 14, 15, 19, 20, 25, 26, 29, 30, 34, 35, 39, 40, 44, 45, "
        "48, 49, 51, 52\n"
    ) in (mermaid)


def test_overview_overlay_counts_each_edges_visits() -> None:
    overlay = TraceOverlay.from_rows(DEFAULT_TABLE, TOOL_RUN)
    dot = chart_to_dot(DEFAULT_TABLE, overlay, layout="overview")
    assert f'"CallingModel" -> "ExecutingTools" [label="{TOOL_CALLS}\\nx2"' in dot
    assert f"CallingModel --> ExecutingTools : {TOOL_CALLS}  x2" in chart_to_mermaid(
        DEFAULT_TABLE, overlay, layout="overview"
    )


def test_compact_ids_writes_runs_as_ranges_and_wraps() -> None:
    assert compact_ids([5, 3, 4, 0]) == ("0, 3-5",)
    assert compact_ids([1, 2]) == ("1, 2",)
    assert compact_ids([1, 2, 3, 9, 11, 12, 20], per_line=2) == ("1-3, 9", "11, 12", "20")
    assert compact_ids([]) == ("",)


# ---------------------------------------------------------------- extraction


def test_extract_labels_rows_by_id_and_ranks_them_among_alternatives() -> None:
    graph = extract(DEFAULT_TABLE)
    by_action = {t.action: t for t in graph.transitions if t.source == "CallingModel"}
    handoff = by_action["apply_handoff"]
    assert (handoff.priority, handoff.alternatives) == (4, 9)
    assert handoff.guards == ("has_handoff",)
    assert handoff.label == "#8 model_response [has_handoff] / apply_handoff"
    assert (by_action["complete"].priority, by_action["complete"].guards) == (9, ())


def test_extract_draws_rows_every_phase_shares_once_from_the_group() -> None:
    graph = extract(DEFAULT_TABLE)
    assert graph.group is not None
    assert graph.group.members == tuple(p.name for p in DEFAULT_TABLE.phases if not p.final)
    shared = [t for t in graph.transitions if t.source == graph.group.id]
    assert [(t.input_kind, t.target, t.action) for t in shared] == [
        ("cancel", "Failed", "cancel_run"),
        ("fail", "Failed", "fail_run"),
    ]
    assert len(shared[0].rows) == len(graph.group.members)
    assert graph.transitions[-2:] == tuple(shared)

    flat = extract(DEFAULT_TABLE, group_shared=False)
    assert flat.group is None
    cancels = [t for t in flat.transitions if t.input_kind == "cancel"]
    assert [t.source for t in cancels] == list(graph.group.members)


def test_extract_groups_what_the_chart_states_not_what_phases_happen_to_share() -> None:
    """The group is the chart's `everywhere` rows (from_.any); a chart whose phases each
    declare the same row themselves states no such thing, and draws each."""
    from statemachine import State

    from helikon import LoopChart, compile_chart

    class EachItsOwn(LoopChart):
        calling_model = State("CallingModel", initial=True)
        compacting = State("Compacting")
        done = State("Done", final=True)
        failed = State("Failed", final=True)
        start = calling_model.to.itself(on="start_turn")
        model_response = (
            calling_model.to(compacting, cond="empty", on="compact")
            | calling_model.to(done, on="complete")
            | compacting.to(calling_model, on="apply_summary")
        )
        cancel = calling_model.to(failed, on="cancel_run") | compacting.to(failed, on="cancel_run")
        fail = failed.from_.any(on="fail_run")

    table = compile_chart(EachItsOwn)
    assert [[table.rows[i].input_kind for i in group] for group in table.everywhere] == [
        ["fail", "fail"]
    ]
    graph = extract(table)
    assert graph.group is not None
    assert [(t.source, t.input_kind) for t in graph.transitions if t.target == "Failed"] == [
        ("CallingModel", "cancel"),
        ("Compacting", "cancel"),
        (graph.group.id, "fail"),
    ]


def test_a_chart_recorded_in_a_trace_draws_as_the_compiled_one() -> None:
    """A trace records rows, not how the chart declared them: `ChartData.table()` recovers
    the rows every phase has alike (table.recorded_everywhere), so the drawing is the same."""
    recorded = DEFAULT_TABLE.data().table()
    assert recorded.everywhere == DEFAULT_TABLE.everywhere
    assert extract(recorded).transitions == extract(DEFAULT_TABLE).transitions


def test_extract_groups_edges_by_source_and_target_in_table_order() -> None:
    graph = extract(DEFAULT_TABLE)
    assert graph.edges[0] == ChartEdge("__initial__", "CallingModel")
    pairs = [(e.source, e.target) for e in graph.edges]
    assert len(pairs) == len(set(pairs))
    to_failed = next(e for e in graph.edges if (e.source, e.target) == ("CallingModel", "Failed"))
    assert [t.action for t in to_failed.transitions] == [
        "fail_budget",
        "fail_truncated",
        "fail_empty",
        "fail_duplicate_calls",
    ]
    shown = sorted(i for t in graph.transitions for i in t.rows)
    assert shown == [r.index for r in DEFAULT_TABLE.rows if not r.implicit]


def test_implicit_rows_are_left_out_unless_asked_for() -> None:
    assert not any(t.implicit for t in extract(DEFAULT_TABLE).transitions)
    graph = extract(DEFAULT_TABLE, implicit=True)
    actions = {t.action for t in graph.transitions if t.implicit}
    assert actions == {"absorb", "reject_input"}
    assert sorted(i for t in graph.transitions for i in t.rows) == list(
        range(len(DEFAULT_TABLE.rows))
    )
    assert '"Done" -> "Done"' not in chart_to_dot(DEFAULT_TABLE)
    assert '"Done" -> "Done"' in chart_to_dot(DEFAULT_TABLE, implicit=True)


def test_node_kinds() -> None:
    kinds = {node.id: node.kind for node in extract(DEFAULT_TABLE).nodes}
    assert kinds.pop("__initial__") == "initial"
    assert kinds.pop("Done") == "done"
    assert kinds.pop("Failed") == "failed"
    assert set(kinds.values()) == {"normal"}


@pytest.mark.skipif("plan_act" not in CHARTS, reason="charts/plan_act.py not written yet")
def test_custom_phases_are_drawn_apart() -> None:
    table = CHARTS["plan_act"]
    custom = [p.name for p in table.phases if p.custom]
    assert custom
    graph = extract(table)
    assert {graph.node(name).kind for name in custom} == {"custom"}
    dot, mermaid = to_dot(graph), to_mermaid(graph)
    for name in custom:
        assert any(
            line.strip().startswith(f'"{name}" [') and "dashed" in line for line in dot.splitlines()
        )
        assert f"    class {name} custom\n" in mermaid
    assert "- Custom phases: " in to_markdown(graph)


# ---------------------------------------------------------------- trace overlay


def test_overlay_from_rows_counts_visits_and_knows_the_current_phase() -> None:
    overlay = TraceOverlay.from_rows(DEFAULT_TABLE, TOOL_RUN)
    # The start row stays in CallingModel: a count on its edge, not another visit.
    assert dict(overlay.phases) == {"CallingModel": 3, "ExecutingTools": 2, "Done": 1}
    assert dict(overlay.rows) == {START: 1, TOOL_CALLS: 2, NEXT_TURN: 2, COMPLETE: 1}
    assert overlay.current == "Done"


def test_overlay_marks_visited_states_with_counts_and_the_current_state() -> None:
    overlay = TraceOverlay.from_rows(DEFAULT_TABLE, TOOL_RUN[:-1])
    graph = extract(DEFAULT_TABLE, overlay)
    assert graph.overlaid
    assert graph.node("ExecutingTools").visits == 2
    assert graph.node("CallingModel").current
    assert not graph.node("Done").visits

    dot = to_dot(graph)
    calling = next(line for line in dot.splitlines() if line.strip().startswith('"CallingModel"'))
    assert 'label="CallingModel\\nx3"' in calling
    assert 'penwidth="4"' in calling and "Helvetica-Bold" in calling and "bold" in calling
    tools = next(line for line in dot.splitlines() if line.strip().startswith('"ExecutingTools"'))
    assert 'label="ExecutingTools\\nx2"' in tools and 'color="#1565c0"' in tools
    assert "Helvetica-Bold" not in tools
    done = next(line for line in dot.splitlines() if line.strip().startswith('"Done" ['))
    assert 'color="#a0a7b0"' in done
    assert "#10 model_response [has_tool_calls] / execute_tools  x2\\l" in dot
    assert "AgentLoopChart (trace overlay)" in dot

    mermaid = to_mermaid(graph)
    assert "        ExecutingTools : ExecutingTools x2" in mermaid
    assert "    class CallingModel current" in mermaid
    assert "    class ExecutingTools visited" in mermaid
    assert ": #24 tool_results / next_turn  x2" in mermaid

    markdown = to_markdown(graph)
    assert "| row | from | input | guards | to | action | fired |" in markdown
    assert "| 24 | `ExecutingTools` | `tool_results` | otherwise | `CallingModel` | " in markdown
    assert "`next_turn` | 2 |" in markdown
    assert "- Current phase (trace overlay): `CallingModel`" in markdown


def test_overlay_shows_implicit_rows_the_run_took() -> None:
    rejected = next(
        r for r in DEFAULT_TABLE.rows if r.action == "reject_input" and r.source == "Compacting"
    )
    overlay = TraceOverlay({"Compacting": 1, "Failed": 1}, {rejected.index: 1}, "Failed")
    graph = extract(DEFAULT_TABLE, overlay)
    implicit = [t for t in graph.transitions if t.implicit]
    assert [(t.source, t.input_kind, t.visits) for t in implicit] == [
        ("Compacting", rejected.input_kind, 1)
    ]


def test_overlay_of_another_chart_is_refused() -> None:
    with pytest.raises(ValueError, match="Planning"):
        extract(DEFAULT_TABLE, TraceOverlay({"Planning": 1}))
    with pytest.raises(ValueError, match="row 999"):
        extract(DEFAULT_TABLE, TraceOverlay(rows={999: 1}))
    with pytest.raises(ValueError, match="row 999"):
        extract(DEFAULT_TABLE, TraceOverlay(marks={999: ("x",)}))
    with pytest.raises(ValueError, match="marks phase 'Planning'"):
        extract(DEFAULT_TABLE, TraceOverlay(phase_marks={"Planning": ("x",)}))


def test_overlay_marks_become_svg_classes_on_edges_and_nodes() -> None:
    first, second = TOOL_RUN[:2]
    rejected = next(
        r for r in DEFAULT_TABLE.rows if r.action == "reject_input" and r.source == "Compacting"
    )
    overlay = TraceOverlay(
        marks={first: ("b", "a"), second: ("a",), rejected.index: ("gone",)},
        phase_marks={"ExecutingTools": ("c", "a", "c")},
    )
    graph = extract(DEFAULT_TABLE, overlay)
    (edge,) = [e for e in graph.edges if second in e.rows]
    assert edge.marks == ("a",)
    assert graph.node("ExecutingTools").marks == ("a", "c")
    assert any(t.rows == (rejected.index,) for t in graph.transitions)  # marked: drawn
    dot = to_dot(graph)
    assert dot.count('class="a b"') == 1 and 'class="a c"' in dot and 'class="gone"' in dot
    svg = render(dot, "svg").decode()
    assert 'class="node a c"' in svg and 'class="edge a b"' in svg
    # Without marks nothing changes: the same DOT as before marks existed.
    assert "class=" not in chart_to_dot(
        DEFAULT_TABLE, TraceOverlay.from_rows(DEFAULT_TABLE, TOOL_RUN)
    )


# ---------------------------------------------------------------- renderers from a hand-built graph


def small_graph(*, overlaid: bool = False) -> ChartGraph:
    """Plan -> Act -> Done, with a guard, a negated guard and a shared cancel row."""
    plan_to_act = ChartTransition((0,), "Plan", "Act", "model_response", ("ready",), "act", 1, 2)
    plan_again = ChartTransition(
        (1,), "Plan", "Plan", "model_response", ("not ready",), "replan", 2, 2, visits=2
    )
    act_done = ChartTransition((2,), "Act", "Done", "tool_results", (), "finish", visits=1)
    cancel = ChartTransition((3, 4), "Any", "Failed", "cancel", (), "cancel_run")
    transitions = (plan_to_act, plan_again, act_done, cancel)
    return ChartGraph(
        name="Small",
        initial="Plan",
        nodes=(
            ChartNode("__initial__", "initial", "start"),
            ChartNode("Plan", "custom", "Plan", visits=3),
            ChartNode("Act", "normal", "Act"),
            ChartNode("Done", "done", "Done", visits=1, current=True),
            ChartNode("Failed", "failed", "Failed"),
        ),
        transitions=transitions,
        edges=(
            ChartEdge("__initial__", "Plan"),
            ChartEdge("Plan", "Act", (plan_to_act,)),
            ChartEdge("Plan", "Plan", (plan_again,)),
            ChartEdge("Act", "Done", (act_done,)),
            ChartEdge("Any", "Failed", (cancel,)),
        ),
        group=ChartGroup("Any", "any phase", ("Plan", "Act")),
        guards=(Doc("ready", "The plan is ready."),),
        actions=(Doc("act", "Act on the plan."), Doc("replan", "")),
        digest="abc",
        overlaid=overlaid,
    )


def test_mermaid_of_a_hand_built_graph() -> None:
    assert to_mermaid(small_graph()) == "\n".join(
        [
            "---",
            "title: Small",
            "---",
            "stateDiagram-v2",
            "    classDef done fill:#d4f1d4,stroke:#2e7d32,stroke-width:2px",
            "    classDef failed fill:#f8d7d5,stroke:#c62828,stroke-width:2px",
            "    classDef custom fill:#fff1d0,stroke:#b7791f,stroke-dasharray:5 3",
            "    classDef visited stroke:#1565c0,stroke-width:3px",
            "    classDef current stroke:#1565c0,stroke-width:5px,font-weight:bold",
            '    state "any phase" as Any {',
            "        Plan",
            "        Act",
            "        Plan --> Act : #0 model_response [ready] / act",
            "        Plan --> Plan : #1 model_response [not ready] / replan",
            "    }",
            "    Done",
            "    Failed",
            "    [*] --> Plan",
            "    Act --> Done : #2 tool_results / finish",
            "    Any --> Failed : #3,4 cancel / cancel_run",
            "    Done --> [*]",
            "    Failed --> [*]",
            "    class Done done",
            "    class Failed failed",
            "    class Plan custom",
            "",
        ]
    )


def test_mermaid_overlay_of_a_hand_built_graph() -> None:
    mermaid = to_mermaid(small_graph(overlaid=True))
    assert "        Plan : Plan x3\n" in mermaid
    assert "        Plan --> Plan : #1 model_response [not ready] / replan  x2\n" in mermaid
    assert mermaid.endswith(
        "    class Done done\n"
        "    class Failed failed\n"
        "    class Plan custom\n"
        "    class Plan visited\n"
        "    class Done current\n"
    )


def test_markdown_of_a_hand_built_graph() -> None:
    assert to_markdown(small_graph()) == "\n".join(
        [
            "# Small",
            "",
            "- Initial phase: `Plan`",
            "- Terminal phases: `Done` (success), `Failed` (failure)",
            "- Custom phases: `Plan`",
            "- Table digest: `abc`",
            "",
            "## Transitions",
            "",
            "For the phase and input at hand, rows are tried in the order of their ids; the "
            "first whose guards all hold fires: it runs its action and moves to its target. "
            "A row's id is the number the diagrams, `helikon table`, traces, the debugger and "
            "the studio show.",
            "",
            "| row | from | input | guards | to | action |",
            "|---|---|---|---|---|---|",
            "| 0 | `Plan` | `model_response` | `ready` | `Act` | `act` |",
            "| 1 | `Plan` | `model_response` | `not ready` | `Plan` | `replan` |",
            "| 2 | `Act` | `tool_results` | — | `Done` | `finish` |",
            "| 3, 4 | any phase | `cancel` | — | `Failed` | `cancel_run` |",
            "",
            "## Guards",
            "",
            "- `ready`: The plan is ready.",
            "",
            "## Actions",
            "",
            "- `act`: Act on the plan.",
            "- `replan`: (no docstring)",
            "",
        ]
    )


def test_dot_of_a_hand_built_graph() -> None:
    dot = to_dot(small_graph(overlaid=True))
    lines = [line.strip() for line in dot.splitlines()]
    assert lines[0] == 'digraph "Small" {'
    assert lines[-1] == "}"
    assert 'subgraph "cluster_Any" {' in lines
    plan = next(line for line in lines if line.startswith('"Plan" ['))
    assert "dashed" in plan and 'label="Plan\\nx3"' in plan
    assert lines.index('subgraph "cluster_Any" {') < lines.index(plan)
    assert '"Plan" -> "Plan" [label="#1 model_response [not ready] / replan  x2\\l"' in dot
    # The shared edge leaves the cluster: drawn from a member, clipped at the border.
    assert '"Act" -> "Failed" [ltail="cluster_Any", label="#3,4 cancel / cancel_run\\l"' in dot
    done = next(line for line in lines if line.startswith('"Done" ['))
    assert "Helvetica-Bold" in done and 'label="Done\\nx1"' in done


def test_dot_escapes_quotes_and_backslashes() -> None:
    graph = small_graph()
    odd = ChartNode("Plan", "custom", 'say "hi" \\ bye')
    graph = ChartGraph(
        graph.name, graph.initial, (graph.nodes[0], odd, *graph.nodes[2:]), (), (), None
    )
    assert '"Plan" [fillcolor="#fff1d0", color="#b7791f", style="rounded,filled,dashed", ' in (
        to_dot(graph)
    )
    assert 'label="say \\"hi\\" \\\\ bye"' in to_dot(graph)


# ---------------------------------------------------------------- rendering with the real dot


def test_dot_renders_to_svg_with_every_phase() -> None:
    for table in CHARTS.values():
        svg = render(chart_to_dot(table), "svg").decode()
        assert "<svg" in svg
        for name in phase_names(table):
            assert f">{name}</text>" in svg


def test_dot_renders_to_png() -> None:
    overlay = TraceOverlay.from_rows(DEFAULT_TABLE, TOOL_RUN)
    png = render(chart_to_dot(DEFAULT_TABLE, overlay), "png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(png) > 10_000


def test_render_without_dot_names_the_missing_executable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RenderError, match="`dot` executable") as raised:
        render(chart_to_dot(DEFAULT_TABLE), "svg")
    assert raised.value.missing == "dot"


def test_render_reports_bad_dot_and_unknown_formats() -> None:
    with pytest.raises(RenderError, match="dot could not render"):
        render("digraph {", "svg")
    with pytest.raises(ValueError, match="unknown image format"):
        render("digraph {}", "gif")  # type: ignore[arg-type]


def test_chart_view_shows_itself_in_a_notebook(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    view = ChartView(DEFAULT_TABLE, TraceOverlay.from_rows(DEFAULT_TABLE, TOOL_RUN))
    assert repr(view) == "ChartView(AgentLoopChart, overlay)"
    svg = view._repr_svg_()
    assert svg is not None and "<svg" in svg and "ExecutingTools" in svg
    html = view._repr_html_()
    assert html.startswith('<div class="helikon-chart"><svg') and "<?xml" not in html

    monkeypatch.setenv("PATH", str(tmp_path))
    assert view._repr_svg_() is None
    fallback = view._repr_html_()
    assert "dot is not installed" in fallback and "&quot;CallingModel&quot;" in fallback


def test_importing_export_does_not_import_graphviz_or_jinja2() -> None:
    script = (
        "import sys, helikon.export; "
        "assert 'graphviz' not in sys.modules and 'jinja2' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
