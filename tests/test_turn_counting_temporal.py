"""The review cycle of issue 19, point 10, on Temporal (real dev server): the workflow steps
the same compiled table, so it stops after max_turns model calls as a local run does."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from test_temporal_limits import on_temporal
from test_turn_counting import REVIEW_TABLE

from helikon import Agent, MaxTurnsExceeded, RunConfig, ScriptedModel


def reviewed_writer() -> Agent:
    model = ScriptedModel(["an answer", "not yet"] * 10)
    return Agent("writer", model, chart=REVIEW_TABLE, config=RunConfig(max_turns=3))


async def test_a_review_cycle_stops_after_max_turns_model_calls_on_temporal(
    temporal_address: str, tmp_path: Path
) -> None:
    ended, stored, local = await on_temporal(
        temporal_address, tmp_path, reviewed_writer, "Write a haiku."
    )
    assert ended.state.error == MaxTurnsExceeded(3)  # type: ignore[union-attr]
    assert ended.usage.requests == 3
    assert stored == local
    assert [getattr(e, "turn", None) for e in stored if e.type == "turn_started"] == [0, 1, 2]
