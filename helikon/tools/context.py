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
    """

    run_id: str
    call_id: str
    agent: str
    deps: DepsT

    @property
    def idempotency_key(self) -> str:
        """`run_id:call_id`: stable across a resumed run, so a tool can deduplicate effects."""
        return f"{self.run_id}:{self.call_id}"

    @staticmethod
    def factory(
        run_id: str, agent: str, deps: Any = None
    ) -> Callable[[ToolCall], ToolContext[Any]]:
        """A `context_factory` for `execute_batch`: one context per call of a run."""

        def for_call(call: ToolCall) -> ToolContext[Any]:
            return ToolContext(run_id, call.call_id, agent, deps)

        return for_call
