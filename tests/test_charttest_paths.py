"""Chart tests on the default chart and every chart in charts/: a path to every target,
each run through the real driver (over `transition` only where the driver cannot deliver a
step), every declared row covered; and what is reported when that cannot be done."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from helikon import DEFAULT_TABLE
from helikon.charttest import ChartTests, Subject, Witness, format_coverage
from helikon.charttest.drive import check_over_transition, drive, states_of
from helikon.charttest.paths import PathStep
from helikon.charttest.setup import PROBE_HANDOFF
from helikon.cli.loading import load_module

ROOT = Path(__file__).resolve().parent.parent
CHART_FILES = ("budget_assistant", "triage", "plan_act", "approval_gated", "retrieve_answer")
DUPLICATE = "the driver's stream assembler merges fragments by call id"


def subject(name: str) -> Subject:
    if name == "default":
        return Subject.of_table(DEFAULT_TABLE, name="default")
    return Subject.of_module(load_module(str(ROOT / "charts" / f"{name}.py")), name=name)


@pytest.fixture(scope="module", params=("default", *CHART_FILES))
def tested(request: pytest.FixtureRequest) -> tuple[ChartTests, Any]:
    tests = ChartTests(subject(request.param))
    return tests, tests.run_sync()


def test_every_declared_row_is_covered(tested: tuple[ChartTests, Any]) -> None:
    tests, coverage = tested
    declared = {row.index for row in tests.plan.table.rows if not row.implicit}
    limits = {row.index for row in tests.plan.table.rows if row.implicit and row.guards}
    assert set(coverage.rows_hit) == declared | limits  # a turn-limit check is a target too
    assert all(entry.hits for entry in coverage.targets)
    assert coverage.gaps == (), format_coverage(coverage)


def test_every_row_but_duplicate_call_ids_is_covered_through_the_driver(
    tested: tuple[ChartTests, Any],
) -> None:
    tests, coverage = tested
    rows = tests.plan.table.rows
    transition_only = [t for t in coverage.targets if t.via != "driver"]
    assert [str(rows[t.target.row].guards[0]) for t in transition_only] == ["duplicate_call_ids"]
    assert DUPLICATE in transition_only[0].note
    assert all(path.via == "driver" for path in tests.plan.paths if path not in _dups(tests))


def _dups(tests: ChartTests) -> list[Any]:
    rows = tests.plan.table.rows
    return [
        p for p in tests.plan.paths if "duplicate_call_ids" in map(str, rows[p.target.row].guards)
    ]


def test_every_implicit_row_is_covered_by_a_table_test(tested: tuple[ChartTests, Any]) -> None:
    tests, coverage = tested
    implicit = [row.index for row in tests.plan.table.rows if row.implicit and not row.guards]
    assert [entry.row for entry in coverage.implicit if entry.hits] == implicit
    assert {entry.via for entry in coverage.implicit} == {"transition"}


def test_the_coverage_table_lists_every_target_and_says_why_one_is_transition_only(
    tested: tuple[ChartTests, Any],
) -> None:
    tests, coverage = tested
    text = format_coverage(coverage)
    lines = text.splitlines()
    declared = len([row for row in tests.plan.table.rows if not row.implicit])
    assert f"declared rows: {declared} of {declared} covered" in text
    assert "targets without a witness: none" in lines
    assert "gaps: none" in lines
    duplicate = next(line for line in lines if "duplicate_call_ids" in line)
    assert "transition 1" in duplicate
    assert any(line.startswith("  1: ") and DUPLICATE in line for line in lines)


def test_a_path_that_leaves_its_plan_is_a_failure() -> None:
    """The driver is checked, not trusted: a path planned to take the wrong row fails."""
    tests = ChartTests(subject("default"))
    path = next(p for p in tests.plan.paths if p.target.row == 13)  # complete
    wrong = next(p for p in tests.plan.paths if p.target.row == 5)  # truncated
    forged = replace(path, steps=(*path.steps[:-1], PathStep(wrong.target, path.steps[-1].input)))
    result = asyncio.run(drive(tests.bench, forged))
    assert result.failure == "step 2 took row 13 (FFFFFFFF), not row 5 (T)"


def test_handoffs_go_to_the_synthetic_target_whose_run_the_path_scripts() -> None:
    tests = ChartTests(subject("triage"))
    handoffs = [
        step.input
        for path in tests.plan.paths
        for step in path.steps
        if step.input.kind == "model_response"
        and any(getattr(item, "name", "") == PROBE_HANDOFF for item in step.input.items)
    ]
    assert handoffs


# ---------------------------------------------------------------- custom guards

POLITE_CHART = '''
from statemachine import State

from helikon import (
    Agent, Failed, GuardrailTripped, LoopChart, RunFailed, Terminate, TransitionOutcome,
    compile_chart,
)


def rude(state, inp, ctx):
    """The answer insults the user."""
    return "stupid" in "".join(getattr(item, "content", "") for item in inp.items)


def refuse(state, inp, ctx, target):
    """Fail the run instead of sending a rude answer."""
    error = GuardrailTripped("politeness", "output", "the answer was rude")
    failed = Failed(error, state.usage + inp.usage)
    return TransitionOutcome(failed, (RunFailed(error),), Terminate())


class PoliteChart(LoopChart):
    calling_model = State("CallingModel", initial=True)
    done = State("Done", final=True)
    failed = State("Failed", final=True)
    start = calling_model.to.itself(on="start_turn")
    model_response = calling_model.to(failed, cond="rude", on="refuse") | calling_model.to(
        done, on="complete"
    )
    cancel = calling_model.to(failed, on="cancel_run")
    fail = calling_model.to(failed, on="fail_run")


POLITE = compile_chart(PoliteChart, guards={"rude": rude}, actions={"refuse": refuse})


def agent(model):
    return Agent(name="polite", model=model, chart=POLITE)
'''


def polite(tmp_path: Path, extra: str = "") -> Subject:
    path = tmp_path / "polite.py"
    path.write_text(POLITE_CHART + extra, encoding="utf-8")
    return Subject.of_module(load_module(str(path)), name="polite.py")


def test_a_custom_guard_without_a_witness_is_reported_and_never_guessed(tmp_path: Path) -> None:
    tests = ChartTests(polite(tmp_path))
    gaps = {(gap.target.row, gap.guard, gap.value) for gap in tests.plan.unwitnessed}
    rude_row, complete_row = [
        r.index
        for r in tests.plan.table.rows
        if r.input_kind == "model_response" and not r.implicit
    ]
    assert gaps == {(rude_row, "rude", True), (complete_row, "rude", False)}
    assert all(path.target.row not in (rude_row, complete_row) for path in tests.plan.paths)
    coverage = tests.run_sync()
    assert (
        f"row {rude_row} (CallingModel model_response, T): no witness makes rude true"
        in coverage.gaps
    )
    assert (
        f"row {complete_row} (CallingModel model_response, F): no witness makes rude false"
        in coverage.gaps
    )
    # What has no custom guard in its way is still covered.
    covered = {t.target.row for t in coverage.targets if t.hits}
    assert {
        r.index
        for r in tests.plan.table.rows
        if r.input_kind in ("start", "cancel", "fail") and not r.implicit
    } <= covered


WITNESSES = """

