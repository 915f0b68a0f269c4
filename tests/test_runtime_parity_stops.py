"""Parity of the two runtimes when a run is stopped (tests/parity_support.py says how the
runs are compared): cancelled, or its timeout passing, while a batch of tools, a handoff, an
agent as a tool, a guardrail, the model or an effect is in flight.

Every wait here is on a file a tool, a guardrail, the model or an effect writes as it starts
(`wait_for_file`); what they wait on is released once both runs ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

pytest.importorskip("temporalio")

import parity_support
from parity_support import (
    WAIT,
    assert_same,
    assert_streams,
    drained,
    ended,
    new_queue,
    run_locally,
    run_on_temporal,
    wait_for_file,
)
from temporal_agents import slow_agent, slow_manager, slow_triage
from temporal_support import only_pending
from temporalio.client import Client

from helikon import (
    Agent,
    EffectContext,
    InputGuardrail,
    OutputGuardrail,
    RunConfig,
    ScriptedModel,
)
from helikon.core.events import AgentEvent
from helikon.durable import RunNotFound, SqliteRunStore
from helikon.models.base import ModelChunk, ModelInput
from helikon.run.chart_effects import Effect
from helikon.temporal import events, helikon_worker, outcome, start_run

# The fixtures every parity module takes, written once in parity_support.
client, run_id, stores = parity_support.client, parity_support.run_id, parity_support.stores


# ---------------------------------------------------------------- a batch of tools, a nested run


Slow = Callable[[Path], Agent]


def timed(make: Slow, timeout: float) -> Slow:
    """`make`'s agent with a run timeout."""
    return lambda marks: replace(make(marks), config=RunConfig(timeout=timeout))


async def finished_quick_call(store: SqliteRunStore, run_id: str) -> None:
    """Wait until the local run `run_id` has the quick call's result (its journal), so a
    stop finds the slow call alone in flight, as on Temporal (`only_pending`)."""
    for _ in range(int(WAIT / 0.05)):
        try:
            calls = store.get(run_id).calls
        except RunNotFound:
            calls = ()
        if any(call.call_id == "q1" and call.finished for call in calls):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the quick call of {run_id} did not finish")


CANCELLED = [
    pytest.param(slow_agent, "", id="tools"),
    pytest.param(slow_triage, "/2", id="handoff"),
    pytest.param(slow_manager, "/2:a1", id="agent-as-tool"),
]
"""Agents whose slow call never ends by itself: (the agent, the id of the run that makes
the call after the root's run id)."""


TIMED_OUT = [
    pytest.param(slow_agent, id="tools"),
    pytest.param(slow_triage, id="handoff"),
    pytest.param(slow_manager, id="agent-as-tool"),
]


@pytest.mark.parametrize("reason", ["cancelled", "the customer hung up"])
@pytest.mark.parametrize(("make", "where"), CANCELLED)
async def test_cancel(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    tmp_path: Path,
    make: Slow,
    where: str,
    reason: str,
) -> None:
    """Cancelled while the slow call runs and the quick one has finished (it keeps its
    result): `result.cancel(reason)`, and the workflow's cancel with that reason."""
    local, temporal = stores
    here, there = tmp_path / "local", tmp_path / "temporal"
    here.mkdir(), there.mkdir()
    result = make(here / "release").run("go", store=local, run_id=run_id)
    running = asyncio.ensure_future(drained(result))
    await wait_for_file(here, "start-b-")
    await finished_quick_call(local, run_id + where)
    result.cancel(reason)
    await asyncio.wait_for(asyncio.shield(running), WAIT)
    queue = new_queue()
    async with helikon_worker(client, queue, [make(there / "release")], temporal):
        agent = make(there / "release")
        handle = await start_run(client, agent, "go", task_queue=queue, run_id=run_id)
        await wait_for_file(there, "start-b-")
        await only_pending(client.get_workflow_handle(run_id + where), "2:s1")
        await handle.cancel(reason=reason)
        await asyncio.wait_for(outcome(handle), WAIT)
    assert ended(local, run_id) == "cancelled"
    assert_streams(await running, [e async for e in events(temporal, run_id)])
    assert_same(local, temporal)


