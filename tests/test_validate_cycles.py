"""`helikon validate` warns about each loop of a chart that no limit can stop: a strongly
connected part holding a model-calling or effect phase, with no row that opens a turn or
checks a budget (helikon.core.chart.turns.unbounded_cycles)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helikon import AGENT_LOOP, DEFAULT_TABLE, compile_chart, extend, to
from helikon.cli import main
from helikon.core.chart.turns import unbounded_cycles

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "charts").glob("[a-z]*.py"))


def _ready(state: Any, inp: Any, ctx: Any) -> bool:
    """The poll found something."""
    return bool(inp.output)


def polling(draft: Any) -> Any:
    """An effect phase that polls until `ready`: a self-loop counting nothing."""
    return (
        draft.phase("Polling", effect="poll")
        .retarget(
            "CallingModel", "start", "start_turn -> CallingModel", to="Polling", on="enter_effect"
        )
        .rows(
            "Polling",
            "effect_result",
            to("CallingModel", cond="ready", on="keep_effect_result"),
            to("Polling", on="enter_effect"),
        )
        .guards(ready=_ready)
    )


def repairing_forever(draft: Any) -> Any:
    """A failed repair asks for the output again: Finalizing and RepairingOutput loop (an
    invalid output's row comes first, as in the default chart, in place of its failing)."""
    return draft.rows(
        "RepairingOutput",
        "model_response",
        to("Finalizing", unless="output_valid", on="finalize"),
        "check_structured",
        "complete_structured",
    )


def reviewing(draft: Any) -> Any:
    """A review phase sending answers back to CallingModel: every round opens turns."""
    return (
        draft.phase("Reviewing", prompt="Review the answer.")
        .retarget("CallingModel", "model_response", "complete", to="Reviewing", on="enter_phase")
        .rows(
            "Reviewing",
            "model_response",
            to("Done", cond="has_output_type", on="complete"),
            to("CallingModel", on="keep_reply"),
        )
    )


def chart(*changes: Any) -> Any:
    draft = extend(AGENT_LOOP, "Looping")
    for change in changes:
        draft = change(draft)
    return draft.build()


def loops(*changes: Any) -> list[tuple[str, ...]]:
    table = compile_chart(chart(*changes))
    return unbounded_cycles(table.phases, table.rows, table.effects)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ((), []),
        ((polling,), [("Polling",)]),
        ((repairing_forever,), [("Finalizing", "RepairingOutput")]),
        ((polling, repairing_forever), [("Finalizing", "RepairingOutput"), ("Polling",)]),
        ((reviewing,), []),
        ((reviewing, repairing_forever), [("Finalizing", "RepairingOutput")]),
    ],
)
def test_each_loop_no_limit_stops_is_found_once(
    changes: tuple[Any, ...], expected: list[tuple[str, ...]]
) -> None:
    assert sorted(loops(*changes)) == expected


def test_a_loop_that_checks_the_budget_is_bounded() -> None:
    def budgeted(draft: Any) -> Any:
        stop = to("Failed", cond="budget_exhausted", on="fail_budget")
        return draft.insert("Polling", "effect_result", stop, before="enter_effect")

    assert loops(polling, budgeted) == []


def test_the_default_loop_and_its_approval_self_loop_are_bounded() -> None:
    assert ("NeedsApproval", "approval_decisions", "NeedsApproval") in {
        (row.source, row.input_kind, row.target) for row in DEFAULT_TABLE.rows
    }
    assert unbounded_cycles(DEFAULT_TABLE.phases, DEFAULT_TABLE.rows, DEFAULT_TABLE.effects) == []


def test_a_model_calling_custom_phase_looping_on_approvals_is_exempt() -> None:
    """A self-loop on approval_decisions waits for a person: no run goes round it alone."""
    table = compile_chart(
        extend(AGENT_LOOP, "Asking")
        .phase("Asking", prompt="Ask.", awaits=("model_response", "approval_decisions"))
        .retarget("CallingModel", "model_response", "complete", to="Asking", on="enter_phase")
        .rows("Asking", "model_response", "complete")
        .rows("Asking", "approval_decisions", to("Asking", on="wait"))
        .actions(wait="keep_reply")  # enters Asking again (record_decisions builds NeedsApproval)
        .build()
    )
    assert unbounded_cycles(table.phases, table.rows, table.effects) == []


CHART_FILE = """
from helikon import AGENT_LOOP, extend, to
from test_validate_cycles import polling, repairing_forever

LoopingChart = polling(repairing_forever(extend(AGENT_LOOP, "LoopingChart"))).build()
"""


def test_validate_warns_once_per_loop_naming_its_phases(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    path = tmp_path / "looping.py"
    path.write_text(CHART_FILE)
    assert main(["validate", f"{path}:LoopingChart"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("LoopingChart: ok (")
    lines = err.splitlines()
    assert [line.split(" loop with ")[0] for line in lines] == [
        "chart LoopingChart: warning: Finalizing, RepairingOutput",
        "chart LoopingChart: warning: Polling",
    ]
    assert all("turn_limit_reached or budget_exhausted" in line for line in lines)


@pytest.mark.parametrize("path", SHIPPED)
def test_no_shipped_chart_warns(capsys: pytest.CaptureFixture[str], path: str) -> None:
    assert main(["validate", str(ROOT / path)]) == 0
    out, err = capsys.readouterr()
    assert (out.count(": ok ("), err) == (1, "")


def test_subprocess_validate_warns_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "looping.py"
    path.write_text(CHART_FILE)
    done = subprocess.run(
        [sys.executable, "-m", "helikon", "validate", f"{path}:LoopingChart"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": f"{Path(__file__).parent}{os.pathsep}{ROOT}"},
        timeout=60,
    )
    assert (done.returncode, done.stdout.startswith("LoopingChart: ok (")) == (0, True)
    assert len(done.stderr.splitlines()) == 2
    assert "Traceback" not in done.stderr
