"""What a debugger keeps of a run between and across its steps: `Frame` (the run between two
steps), `Step` (one step as it happened), `Started` (a step begun, its effect not yet done),
and `DebuggerError`, the error of a request a debugger cannot carry out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helikon.core.errors import HelikonError
from helikon.core.state import NextAction, TransitionOutcome
from helikon.core.transition import Match
from helikon.trace.times import StepTime

__all__ = ["DebuggerError", "Frame", "Started", "Step"]


class DebuggerError(HelikonError, ValueError):
    """A debugger request that cannot be carried out (the message says why)."""


@dataclass(frozen=True)
class Frame:
    """The run between two steps."""

    seq: int
    state: Any
    conversation_len: int
    next_input: Any
    pending: NextAction | None


@dataclass(frozen=True)
class Step:
    """One step as it happened: the transition, the row it took, and its effect's events."""

    seq: int
    state_before: Any
    input: Any
    match: Match
    outcome: TransitionOutcome
    effect_events: tuple[Any, ...] = ()
    divergence: str | None = None
    lead_events: tuple[Any, ...] = ()
    time: StepTime | None = None  # as recorded, for a replayed step; else as the run took it

    @property
    def events(self) -> tuple[Any, ...]:
        """Everything the step streamed: the effect that produced its input when that ran
        at the step's start (`lead_events`), the transition's events, then its effect's."""
        return (*self.lead_events, *self.outcome.events, *self.effect_events)

    @property
    def state_after(self) -> Any:
        return self.outcome.next_state


@dataclass(frozen=True)
class Started:
    """A step begun: its transition applied, its effect not yet done."""

    before: Any
    input: Any
    match: Match
    outcome: TransitionOutcome
    lead: tuple[Any, ...]
