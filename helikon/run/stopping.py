"""Stopping a run: `cancel()`, the deadline (`expire_after`), and `stoppable`, the wait every
effect of the run goes through. `Stoppable` holds them; `Run` (helikon.run.driver) is one.

Theory of operation: a stop (`Cancel`, or `Fail(TimedOut)` from the deadline) is kept as the
run's `_stop`, passed down at once to the nested runs in flight (`_in_flight`: the handoff
target and the agents run as tools, while `nesting` them: helikon.run.effects,
helikon.run.subagent), and cancels the task waiting in `stoppable` (`_waiting`), which raises
`Stopped` instead of `CancelledError`. A nested run so ends through its chart, its end
stored, before its parent's effect is cut short.
What a stop then does to the effect in flight and to the next input is the loop's rule
(`helikon.run.loop`: `Stopped`, `stop_wins`), not this module's; the chart decides what a
stopped run looks like.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator
from typing import TYPE_CHECKING, Any

from helikon.core.errors import TimedOut
from helikon.core.state import Cancel, Fail
from helikon.run.listening import Listeners
from helikon.run.loop import Stopped

__all__ = ["Stoppable"]


class Stoppable:
    """The part of `Run` that stops it (see the module docstring); `Run` provides the rest."""

    _stop: Any
    _in_flight: list[Any]
    _waiting: asyncio.Task[Any] | None
    _deadline: asyncio.TimerHandle | None
    listeners: Listeners | None

    if TYPE_CHECKING:

        @property
        def finished(self) -> bool: ...

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the run: the effect in flight is cancelled and the run fails with Cancelled."""
        self.halt(Cancel(reason))

    def expire_after(self, seconds: float) -> None:
        """Fail the run with TimedOut if it has not ended after `seconds`."""
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(seconds, self.halt, Fail(TimedOut(seconds)))

    def halt(self, stop: Cancel | Fail) -> None:
        """Stop the run with `stop` as its input: `cancel()`, the deadline, a lost lease, or
        the stop of the run it is nested in. A run that ended or was stopped before keeps
        its first stop."""
        if self.finished or self._stop is not None:
            return
        self._stop = stop
        for nested in tuple(self._in_flight):
            nested.halt(stop)
        if self._waiting is not None:
            self._waiting.cancel()

    @contextlib.contextmanager
    def nesting(self, run: Stoppable) -> Iterator[None]:
        """While in the block, `run` (a handoff target, an agent run as a tool of this run)
        takes this run's stop the moment it is made."""
        self._in_flight.append(run)
        try:
            yield
        finally:
            self._in_flight.remove(run)

    def close(self) -> None:
        """Cancel the run's deadline timer, if any, and end its span (the stream does this
        when it ends)."""
        if self.listeners is not None:
            self.listeners.closed()
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    async def stoppable(self, awaitable: Awaitable[Any]) -> Any:
        """Await an effect so that `cancel()` and the deadline can stop it."""
        if self._stop is not None:
            close = getattr(awaitable, "close", None)
            if close is not None:
                close()  # never started: close it rather than leave it unawaited
            raise Stopped
        task = asyncio.current_task()
        self._waiting = task
        try:
            return await awaitable
        except asyncio.CancelledError:
            if self._stop is None or task is None:
                raise
            task.uncancel()
            raise Stopped from None
        finally:
            self._waiting = None
