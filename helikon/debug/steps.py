"""What a debugger keeps of a run between and across its steps: `Frame` (the run between two
steps), `Step` (one step as it happened), `Started` (a step begun, its action not yet performed),
and `DebuggerError`, the error of a request a debugger cannot carry out."""

from __future__ import annotations

import warnings
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
    next_action: NextAction | None

    @property
    def pending(self) -> NextAction | None:
        """Deprecated: `next_action` (the glossary's word; "pending" is an approval's)."""
        warnings.warn(
            "Frame.pending was renamed Frame.next_action", DeprecationWarning, stacklevel=2
        )
        return self.next_action


@dataclass(frozen=True)
class Step:
    """One step as it happened: the transition, the row it took, and the events of its action
    (`effect_events`, an older name: read "the action's events")."""

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
        """Everything the step streamed: the action that produced its input when that was
        performed at the step's start (`lead_events`), the transition's events, then its
        action's."""
        return (*self.lead_events, *self.outcome.events, *self.effect_events)

    @property
    def state_after(self) -> Any:
        return self.outcome.next_state


@dataclass(frozen=True)
class Started:
    """A step begun: its transition applied, its action not yet performed."""

    before: Any
    input: Any
    match: Match
    outcome: TransitionOutcome
    lead: tuple[Any, ...]