from helikon.charttest import Witness

WITNESSES = {
    "rude": Witness(
        true=lambda draft: draft.with_text("What a stupid question."),
        false=lambda draft: draft.with_text("Happy to help."),
    )
}
"""


def test_a_custom_guard_with_the_modules_witnesses_is_covered(tmp_path: Path) -> None:
    coverage = ChartTests(polite(tmp_path, WITNESSES)).run_sync()
    assert coverage.gaps == (), format_coverage(coverage)
    assert {t.via for t in coverage.targets} == {"driver"}


COUNTING = POLITE_CHART.replace(
    'def rude(state, inp, ctx):\n    """The answer insults the user."""\n',
    'RUDE_CALLS = []\n\n\ndef rude(state, inp, ctx):\n    """The answer insults the user."""\n'
    "    RUDE_CALLS.append(inp.kind)\n",
)


def test_a_path_evaluates_a_custom_guard_once_per_step(tmp_path: Path) -> None:
    """Through the driver, the recorder takes the row the run matched (its trace record's
    `match`) and does not match the step again; over `transition`, each step is matched with
    its outcome. Either way a guard runs once per step of a path."""
    assert COUNTING != POLITE_CHART
    path = tmp_path / "polite.py"
    path.write_text(COUNTING + WITNESSES, encoding="utf-8")
    module = load_module(str(path))
    tests = ChartTests(Subject.of_module(module, name="polite.py"))
    calls: list[str] = module.RUDE_CALLS
    checking = {
        planned: sum(1 for s in planned.steps for g, _ in s.target.checked if str(g) == "rude")
        for planned in tests.plan.paths
        if planned.via == "driver"
    }
    checking = {planned: steps for planned, steps in checking.items() if steps}
    assert len(checking) >= 2  # rude, and not
    for planned, steps in checking.items():
        calls.clear()
        states_of(tests.bench, planned)  # what drive() computes first, over transition
        computing = len(calls)
        calls.clear()
        ran = asyncio.run(drive(tests.bench, planned))
        assert ran.failure is None
        assert len(calls) - computing == steps
        calls.clear()
        assert check_over_transition(tests.bench, planned).failure is None
        assert len(calls) == steps


def test_a_witness_that_does_not_do_what_it_says_leaves_a_gap(tmp_path: Path) -> None:
    """Builders only propose: match_row decides, so a wrong witness finds no path."""
    liar = {"rude": Witness(true=lambda draft: draft, false=lambda draft: draft)}
    tests = ChartTests(polite(tmp_path), witnesses={**liar})
    coverage = tests.run_sync()
    missed = [t for t in coverage.targets if not t.hits]
    assert [t.target.checked for t in missed] == [(("rude", True),)]
    assert missed[0].note == "no path reaches it"
