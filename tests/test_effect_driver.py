"""A chart's effects through the real driver: the result comes back as an input and reaches
the model; an effect that raises, returns no JSON or is cancelled ends the run with one
terminal event; a trace of it replays in the debugger without running it again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from driver_support import drain, ends_once, settle
from pydantic import JsonValue

from helikon import (
    AGENT_LOOP,
    Agent,
    Cancelled,
    EffectContext,
    RunCompleted,
    RunFailed,
    ScriptedModel,
    SystemMessage,
    compile_chart,
    effect,
    extend,
    to,
)
from helikon.core import EffectFailed, EffectResult
from helikon.debug import Debugger
from helikon.trace import read_trace

TABLE = compile_chart(
    extend(AGENT_LOOP, "Lookup")
    .phase("Retrieving", effect="lookup")
    .retarget(
        "CallingModel", "start", "start_turn -> CallingModel", to="Retrieving", on="enter_effect"
    )
    .rows("Retrieving", "effect_result", to("CallingModel", on="keep_effect_result"))
    .build()
)


def lookup_agent(model: ScriptedModel, fn: Any, *, idempotent: bool = False) -> Agent:
    return Agent(
        "helpdesk", model, chart=TABLE, effects=[effect(name="lookup", idempotent=idempotent)(fn)]
    )


async def test_the_effects_result_is_the_next_input_and_reaches_the_model(tmp_path: Path) -> None:
    seen: list[EffectContext] = []

    async def lookup(context: EffectContext) -> JsonValue:
        seen.append(context)
        return {"passages": ["Laptops are replaced every 3 years."]}

    model = ScriptedModel(["Every 3 years."])
    trace = tmp_path / "run.jsonl"
    result = lookup_agent(model, lookup).run("When do I get a laptop?", run_id="r1", trace=trace)
    events = await drain(result)
    done = ends_once(events, RunCompleted)
    assert done.output.text == "Every 3 years."
    (context,) = seen
    assert (context.run_id, context.seq, context.effect) == ("r1", 1, "lookup")
    assert context.args == {"text": "When do I get a laptop?"}
    assert context.idempotency_key == "r1:1:lookup"
    (request,) = model.requests
    assert request.items[-1] == SystemMessage(
        'Result of lookup: {"passages": ["Laptops are replaced every 3 years."]}'
    )
    inputs = [line.input for line in read_trace(trace).transitions("r1")]
    assert inputs[1] == EffectResult(
        "lookup", {"passages": ["Laptops are replaced every 3 years."]}
    )


async def test_a_raising_effect_fails_the_run_naming_it() -> None:
    async def lookup(context: EffectContext) -> JsonValue:
        raise OSError("index offline")

    model = ScriptedModel(["never asked"])
    events = await drain(lookup_agent(model, lookup).run("hi"))
    failed = ends_once(events, RunFailed)
    assert failed.error == EffectFailed("lookup", "raised OSError: index offline")
    assert model.requests == []


@pytest.mark.parametrize(
    ("output", "why"),
    [
        ({"ok": {1: "a"}}, "key 1 is not text"),
        (float("nan"), "Out of range float values are not JSON compliant"),
        ({"when": object()}, "is not JSON serializable"),
    ],
)
async def test_an_effect_that_returns_no_json_fails_the_run(output: Any, why: str) -> None:
    async def lookup(context: EffectContext) -> Any:
        return output

    events = await drain(lookup_agent(ScriptedModel([]), lookup).run("hi"))
    failed = ends_once(events, RunFailed)
    assert failed.error.kind == "effect_failed"
    assert failed.error.message.startswith("returned a value that is not JSON")
    assert why in failed.error.message


async def test_an_effects_tuples_read_back_as_lists() -> None:
    async def lookup(context: EffectContext) -> Any:
        return {"pair": ("a", 1)}

    model = ScriptedModel(["ok"])
    await lookup_agent(model, lookup).run("hi").collect()
    assert model.requests[0].items[-1] == SystemMessage('Result of lookup: {"pair": ["a", 1]}')


async def test_cancel_stops_the_effect_in_flight() -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    async def lookup(context: EffectContext) -> JsonValue:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return None

    result = lookup_agent(ScriptedModel([]), lookup).run("hi")
    events: list[Any] = []

    async def consume() -> None:
        events.extend(await drain(result))

    task = asyncio.ensure_future(consume())
    await started.wait()
    result.cancel("user left")
    await task
    await settle()
    assert stopped.is_set(), "the effect was not cancelled"
    failed = ends_once(events, RunFailed)
    assert failed.error == Cancelled("user left")


def test_an_agent_must_register_the_effects_its_chart_runs() -> None:
    with pytest.raises(ValueError, match="phase Retrieving runs effect 'lookup'"):
        Agent("helpdesk", ScriptedModel([]), chart=TABLE)

    async def lookup(context: EffectContext) -> JsonValue:
        return None

    with pytest.raises(ValueError, match="two effects are named 'lookup'"):
        Agent("a", ScriptedModel([]), chart=TABLE, effects=[effect(lookup), effect(lookup)])
    with pytest.raises(ValueError, match="must be an identifier"):
        effect(name="not one")(lookup)


async def test_a_trace_replays_the_effect_without_running_it(tmp_path: Path) -> None:
    runs: list[str] = []

    async def lookup(context: EffectContext) -> JsonValue:
        runs.append(context.idempotency_key)
        return {"passages": []}

    trace = tmp_path / "run.jsonl"
    agent = lookup_agent(ScriptedModel(["No passage says."]), lookup)
    await agent.run("hi", run_id="r1", trace=trace).collect()
    assert runs == ["r1:1:lookup"]

    for replayed_on in (agent, None):  # with the agent: recomputed and checked
        debugger = Debugger.replay(read_trace(trace), replayed_on)
        first = await debugger.step()
        assert first is not None and first.state_after.phase == "Retrieving"
        assert debugger.next_input == EffectResult("lookup", {"passages": []})
        second = await debugger.step()
        assert second is not None and second.match.row.action == "keep_effect_result"
        assert second.divergence is None
        await debugger.continue_()
        assert debugger.finished
    assert runs == ["r1:1:lookup"]  # replaying ran nothing


async def test_the_debugger_steps_an_effect_live() -> None:
    async def lookup(context: EffectContext) -> JsonValue:
        return {"passages": ["p"]}

    debugger = Debugger.live(lookup_agent(ScriptedModel(["ok"]), lookup), "hi")
    await debugger.step()
    assert debugger.next_input == EffectResult("lookup", {"passages": ["p"]})
    await debugger.continue_()
    assert debugger.state.phase == "Done"
