"""ReplayModel answers a run's model calls from its trace: the replayed run is the same run."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from helikon import ModelError, ReplayModel, RunContext, ScriptedModel
from helikon.core import ModelCallFailed
from helikon.models.base import ModelInput
from helikon.run.driver import Run
from helikon.run.results import RunResultStreaming
from helikon.trace import TraceWriter, read_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "charts"))

import budget_assistant
import triage


async def record(module, model) -> tuple[str, list[object]]:  # type: ignore[no-untyped-def]
    buffer = io.StringIO()
    run = Run(
        module.agent(model),
        input=module.EXAMPLE_INPUT,
        context=RunContext(module.deps()),
        run_id="replayed",
        trace=TraceWriter(buffer),
    )
    stream = RunResultStreaming(run)
    async for _ in stream:
        pass
    return buffer.getvalue(), stream.events


@pytest.mark.parametrize("module", [budget_assistant, triage], ids=["tools", "handoff"])
async def test_a_replayed_run_writes_the_same_trace_and_events(module) -> None:  # type: ignore[no-untyped-def]
    original, events = await record(module, ScriptedModel(list(module.script())))
    replay = ReplayModel.from_trace(read_trace(original.splitlines()))

    again, replayed_events = await record(module, replay)

    assert again == original
    assert replayed_events == events
    assert len(replay.requests) == len(replay.calls) == len(module.script())


async def test_a_recorded_model_failure_is_raised_again() -> None:
    failing = ScriptedModel([])  # exhausted at once: the run fails with ModelCallFailed
    original, _ = await record(budget_assistant, failing)
    replay = ReplayModel.from_trace(read_trace(original.splitlines()))

    again, events = await record(budget_assistant, replay)

    assert again == original
    assert events[-1].type == "run_failed"
    assert isinstance(events[-1].error, ModelCallFailed)


async def test_asking_more_than_was_recorded_is_a_clear_model_error(tmp_path: Path) -> None:
    original, _ = await record(budget_assistant, ScriptedModel(list(budget_assistant.script())))
    path = tmp_path / "run.jsonl"
    path.write_text(original)
    replay = ReplayModel.from_trace(path)
    request = ModelInput("", ())
    for _ in replay.calls:
        [chunk async for chunk in replay.stream(request)]

    with pytest.raises(ModelError) as raised:
        [chunk async for chunk in replay.stream(request)]

    assert raised.value.error.reason == "exhausted"
    assert "recorded 2" in raised.value.error.message
