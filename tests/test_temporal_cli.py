"""`helikon worker --temporal` in a process of its own and `helikon run --temporal`: the run
streams the events a local run prints, its approval is decided by update as `--approve`
says, and `helikon runs show` reads it from the store like a local run."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from helikon.cli import main

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "approval_gated.py"


def test_a_chart_runs_on_a_worker_process_and_shows_like_a_local_run(
    temporal_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    queue, run_id = f"q-{uuid.uuid4().hex[:8]}", f"r-{uuid.uuid4().hex[:12]}"
    worker = subprocess.Popen(
        [
            sys.executable, "-m", "helikon", "worker", str(CHART), "--temporal", temporal_address,
            "--task-queue", queue, "--offline", "--store", store,
        ],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert worker.stdout is not None
        ready = worker.stdout.readline()
        assert ready.startswith("helikon worker: payments on task queue"), ready
        code = main(
            [
                "run", str(CHART), "--offline", "--approve", "all", "--temporal",
                temporal_address, "--task-queue", queue, "--store", store, "--run-id", run_id,
            ]
        )  # fmt: skip
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        assert worker.stdout is not None
        worker.stdout.close()
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Done: 500.00 EUR moved from checking to savings." in out
    assert "moved 500.00 EUR from checking to savings" in out  # the approved transfer ran
    assert main(["runs", "show", run_id, "--store", store]) == 0
    shown = capsys.readouterr().out
    assert "completed" in shown and "payments" in shown


def test_a_worker_without_a_store_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["worker", str(CHART), "--temporal", "127.0.0.1:1", "--store", "none"])
    assert code == 2
    assert "needs a run store" in capsys.readouterr().err
