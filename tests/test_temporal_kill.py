"""A worker killed with SIGKILL in the middle of a tool call: another worker finishes the
run; a call that had finished (its completion recorded in the history) is not run again,
and the one in flight runs again only if its tool may (`read_only` / `idempotent`), else it
becomes an "interrupted" result. (A call whose tool returned but whose completion the dead
worker had not reported yet is in flight as far as anyone can know: it counts as such.)"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from temporal_agents import slow_agent
from temporal_support import only_pending
from temporalio.client import Client

from helikon.durable import SqliteRunStore
from helikon.run.effects import INTERRUPTED
from helikon.temporal import outcome, start_run

ROOT = Path(__file__).resolve().parent.parent
WAIT = 90.0


class WorkerProcess:
    """`tests/temporal_agents.py` serving the slow agent, in a process of its own."""

    def __init__(self, address: str, queue: str, store: str, marks: Path, read_only: bool):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
        self.process = subprocess.Popen(
            [
                sys.executable, str(ROOT / "tests" / "temporal_agents.py"),
                address, queue, store, str(marks), "1" if read_only else "0",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.strip() == "ready", f"the worker did not start: {line!r}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()


async def wait_for(folder: Path, pattern: str) -> None:
    for _ in range(int(WAIT / 0.05)):
        if list(folder.glob(pattern)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {pattern} in {folder}")


@pytest.mark.parametrize("read_only", [True, False], ids=["rerunnable", "runs-once"])
async def test_a_killed_worker_is_replaced_and_finished_calls_run_once(
    temporal_address: str, tmp_path: Path, read_only: bool
) -> None:
    store_url = f"sqlite:///{tmp_path / 'runs.db'}"
    marks = tmp_path / "release"
    queue, run_id = f"q-{uuid.uuid4().hex[:8]}", f"r-{uuid.uuid4().hex[:12]}"
    client = await Client.connect(temporal_address)
    first = WorkerProcess(temporal_address, queue, store_url, marks, read_only)
    try:
        agent = slow_agent(marks, read_only=read_only)
        handle = await start_run(client, agent, "go", task_queue=queue, run_id=run_id)
        await wait_for(tmp_path, f"start-b-{first.process.pid}")
        await only_pending(handle, "2:s1")  # the quick call's completion is recorded
    finally:
        first.kill()
    second = WorkerProcess(temporal_address, queue, store_url, marks, read_only)
    try:
        marks.write_text("go")
        ended = await asyncio.wait_for(outcome(handle), WAIT)
    finally:
        second.kill()
    assert ended.state.phase == "Done"
    assert len(list(tmp_path.glob("quick-a-*"))) == 1  # finished before the kill: run once
    starts = sorted(p.name for p in tmp_path.glob("start-b-*"))
    ends = sorted(p.name for p in tmp_path.glob("end-b-*"))
    with SqliteRunStore(tmp_path / "runs.db") as store:
        results = {
            e.item.call_id: e.item.content
            for e in store.events(run_id)
            if e.type == "tool_output_item"
        }
    if read_only:
        assert starts == sorted([f"start-b-{first.process.pid}", f"start-b-{second.process.pid}"])
        assert ends == [f"end-b-{second.process.pid}"]
        assert results == {"q1": "a quick", "s1": "b done"}
    else:
        assert starts == [f"start-b-{first.process.pid}"] and ends == []
        assert results == {"q1": "a quick", "s1": INTERRUPTED}
