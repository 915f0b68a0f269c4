"""Shared pieces of the driver's end-to-end tests (tests/test_driver_*.py).

Nothing here sleeps for time: `settle()` only yields to the event loop so that every runnable
task gets its turn, and tools that must stay in flight wait on `asyncio.Event` gates.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from helikon import AgentEvent, RunCompleted, RunFailed, RunResultStreaming, RunSuspended
from helikon.models.base import ModelChunk, ModelInput

DELTAS = frozenset({"token_delta", "reasoning_delta", "tool_call_delta"})
TERMINALS = (RunCompleted, RunFailed, RunSuspended)


async def settle(rounds: int = 30) -> None:
    """Yield until every runnable task has had its turn (scheduling, not timing)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def types(events: Iterable[AgentEvent]) -> list[str]:
    """Event types in order, with runs of the same delta type collapsed into one."""
    collapsed: list[str] = []
    for event in events:
        if event.type in DELTAS and collapsed and collapsed[-1] == event.type:
            continue
        collapsed.append(event.type)
    return collapsed


def ends_once(events: Sequence[AgentEvent], kind: type) -> Any:
    """Assert the stream ends with exactly one terminal event, of `kind`; return it."""
    terminals = [event for event in events if isinstance(event, TERMINALS)]
    assert len(terminals) == 1, f"expected one terminal event, got {terminals}"
    assert events[-1] is terminals[0], "the terminal event must be the last one"
    assert isinstance(terminals[0], kind), terminals[0]
    return terminals[0]


async def drain(result: RunResultStreaming) -> list[AgentEvent]:
    """Every event of the stream, without raising for a failed run."""
    return [event async for event in result]


Step = ModelChunk | asyncio.Event | Callable[[], None]


@dataclass
class ChunkModel:
    """A model that streams hand-written chunks, one list per call.

    A chunk list may hold an `asyncio.Event` (the stream waits on it there) or a zero-argument
    callable (called there, e.g. to record that the stream reached that point), so a test
    controls exactly when each fragment arrives. `closed` counts streams whose generator
    finished or was closed; `requests` records every `ModelInput`.
    """

    turns: Sequence[Sequence[Step]]
    requests: list[ModelInput] = field(default_factory=list)
    closed: int = 0

    async def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        position = len(self.requests)
        self.requests.append(request)
        try:
            for step in self.turns[position]:
                if isinstance(step, asyncio.Event):
                    await step.wait()
                elif callable(step):
                    step()
                else:
                    yield step
        finally:
            self.closed += 1
