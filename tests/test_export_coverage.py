"""The coverage overlay (`TraceOverlay.for_coverage`): many runs' rows merged, and the rows no
run took drawn as uncovered, by `extract` and by the DOT and Mermaid renderers.

Renderers are tested from a hand-built graph; `extract` on the default chart.
"""

from __future__ import annotations

from helikon import DEFAULT_TABLE
from helikon.export import (
    ChartEdge,
    ChartGraph,
    ChartNode,
    ChartTransition,
    TraceOverlay,
    extract,
    to_dot,
    to_mermaid,
)

START, TOOLS, ANSWER, NEXT_TURN, CANCEL_CALLING = 4, 10, 13, 24, 14


def rows_of(graph: ChartGraph, *indices: int) -> ChartTransition:
    return next(t for t in graph.transitions if set(indices) <= set(t.rows))


def test_a_coverage_overlay_counts_phases_by_the_rows_into_them() -> None:
    overlay = TraceOverlay.for_coverage(DEFAULT_TABLE, {START: 2, TOOLS: 1, ANSWER: 2})
    assert overlay.coverage
    assert overlay.current is None
    assert dict(overlay.phases) == {"CallingModel": 3, "ExecutingTools": 1, "Done": 2}


def test_extract_counts_the_rows_no_run_took() -> None:
    overlay = TraceOverlay.for_coverage(DEFAULT_TABLE, {START: 2, ANSWER: 2, CANCEL_CALLING: 1})
    graph = extract(DEFAULT_TABLE, overlay)
    assert graph.coverage and graph.overlaid
    assert rows_of(graph, ANSWER).uncovered == 0
    assert rows_of(graph, TOOLS).uncovered == 1
    assert rows_of(graph, TOOLS).coverage_note == "  (uncovered)"
    cancel = rows_of(graph, CANCEL_CALLING)  # one row for every non-terminal phase
    assert (len(cancel.rows), cancel.uncovered) == (9, 8)
    assert cancel.coverage_note == "  (8 of 9 uncovered)"


def test_a_trace_overlay_marks_nothing_uncovered() -> None:
    graph = extract(DEFAULT_TABLE, TraceOverlay.from_rows(DEFAULT_TABLE, [START, ANSWER]))
    assert not graph.coverage
    assert all(t.uncovered == 0 and t.coverage_note == "" for t in graph.transitions)


def covered_graph() -> ChartGraph:
    """Plan -> Act (taken twice), Plan -> Plan (never taken)."""
    act = ChartTransition((0,), "Plan", "Act", "model_response", ("ready",), "act", 1, 2, visits=2)
    again = ChartTransition(
        (1,), "Plan", "Plan", "model_response", ("not ready",), "replan", 2, 2, uncovered=1
    )
    return ChartGraph(
        name="Small",
        initial="Plan",
        nodes=(
            ChartNode("__initial__", "initial", "start"),
            ChartNode("Plan", "normal", "Plan", visits=1),
            ChartNode("Act", "normal", "Act", visits=2),
        ),
        transitions=(act, again),
        edges=(
            ChartEdge("__initial__", "Plan"),
            ChartEdge("Plan", "Act", (act,)),
            ChartEdge("Plan", "Plan", (again,)),
        ),
        overlaid=True,
        coverage=True,
    )


def test_dot_draws_an_edge_with_an_uncovered_row_dashed_and_says_which_row() -> None:
    dot = to_dot(covered_graph())
    assert 'label="Small (coverage)"' in dot
    assert (
        '"Plan" -> "Plan" [label="#1 model_response [not ready] / replan  (uncovered)\\l", '
        'color="#e65100", fontcolor="#e65100", style="dashed"];'
    ) in dot
    taken = next(line for line in dot.splitlines() if line.startswith('  "Plan" -> "Act"'))
    assert "x2" in taken and "dashed" not in taken and "uncovered" not in taken


def test_mermaid_says_uncovered_on_the_arrow_of_a_row_no_run_took() -> None:
    mermaid = to_mermaid(covered_graph())
    assert "Plan --> Plan : #1 model_response [not ready] / replan  (uncovered)\n" in mermaid
    assert "Plan --> Act : #0 model_response [ready] / act  x2\n" in mermaid
