"""What the planner finds: `ChartPath`s of `PathStep`s, gathered in a `Plan`.

A path is a setup and its steps; each step is a target and the input that selects it. A
step the driver cannot deliver carries why (`blocked`), and so does a path whose steps the
driver could each deliver but not together (`approval_mode`); such a path is checked over
`transition` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from helikon.charttest.setup import Setup
from helikon.charttest.targets import Target
from helikon.core.state import ApprovalDecisions, NeedsApproval
from helikon.core.table import TransitionTable

ApprovalMode = Literal["handler", "resume"]


@dataclass(frozen=True, slots=True)
class PathStep:
    """One step: its target and the input that selects it; `blocked` says why the driver
    cannot deliver that input (None when it can)."""

    target: Target
    input: Any
    blocked: str | None = None


@dataclass(frozen=True, slots=True)
class ChartPath:
    """A path to `target` (its last step's), under `setup`.

    `blocked` is why the driver cannot run the path, when it cannot: the first blocked
    step's reason, or a reason of the whole path's.
    """

    target: Target
    setup: Setup
    steps: tuple[PathStep, ...]
    reason: str | None = None

    @property
    def targets(self) -> tuple[Target, ...]:
        return tuple(step.target for step in self.steps)

    @property
    def blocked(self) -> str | None:
        for step in self.steps:
            if step.blocked is not None:
                return step.blocked
        return self.reason

    @property
    def via(self) -> str:
        """How the path is run: through the driver, or over `transition` only."""
        return "transition" if self.blocked is not None else "driver"

    def checked_over_transition(self, reason: str) -> ChartPath:
        return self if self.blocked is not None else replace(self, reason=reason)


@dataclass(frozen=True, slots=True)
class Unwitnessed:
    """A target needing guard `guard` to be `value`, which no witness builds."""

    target: Target
    guard: str
    value: bool


@dataclass(frozen=True)
class Plan:
    """Every path the planner found for one subject, and what it could not find.

    Args:
        subject: the subject's name.
        table: its compiled chart.
        base: the setup of the agent as written.
        paths: one path per target reached, in row order.
        unwitnessed: targets needing a guard outcome no witness builds.
        unreached: targets with witnesses that no path reached.
        contradictory: targets needing a guard both true and false.
        samples: one reached state per phase, for the implicit rows' table tests.
    """

    subject: str
    table: TransitionTable
    base: Setup
    paths: tuple[ChartPath, ...]
    unwitnessed: tuple[Unwitnessed, ...] = ()
    unreached: tuple[Target, ...] = ()
    contradictory: tuple[Target, ...] = ()
    samples: tuple[Any, ...] = ()


def approval_mode(path: ChartPath, states: Sequence[Any]) -> tuple[ApprovalMode, str | None]:
    """How the driver decides the path's approvals, and why it cannot (None when it can).

    A path that decides every pending call at once answers through an approval handler; one
    that leaves some pending resumes the suspended run with the decisions made so far, and
    so cannot also stop the run (cancel, fail) while it waits.
    """
    partial = stops = False
    for step, state in zip(path.steps, states, strict=False):
        if not isinstance(state, NeedsApproval):
            continue
        inp = step.input
        if isinstance(inp, ApprovalDecisions):
            partial |= not all(any(d.answers(r) for d in inp.decisions) for r in state.pending)
        elif inp.kind in ("cancel", "fail"):
            stops = True
    if partial and stops:
        reason = (
            "a path that leaves approvals pending resumes from snapshots, so it cannot also "
            "stop the run while it waits"
        )
        return "resume", reason
    return ("resume" if partial else "handler"), None
