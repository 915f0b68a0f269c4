"""Breakpoints: what stops a debugger's `continue_()` (`Breakpoint`, of a `BreakKind`), why it
stopped (`Stop`), and `Breakpoints`, the part of `Debugger` that sets, deletes and lends them
(a nested run's debugger takes the ones its chart has)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from helikon.debug.steps import DebuggerError, Step
from helikon.run.driver import Run
from helikon.trace import TransitionTrace

__all__ = ["BreakKind", "Breakpoint", "Breakpoints", "Stop"]

BreakKind = Literal["phase", "event", "tool", "guard", "predicate"]


@dataclass
class Breakpoint:
    """Stops `continue_()` after a step that matches; `id` is what `delete` takes."""

    id: int
    kind: BreakKind
    value: Any
    enabled: bool = True

    def hit(self, step: Step, next_input: Any) -> bool:
        if not self.enabled:
            return False
        if self.kind == "phase":
            return bool(step.state_after.phase == self.value)
        if self.kind == "event":
            return any(event.type == self.value for event in step.events)
        if self.kind == "tool":
            return any(_tool_name(event) == self.value for event in step.events)
        if self.kind == "guard":
            return (self.value, True) in step.match.checked
        return bool(self.value(step.state_after, next_input))

    def hit_nested(self, line: TransitionTrace) -> bool:
        """Whether a nested run's transition matches (phases and guards: events and tools
        are matched on the step, which streams the nested runs' events)."""
        if not self.enabled:
            return False
        if self.kind == "phase":
            return bool(line.state_after.phase == self.value)
        return self.kind == "guard" and (self.value, True) in line.row.checked

    def describe(self) -> str:
        shown = self.value
        if self.kind == "predicate":
            shown = getattr(self.value, "__name__", "predicate")
        return f"#{self.id} {self.kind} {shown}" + ("" if self.enabled else " (disabled)")


def _tool_name(event: Any) -> str | None:
    if event.type == "tool_call_item":
        return str(event.item.name)
    return None


@dataclass(frozen=True)
class Stop:
    """Why `continue_()` or `next_turn()` stopped."""

    reason: Literal["breakpoint", "end", "suspended", "diverged", "turn"]
    step: Step | None = None
    breakpoint: Breakpoint | None = None
    nested: str | None = None
    """The nested run whose transition hit the breakpoint (`step_in` opens it)."""


class Breakpoints:
    """The breakpoints of a `Debugger` (which provides the fields below)."""

    run: Run
    breakpoints: list[Breakpoint]
    _ids: itertools.count[int]

    def break_on(self, kind: BreakKind, value: Any) -> Breakpoint:
        """Stop after a step that enters phase `value` / emits event type `value` / calls
        tool `value` / finds guard `value` true / makes `value(state, next_input)` true."""
        if kind == "phase" and value not in {p.name for p in self.run.ctx.table.phases}:
            known = ", ".join(p.name for p in self.run.ctx.table.phases)
            raise DebuggerError(f"no phase {value!r} in this chart; phases: {known}")
        if kind == "guard" and value not in self.run.ctx.table.guard_docs:
            known = ", ".join(self.run.ctx.table.guard_docs)
            raise DebuggerError(f"no guard {value!r} in this chart; guards: {known}")
        breakpoint = Breakpoint(next(self._ids), kind, value)
        self.breakpoints.append(breakpoint)
        return breakpoint

    def break_when(self, predicate: Callable[[Any, Any], bool]) -> Breakpoint:
        return self.break_on("predicate", predicate)

    def delete(self, breakpoint_id: int) -> None:
        before = len(self.breakpoints)
        self.breakpoints = [b for b in self.breakpoints if b.id != breakpoint_id]
        if len(self.breakpoints) == before:
            raise DebuggerError(f"no breakpoint #{breakpoint_id}")

    def _lend_breakpoints(self, nested: Breakpoints) -> None:
        for breakpoint in self.breakpoints:
            try:
                added = nested.break_on(breakpoint.kind, breakpoint.value)
            except DebuggerError:  # a phase or guard the nested run's chart lacks
                continue
            added.enabled = breakpoint.enabled