@pytest.mark.parametrize("make", TIMED_OUT)
async def test_timeout(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    tmp_path: Path,
    make: Slow,
) -> None:
    """The run's timeout passes while its slow call runs (the quick one finished)."""
    local, temporal = stores
    here, there = tmp_path / "local", tmp_path / "temporal"
    here.mkdir(), there.mkdir()
    timeout = 2.0
    mine, theirs = await asyncio.gather(  # at once: the timeout is waited for once
        run_locally(lambda: timed(make, timeout)(here / "release"), "go", local, run_id),
        run_on_temporal(
            client, lambda: timed(make, timeout)(there / "release"), "go", temporal, run_id
        ),
    )
    assert ended(local, run_id) == "timed_out"
    assert_streams(mine, theirs)
    assert_same(local, temporal)


async def held_until_released(folder: Path) -> None:
    """Mark that the slow part started ("started" in `folder`), then wait for "release"."""
    (folder / "started").write_text("started")
    while not (folder / "release").exists():
        await asyncio.sleep(0.05)


@dataclass
class HeldModel:
    """`ScriptedModel(turns)` whose first call waits in `held_until_released`."""

    folder: Path
    turns: list[Any]

    async def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        if request.calls_before == 0:
            await held_until_released(self.folder)
        async for chunk in ScriptedModel(self.turns, skipped=request.calls_before).stream(request):
            yield chunk


Held = Callable[[Path, RunConfig], Agent]


def held_output_guardrail(folder: Path, config: RunConfig) -> Agent:
    async def check(output: Any, context: Any) -> bool:
        await held_until_released(folder)
        return False

    guardrail = OutputGuardrail("slow", check)
    return Agent(
        "checked", ScriptedModel(["All clear."]), output_guardrails=[guardrail], config=config
    )


def held_input_guardrail(folder: Path, config: RunConfig) -> Agent:
    async def check(text: str, context: Any) -> bool:
        await held_until_released(folder)
        return False

    guardrail = InputGuardrail("slow", check)
    return Agent(
        "checked", ScriptedModel(["All clear."]), input_guardrails=[guardrail], config=config
    )


def held_model(folder: Path, config: RunConfig) -> Agent:
    return Agent("waiting", HeldModel(folder, ["At last."]), config=config)  # type: ignore[arg-type]


def held_effect(folder: Path, config: RunConfig) -> Agent:
    from charts.retrieve_answer import agent, script

    async def retrieve(context: EffectContext) -> JsonValue:
        await held_until_released(folder)
        return {"passages": []}

    built = agent(ScriptedModel(script()))
    return replace(built, effects=[Effect("retrieve", retrieve)], config=config)


HELD = [
    pytest.param(held_input_guardrail, id="input-guardrail"),
    pytest.param(held_model, id="model-call"),
    pytest.param(held_output_guardrail, id="output-guardrail"),
    pytest.param(held_effect, id="effect"),
]
"""Agents whose run waits in one effect of the loop (an activity on Temporal)."""


@pytest.mark.parametrize(
    "stop",
    ["cancel", "timeout"],
)
@pytest.mark.parametrize("make", HELD)
async def test_a_stop_while_the_run_waits(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    tmp_path: Path,
    make: Held,
    stop: str,
) -> None:
    """The run waits on a guardrail, the model or an effect, and is cancelled, or its
    timeout passes; what it waited on is released once its run ended. The two runtimes run
    at once (a timeout is waited for once)."""
    local, temporal = stores
    here, there = tmp_path / "local", tmp_path / "temporal"
    here.mkdir(), there.mkdir()
    config = RunConfig(timeout=2.0 if stop == "timeout" else None)

    async def in_process() -> list[AgentEvent]:
        result = make(here, config).run("go", store=local, run_id=run_id)
        running = asyncio.ensure_future(drained(result))
        await wait_for_file(here, "started")
        if stop == "cancel":
            result.cancel("stop waiting")
        streamed = await asyncio.wait_for(running, WAIT)
        (here / "release").write_text("go")
        return streamed

    async def on_temporal() -> list[AgentEvent]:
        queue = new_queue()
        agent = make(there, config)
        async with helikon_worker(client, queue, [make(there, config)], temporal):
            handle = await start_run(client, agent, "go", task_queue=queue, run_id=run_id)
            await wait_for_file(there, "started")
            if stop == "cancel":
                await handle.cancel(reason="stop waiting")
            await asyncio.wait_for(outcome(handle), WAIT)
            (there / "release").write_text("go")
        return [e async for e in events(temporal, run_id)]

    mine, theirs = await asyncio.gather(in_process(), on_temporal())
    assert ended(local, run_id) == ("cancelled" if stop == "cancel" else "timed_out")
    assert_streams(mine, theirs)
    assert_same(local, temporal)
