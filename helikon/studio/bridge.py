"""The thread bridge between the studio's HTTP threads and a session's event loop.

Theory of operation: a session's debugger is touched only on its own event loop, which runs
on a daemon thread (`LoopThread`). Any other thread hands it a coroutine and blocks on the
result (`LoopThread.run`), so commands run one after another on the loop, however many
threads send them. What the session shows goes the other way through `Updates`: the loop
publishes each new snapshot, numbered, and any thread waits for one newer than the last it
saw (the event stream of each page). Closing runs a last coroutine on the loop (the session
abandons its run there), cancels every task still on it, stops the loop and joins the
thread, each wait bounded by `CLOSE_TIMEOUT`; a command sent after that is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from helikon.studio.errors import StudioError

T = TypeVar("T")

CLOSE_TIMEOUT = 5.0  # seconds


class Updates:
    """The latest snapshot, numbered from 1; threads wait here for a newer one."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._version = 0
        self._latest: dict[str, Any] = {}
        self.closed = False

    def publish(self, data: dict[str, Any]) -> dict[str, Any]:
        with self._changed:
            self._version += 1
            self._latest = {**data, "version": self._version}
            self._changed.notify_all()
            return self._latest

    def latest(self) -> dict[str, Any]:
        with self._changed:
            return self._latest

    @property
    def version(self) -> int:
        """The latest snapshot's version (0 before the first)."""
        with self._changed:
            return self._version

    def wait(self, after: int, timeout: float) -> dict[str, Any] | None:
        """The latest snapshot once its version is above `after`; None on timeout or close."""
        with self._changed:
            self._changed.wait_for(lambda: self.closed or self._version > after, timeout)
            if self.closed or self._version <= after:
                return None
            return self._latest

    def close(self) -> None:
        with self._changed:
            self.closed = True
            self._changed.notify_all()


class LoopThread:
    """An event loop on a daemon thread of its own, which any thread runs coroutines on.

    Args:
        name: the thread's name.
    """

    def __init__(self, name: str = "helikon-studio") -> None:
        self._loop = asyncio.new_event_loop()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, command: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run `command()` on the loop and wait for its result (or its exception).

        Raises:
            StudioError: the loop is closed.
        """
        if self._closed:
            raise StudioError("the studio is closed")
        return asyncio.run_coroutine_threadsafe(command(), self._loop).result()

    def close(self, last: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `last()` on the loop, cancel the tasks left, stop the loop; idempotent."""
        if self._closed:
            return
        self._closed = True
        stopping = asyncio.run_coroutine_threadsafe(self._finish(last), self._loop)
        with contextlib.suppress(Exception):
            stopping.result(CLOSE_TIMEOUT)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CLOSE_TIMEOUT)

    async def _finish(self, last: Callable[[], Coroutine[Any, Any, None]]) -> None:
        with contextlib.suppress(Exception):
            await last()
        current = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            # a store read of a followed run may be in flight: let it finish first
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()
