"""Stepping a nested run while it runs: `StepGate`, the hook a debugger holds runs with.

Theory of operation: a run's `stepper` (None unless a debugger set one; nested runs take
their parent's) is one of its in-process listeners (`helikon.run.listening`), told first when
the run ended; it is asked before each transition whether it holds the run (`holds`), and
when it does, the driver awaits `before(run)` first: the gate keeps the run there, between
two transitions, until it is released for one transition (`release`) or let go for good
(`let_go`). A held run is only waiting: its parent's other work (the sibling calls of a
tool batch) runs on. Nothing of the run changes for being held, so it records what it would
have recorded unheld; the pure core never sees the gate.

A held run waits inside `Run.stoppable`, so `cancel()` and the deadline end the wait as they
end any effect; cancelling the task that drives it ends it too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["StepGate", "Stepper"]


class Stepper(Protocol):
    """What the driver asks about its nested runs (`StepGate` is one)."""

    def holds(self, run_id: str) -> bool: ...
    async def before(self, run: Any) -> None: ...
    def ended(self, run: Any) -> None: ...


@dataclass
class _Hold:
    """One run the gate holds: the run once it first reached a transition, the future a
    held run waits on, and whether it ended or was let go."""

    run: Any = None
    waiting: asyncio.Future[None] | None = None
    ended: bool = False
    free: bool = False


class StepGate:
    """Holds chosen runs (by run id) before each of their transitions until released."""

    def __init__(self) -> None:
        self._holds: dict[str, _Hold] = {}
        self._changed: asyncio.Future[None] | None = None

    # ------------------------------------------------------------ the driver's side

    def holds(self, run_id: str) -> bool:
        hold = self._holds.get(run_id)
        return hold is not None and not hold.free

    async def before(self, run: Any) -> None:
        """Wait, before `run`'s next transition, until the gate releases it."""
        hold = self._holds.get(run.run_id)
        if hold is None or hold.free:
            return
        hold.run = run
        hold.waiting = asyncio.get_running_loop().create_future()
        self._notify()
        try:
            await hold.waiting
        finally:
            hold.waiting = None

    def ended(self, run: Any) -> None:
        """`run` ended or suspended: it holds no more."""
        hold = self._holds.get(run.run_id)
        if hold is not None:
            hold.run, hold.ended = run, True
            self._notify()

    # ------------------------------------------------------------ the debugger's side

    def hold(self, run_id: str) -> None:
        """Hold run `run_id` before each of its transitions, from its first on."""
        self._holds.setdefault(run_id, _Hold())

    def held(self, run_id: str) -> Any:
        """The run `run_id` when it is held before a transition now, else None."""
        hold = self._holds.get(run_id)
        if hold is None or hold.waiting is None or hold.waiting.done():
            return None
        return hold.run

    def has_ended(self, run_id: str) -> bool:
        hold = self._holds.get(run_id)
        return hold is not None and hold.ended

    def release(self, run_id: str) -> None:
        """Let held run `run_id` take one transition (nothing when it is not held)."""
        hold = self._holds.get(run_id)
        if hold is not None and hold.waiting is not None and not hold.waiting.done():
            hold.waiting.set_result(None)

    def let_go(self, outer: str) -> None:
        """Stop holding every run nested in run `outer`; they run on freely."""
        for run_id, hold in self._holds.items():
            if run_id.startswith(outer + "/"):
                hold.free = True
                self.release(run_id)

    async def wait(self, ready: Callable[[], bool], task: asyncio.Future[Any]) -> None:
        """Wait until `ready()` holds (checked whenever a held run stops or ends) or
        `task` (what drives the held runs) is done."""
        while not ready() and not task.done():
            self._changed = asyncio.get_running_loop().create_future()
            await asyncio.wait({self._changed, task}, return_when=asyncio.FIRST_COMPLETED)

    def _notify(self) -> None:
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)
