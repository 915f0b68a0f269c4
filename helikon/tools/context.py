"""`ToolContext`: what a tool receives when one of its parameters asks for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from helikon.core.items import ToolCall

DepsT = TypeVar("DepsT")


@dataclass(frozen=True, slots=True)
class ToolContext(Generic[DepsT]):
    """The run-side facts a tool may read; injected into a parameter annotated `ToolContext`.

    Args:
        run_id: the run the call belongs to.
        call_id: the call's id, as the model wrote it.
        agent: the name of the agent whose model asked for the call.
        deps: the user's dependencies object passed to the run.
        seq: the run's step that entered the batch (its stored record's seq).
    """

    run_id: str
    call_id: str
    agent: str
    deps: DepsT
    seq: int = 0

    @property
    def idempotency_key(self) -> str:
        """`run_id:seq:call_id`: stable across a resumed run (the seq is the stored
        record's), and distinct when a model reuses call ids across turns, so a tool can
        deduplicate its effects by it."""
        return f"{self.run_id}:{self.seq}:{self.call_id}"

    @staticmethod
    def factory(
        run_id: str, agent: str, deps: Any = None
    ) -> Callable[[ToolCall], ToolContext[Any]]:
        """A `context_factory` for `execute_batch`: one context per call of a run."""

        def for_call(call: ToolCall) -> ToolContext[Any]:
            return ToolContext(run_id, call.call_id, agent, deps)

        return for_call
