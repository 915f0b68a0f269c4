"""`ReplayModel`: answers each model call with the response a recorded run received.

Built from a trace (`helikon.trace`), it replays the trace's model calls in order, across
nested runs (handoff targets, agents as tools) as they happened: a recorded response is
streamed again, split into deltas the way `ScriptedModel` splits a turn, and a recorded model
failure is raised again as the same `ModelError`. No network, no model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helikon.core.errors import ModelCallFailed, ModelError
from helikon.models.base import ModelChunk, ModelInput
from helikon.models.scripted import ScriptedTurn, chunks_of
from helikon.trace import Trace, TransitionTrace, read_trace


@dataclass(frozen=True)
class RecordedCall:
    """One recorded model call: the response it got, or the failure it raised."""

    run_id: str
    seq: int
    response: Any = None
    failure: ModelCallFailed | None = None


def recorded_calls(trace: Trace) -> list[RecordedCall]:
    """The trace's model calls in the order they happened."""
    calls: list[RecordedCall] = []
    for line in trace.lines:
        if not isinstance(line, TransitionTrace):
            continue
        inp = line.input
        if inp.kind == "model_response":
            calls.append(RecordedCall(line.run_id, line.seq, response=inp))
        elif inp.kind == "fail" and isinstance(inp.error, ModelCallFailed):
            calls.append(RecordedCall(line.run_id, line.seq, failure=inp.error))
    return calls


@dataclass
class ReplayModel:
    """Replays a recorded run's model calls; `ReplayModel.from_trace(path_or_trace)`."""

    calls: list[RecordedCall]
    requests: list[ModelInput] = field(default_factory=list)

    @classmethod
    def from_trace(cls, trace: Trace | str | Path) -> ReplayModel:
        """The model that replays `trace` (a `Trace`, or the path of a trace file)."""
        loaded = trace if isinstance(trace, Trace) else read_trace(trace)
        return cls(recorded_calls(loaded))

    async def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        position = len(self.requests)
        self.requests.append(request)
        if position >= len(self.calls):
            raise ModelError(
                ModelCallFailed(
                    "exhausted",
                    f"ReplayModel has no recorded call {position + 1}: the trace recorded "
                    f"{len(self.calls)}",
                )
            )
        call = self.calls[position]
        if call.failure is not None:
            raise ModelError(call.failure)
        response = call.response
        turn = ScriptedTurn(response.items, response.usage, response.finish_reason)
        for chunk in chunks_of(turn):
            yield chunk
