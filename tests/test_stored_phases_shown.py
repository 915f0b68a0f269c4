"""A stored run shows as a live one printed: `helikon runs show` and `helikon run --temporal`
name the phase of each turn outside CallingModel and print each effect phase and its
effect's result, read from the store's records; `runs show` also prints how long each model
call, tool batch and effect took, and where a stored run was resumed, after what pause. A
run on Temporal stores the workflow's times (`workflow.now()`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from test_custom_phases_shown import REVIEW_CHART

from helikon.cli import main
from helikon.durable import open_store
from helikon.trace import TickingClock, using_clock
from helikon.trace.times import parse_iso

ROOT = Path(__file__).resolve().parent.parent
SHOWN = ("──", "  ↳", "✓", "✗", "⏸")  # what names a phase, an effect's result, an end


def shown(out: str) -> list[str]:
    """The lines that name phases and effect results, and the run's end (a call's duration,
    which `runs show` adds beside its result, left out)."""
    lines = [line for line in out.splitlines() if line.startswith(SHOWN)]
    return [re.sub(r"  \(took [^)]*\)$", "", line) for line in lines]


def ran_and_shown(
    capsys: pytest.CaptureFixture[str], chart: str, tmp_path: Path
) -> tuple[list[str], list[str], str]:
    """`helikon run` of `chart`, then `helikon runs show` of the run: (the lines each named,
    all `runs show` printed)."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["run", chart, "--offline", "--store", store, "--run-id", "r1"]) == 0
    ran = shown(capsys.readouterr().out)
    assert main(["runs", "show", "r1", "--store", store, "--events", "100"]) == 0
    out = capsys.readouterr().out
    return ran, shown(out), out


@pytest.mark.parametrize("chart", ["charts/plan_act.py", "charts/retrieve_answer.py"])
def test_runs_show_names_the_phases_and_effect_results_helikon_run_printed(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    chart: str,
) -> None:
    monkeypatch.chdir(ROOT)
    ran, show, _ = ran_and_shown(capsys, chart, tmp_path)
    assert any(" · " in line or "effect" in line for line in show if line.startswith("──"))
    assert show == [line for line in ran if not line.startswith("✓")] + show[-1:]
    assert show[-1].startswith("✓ completed")


def test_runs_show_prints_how_long_each_effect_took(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(ROOT)
    with using_clock(TickingClock(tick=0.5)):
        _, _, out = ran_and_shown(capsys, "charts/retrieve_answer.py", tmp_path)
    took = [line.strip() for line in out.splitlines() if line.startswith("  ⏱")]
    assert took and all(line.split(" took ")[1][0].isdigit() for line in took)
    assert {line.split(" took ")[0] for line in took} == {"⏱ effect", "⏱ model call"}


def test_runs_show_marks_where_a_suspended_run_was_resumed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(ROOT)
    chart = tmp_path / "review_chart.py"
    chart.write_text(REVIEW_CHART)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    with using_clock(TickingClock(tick=0.25)):
        assert main(["run", str(chart), "--offline", "--store", store, "--run-id", "r1"]) == 0
    argv = ["runs", "resume", "r1", "--chart", str(chart), "--approve", "all", "--offline"]
    with using_clock(TickingClock(1_767_225_600.0 + 2 * 3600 + 10)):  # two hours later
        assert main([*argv, "--store", store]) == 0
    capsys.readouterr()

    assert main(["runs", "show", "r1", "--store", store, "--events", "100"]) == 0
    lines = capsys.readouterr().out.splitlines()

    resumed = [line for line in lines if line.startswith("⏵")]
    assert len(resumed) == 1 and resumed[0].startswith("⏵ resumed after 2 h 0 min, at 2026-01-01")
    at = lines.index(resumed[0])
    assert lines[at - 1].startswith("⏸ suspended")  # the mark follows the suspension
    assert shown("\n".join(lines))[-2:] == ["── turn 2 · Reviewing", lines[-1]]


def test_helikon_run_on_temporal_names_the_phases_and_effect_results(
    temporal_address: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What `helikon run` prints of a local run, a run on a worker prints from the store."""
    monkeypatch.chdir(ROOT)
    pytest.importorskip("temporalio")
    chart = ROOT / "charts" / "retrieve_answer.py"
    local = f"sqlite:///{tmp_path / 'local.db'}"
    assert main(["run", str(chart), "--offline", "--store", local]) == 0
    ran = shown(capsys.readouterr().out)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    queue, run_id = f"q-{uuid.uuid4().hex[:8]}", f"r-{uuid.uuid4().hex[:12]}"
    worker = subprocess.Popen(
        [
            sys.executable, "-m", "helikon", "worker", str(chart), "--temporal", temporal_address,
            "--task-queue", queue, "--offline", "--store", store,
        ],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().startswith("helikon worker:")
        code = main(
            [
                "run", str(chart), "--temporal", temporal_address, "--task-queue", queue,
                "--store", store, "--run-id", run_id,
            ]
        )  # fmt: skip
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        assert worker.stdout is not None
        worker.stdout.close()
    out = capsys.readouterr().out
    assert code == 0, out
    assert any(line.startswith("── Retrieving: effect") for line in shown(out))
    assert shown(out) == ran
    opened = open_store(store)  # the workflow's records say when: `workflow.now()`
    try:
        stored = opened.get(run_id)
    finally:
        opened.close()
    times = [record.time for record in stored.records]
    assert all(time is not None and parse_iso(time.at) for time in times)
    timed = [record.time.took is not None for record in stored.records if record.time]
    effects = ("model_response", "effect_result", "tool_results")  # timed in their activity
    assert timed == [record.input.kind in effects for record in stored.records]
    assert all(parse_iso(effect.at or "") for effect in stored.effects)
