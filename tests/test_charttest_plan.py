"""The planner: a path to every target of the default chart and of every chart in charts/,
each path real when replayed over the pure `transition`, each context variation one that
its target needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from helikon import DEFAULT_TABLE, initial_state, transition
from helikon.charttest import Plan, Subject, targets_of
from helikon.charttest.bench import Bench
from helikon.charttest.search import Planner
from helikon.cli.loading import load_module
from helikon.core.items import Usage
from helikon.core.transition import match_row

ROOT = Path(__file__).resolve().parent.parent
CHARTS = (
    "default",
    "budget_assistant",
    "triage",
    "plan_act",
    "approval_gated",
    "retrieve_answer",
)


def subject(name: str) -> Subject:
    if name == "default":
        return Subject.of_table(DEFAULT_TABLE, name="default")
    return Subject.of_module(load_module(str(ROOT / "charts" / f"{name}.py")), name=name)


@pytest.fixture(scope="module", params=CHARTS)
def planned(request: pytest.FixtureRequest) -> tuple[Bench, Plan]:
    bench = Bench(subject(request.param))
    return bench, Planner(bench).plan()


def test_every_target_has_a_path(planned: tuple[Bench, Plan]) -> None:
    bench, plan = planned
    assert [path.target for path in plan.paths] == list(targets_of(bench.table).reachable)
    assert (plan.unreached, plan.unwitnessed) == ((), ())
    # Only the input guardrails' rows name a guard twice (a start row's twin, the verdict
    # rows): their contradictory sequences are never planned (tests/test_charttest_targets.py).
    sources = {bench.table.rows[target.row].source for target in plan.contradictory}
    assert sources <= {bench.table.initial, "CheckingInput"}


def test_each_path_ends_in_its_target_over_transition(planned: tuple[Bench, Plan]) -> None:
    """Replayed over the pure transition from the initial state, every step of a path takes
    its planned row with its planned guard outcomes, and the last step is the target."""
    bench, plan = planned
    for path in plan.paths:
        ctx = bench.ctx(path.setup)
        spent = path.setup.spent
        state = initial_state(ctx, Usage(spent, 0, spent, 0))
        assert path.steps[0].input.kind == "start"
        for step in path.steps:
            match = match_row(state, step.input, ctx)
            assert (match.row.index, match.checked) == (step.target.row, step.target.checked)
            state = transition(state, step.input, ctx).next_state
        assert path.steps[-1].target == path.target


def test_only_duplicate_call_ids_is_a_step_the_driver_cannot_deliver(
    planned: tuple[Bench, Plan],
) -> None:
    bench, plan = planned
    blocked = [path for path in plan.paths if path.blocked is not None]
    guards = [str(g) for path in blocked for g in bench.table.rows[path.target.row].guards]
    assert guards == ["duplicate_call_ids"]
    assert "merges fragments by call id" in (blocked[0].blocked or "")


def test_paths_are_among_the_shortest(planned: tuple[Bench, Plan]) -> None:
    """Breadth first: a start row is one step, a row from the phase `start` enters (the
    first model call, or a chart's first effect) two."""
    bench, plan = planned
    rows = bench.table.rows
    initial = bench.table.initial
    (entered,) = {
        r.target for r in rows if (r.source, r.input_kind, r.guards) == (initial, "start", ())
    }
    for path in plan.paths:
        row = rows[path.target.row]
        if row.input_kind == "start":
            assert len(path.steps) == 1
        elif row.source == entered:
            assert len(path.steps) == 2


@pytest.mark.parametrize(
    ("guard", "value", "change"),
    [
        ("budget_exhausted", True, "spent=1"),
        ("output_only", True, "no own tools"),
        ("needs_approval", True, "+helikon_probe_ask"),
        ("has_handoff", True, "+transfer_to_helikon_probe_target"),
        ("turn_limit_reached", True, "max_turns=1"),
        ("over_context_budget", True, "compaction_threshold=17"),
        ("has_output_type", True, "output=probe"),
    ],
)
def test_a_path_varies_the_context_its_target_needs(guard: str, value: bool, change: str) -> None:
    bench = Bench(subject("default"))
    plan = Planner(bench).plan()
    path = next(
        p for p in plan.paths if p.target.checked and p.target.checked[-1] == (guard, value)
    )
    assert change in path.setup.changes(bench.base)
