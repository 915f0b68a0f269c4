"""`helikon worker --temporal` in a process of its own and `helikon run --temporal`: the run
streams the events a local run prints, its approval is decided by update as `--approve`
says, and `helikon runs show` reads it from the store like a local run."""

from __future__ import annotations

import contextlib
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
    temporal_address: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker runs the scripted model and says so; the client calls no model, so it
    needs neither --offline nor a key."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
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
        assert ready.endswith("  (scripted model, --offline)\n"), ready
        code = main(
            [
                "run", str(CHART), "--approve", "all", "--temporal",
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
    argv = ["worker", str(CHART), "--temporal", "127.0.0.1:1", "--offline", "--store", "none"]
    code = main(argv)
    assert code == 2
    assert "needs a run store" in capsys.readouterr().err


REDACTING_CHART = """
from helikon import Agent, RunConfig


def agent(model):
    return Agent(name="hush", model=model, config=RunConfig(redact=lambda text: "[hidden]"))


def script():
    return ["never"]


EXAMPLE_INPUT = "my secret"
"""


@pytest.mark.parametrize("command", ["worker", "run"])
def test_a_chart_that_redacts_is_refused_on_temporal(
    temporal_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The Temporal runtime does not apply `RunConfig.redact`: the worker refuses to serve
    the chart and `run --temporal` to start it, with one line naming the agent; exit 2."""
    chart = tmp_path / "hush.py"
    chart.write_text(REDACTING_CHART)
    store = tmp_path / "runs.db"
    argv = [
        command, str(chart), "--offline", "--temporal", temporal_address,
        "--task-queue", f"q-{uuid.uuid4().hex[:8]}", "--store", f"sqlite:///{store}",
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "helikon: agent 'hush' sets RunConfig.redact, which the Temporal runtime does not apply"
    ), err
    assert err.count("\n") == 1


SLOW_CHART = '''
import asyncio
from pathlib import Path

from helikon import Agent, ToolCall, tool

RELEASE = Path({release!r})


@tool
async def slow() -> str:
    """Something slow: it waits for RELEASE to exist."""
    (RELEASE.parent / "started").write_text("yes")
    while not RELEASE.exists():
        await asyncio.sleep(0.05)
    return "done"


def agent(model):
    return Agent(name="slowcli", model=model, tools=[slow])


def script():
    return [[ToolCall("s1", "slow", "{{}}")], "Done."]


EXAMPLE_INPUT = "go"
'''


async def test_a_cancelled_workflow_streams_one_run_failed_to_the_cli(
    temporal_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`helikon run --temporal` on a run whose workflow is cancelled (it ends Canceled):
    the run's one terminal event, RunFailed(Cancelled), and exit code 1, as locally."""
    import asyncio

    from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError

    from helikon import ScriptedModel
    from helikon.cli.loading import load_module
    from helikon.durable import open_store
    from helikon.temporal import helikon_worker

    chart = tmp_path / "slow_chart.py"
    chart.write_text(SLOW_CHART.format(release=str(tmp_path / "release")))
    module = load_module(str(chart))
    store_url = f"sqlite:///{tmp_path / 'runs.db'}"
    queue, run_id = f"q-{uuid.uuid4().hex[:8]}", f"r-{uuid.uuid4().hex[:12]}"
    client = await Client.connect(temporal_address)
    store = open_store(store_url)
    try:
        async with helikon_worker(
            client, queue, [module.agent(ScriptedModel(module.script()))], store
        ):
            argv = [
                "run", str(chart), "--offline", "--temporal", temporal_address,
                "--task-queue", queue, "--store", store_url, "--run-id", run_id,
            ]  # fmt: skip
            cli = asyncio.ensure_future(asyncio.to_thread(main, argv))
            for _ in range(1200):
                if (tmp_path / "started").exists() or cli.done():
                    break
                await asyncio.sleep(0.05)
            handle = client.get_workflow_handle(run_id)
            await handle.cancel()
            code = await asyncio.wait_for(cli, 60)
            # the CLI ends with the run's last record; the workflow ends just after it
            with contextlib.suppress(WorkflowFailureError):
                await asyncio.wait_for(handle.result(), 60)
            status = (await handle.describe()).status
    finally:
        store.close()
    out = capsys.readouterr().out
    assert code == 1, out
    assert status == WorkflowExecutionStatus.CANCELED
    assert out.count("✗ failed") == 1, out
    assert "✗ failed: Cancelled(reason='cancelled')" in out
