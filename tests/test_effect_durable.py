"""A chart's effects in a run store: recorded before they start and when they return; a run
resumed after a crash reuses a finished effect's result, runs an idempotent effect in flight
again with the same idempotency key, and fails closed on any other effect in flight.

The crashes are real: `tests/effect_driver.py` is killed with SIGKILL while its effect runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from helikon import (
    AGENT_LOOP,
    Agent,
    EffectContext,
    ScriptedModel,
    compile_chart,
    effect,
    extend,
    to,
)
from helikon.durable import RunStore, SqliteRunStore, StoreError

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "effect_driver.py"


def driver(store: Path, log: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(DRIVER), str(store), "r1", str(log), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE.parent,
    )


def killed_in_effect(store: Path, log: Path, *flags: str) -> None:
    """Start the run and kill its driver with SIGKILL while the effect is in flight."""
    process = driver(store, log, "--fresh", "--block", *flags)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip() == "in effect", process.communicate()[1]
    os.kill(process.pid, signal.SIGKILL)
    process.communicate()


def resumed(store: Path, log: Path, *flags: str) -> dict[str, Any]:
    out, err = driver(store, log, *flags).communicate(timeout=120)
    assert out, err
    found: dict[str, Any] = json.loads(out.splitlines()[-1])
    return found


def test_a_non_idempotent_effect_in_flight_at_a_crash_is_not_run_again(tmp_path: Path) -> None:
    store, log = tmp_path / "runs.db", tmp_path / "lookup.log"
    killed_in_effect(store, log)
    stored = SqliteRunStore(store)
    try:
        (call,) = stored.get("r1").calls  # recorded before it started
        assert (call.call_id, call.tool, call.result) == ("effect:lookup", "lookup", None)
    finally:
        stored.close()
    ended = resumed(store, log)
    assert ended["last"] == "run_failed"
    assert ended["error"]["kind"] == "effect_failed"
    assert ended["error"]["interrupted"] is True
    assert ended["error"]["message"].startswith("interrupted: the run stopped while this effect")
    assert log.read_text().splitlines() == ["r1:1:lookup"]


def test_an_idempotent_effect_in_flight_runs_again_with_the_same_key(tmp_path: Path) -> None:
    store, log = tmp_path / "runs.db", tmp_path / "lookup.log"
    killed_in_effect(store, log, "--idempotent")
    ended = resumed(store, log, "--idempotent")
    assert ended == {"last": "run_completed", "error": None}
    assert log.read_text().splitlines() == ["r1:1:lookup", "r1:1:lookup"]
    stored = SqliteRunStore(store)
    try:
        (call,) = stored.get("r1").calls
        assert call.result is not None and json.loads(call.result.content) == {
            "passages": ["found"]
        }
    finally:
        stored.close()


def test_an_effect_that_finished_before_a_crash_is_not_run_again(tmp_path: Path) -> None:
    store, log = tmp_path / "runs.db", tmp_path / "lookup.log"
    process = driver(store, log, "--fresh", "--block-model")
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip() == "in model", process.communicate()[1]
    os.kill(process.pid, signal.SIGKILL)  # the effect finished; the model call is in flight
    process.communicate()
    assert resumed(store, log) == {"last": "run_completed", "error": None}
    assert log.read_text().splitlines() == ["r1:1:lookup"]


class FailsToAppend:
    """A run store whose `append` of step `seq` fails, as a full disk would: the run stops
    there, its effect finished and recorded, its next step never written."""

    def __init__(self, store: RunStore, seq: int) -> None:
        self.store = store
        self.seq = seq

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def append(self, run_id: str, lease: Any, record: Any, *args: Any) -> str:
        if record.seq == self.seq:
            raise StoreError("disk full")
        head: str = await self.store.append(run_id, lease, record, *args)
        return head


async def test_a_finished_effect_is_not_run_again_on_resume(store: RunStore) -> None:
    """On every backend: the effect's result was stored, the step after it was not."""
    runs: list[str] = []

    async def lookup(context: EffectContext) -> JsonValue:
        runs.append(context.idempotency_key)
        return {"passages": ["found"]}

    table = compile_chart(
        extend(AGENT_LOOP, "Lookup")
        .phase("Retrieving", effect="lookup")
        .retarget(
            "CallingModel",
            "start",
            "start_turn -> CallingModel",
            to="Retrieving",
            on="enter_effect",
        )
        .rows("Retrieving", "effect_result", to("CallingModel", on="keep_effect_result"))
        .build()
    )

    def looker() -> Agent:
        return Agent("looker", ScriptedModel(["answered"]), chart=table, effects=[effect(lookup)])

    broken: Any = FailsToAppend(store, seq=2)
    events = [event async for event in looker().run("look", store=broken, run_id="r1")]
    assert events[-1].type == "run_failed" and events[-1].error.kind == "store_failed"
    (call,) = store.get("r1").calls
    assert call.result is not None  # the effect finished and was recorded
    assert store.get("r1").records[-1].state_after.phase == "Retrieving"
    result = await looker().resume("r1", store=store, force=True).collect()
    assert result.final_output == "answered"
    assert runs == ["r1:1:lookup"]
    inputs = [record.input for record in store.get("r1").records]
    assert inputs[1].kind == "effect_result" and inputs[1].output == {"passages": ["found"]}
