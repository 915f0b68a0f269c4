"""`LoopThread`: the debugger prompt's event loop, running on a thread of its own.

Theory of operation: the prompt reads commands on the main thread and runs each command's
coroutine on this loop, waiting for it. Between commands the loop goes on running, so what a
command left in flight runs on while the user reads and types: the sibling calls of a tool
batch whose agent-as-tool call is stepped into live (`Debugger.step_in_live`). One loop for
the whole session keeps a model client made on the first step usable on the last.

^C while a command runs cancels its coroutine, waits until it has stopped, and raises
`KeyboardInterrupt` in the prompt; a `KeyboardInterrupt` the coroutine raised itself is
raised there too, and never stops the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

__all__ = ["LoopThread"]


class _Interrupted:
    """A `KeyboardInterrupt` (or `SystemExit`) a command raised, carried to the prompt."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class LoopThread:
    """An event loop on a daemon thread; `run` a coroutine there and wait for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="helikon-debug-loop", daemon=True)
        self._thread.start()
        self._closed = False

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)  # the thread's loop, for code that asks for it
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run `coroutine` on the loop and return what it returns (or raise what it raises)."""
        done = threading.Event()
        tasks: list[asyncio.Task[Any]] = []

        def start() -> None:
            task = self.loop.create_task(_carried(coroutine))
            task.add_done_callback(lambda _: done.set())
            tasks.append(task)

        def stop() -> None:  # after `start`, if that was scheduled: the loop keeps order
            if tasks:
                tasks[0].cancel()
            else:  # ^C came before the command was even scheduled
                done.set()

        try:  # ^C may come as soon as the command is scheduled, before the wait begins
            self.loop.call_soon_threadsafe(start)
            done.wait()
        except KeyboardInterrupt:  # ^C: stop the command, and wait until it has stopped
            self.loop.call_soon_threadsafe(stop)
            done.wait()
            if not tasks:
                coroutine.close()
            raise
        (task,) = tasks
        if task.cancelled():
            coroutine.close()  # cancelled before it began: it never ran, and never will
            raise KeyboardInterrupt
        result = task.result()
        if isinstance(result, _Interrupted):
            raise result.error
        return result

    def close(self) -> None:
        """Cancel what is still running on the loop, then stop and close it."""
        if self._closed:
            return
        self._closed = True
        self.run(_shut_down(self.loop))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def _carried(coroutine: Coroutine[Any, Any, Any]) -> Any:
    try:
        return await coroutine
    except (KeyboardInterrupt, SystemExit) as exc:  # raised in the loop it would stop it
        return _Interrupted(exc)


async def _shut_down(loop: asyncio.AbstractEventLoop) -> None:
    """What `asyncio.Runner.close` does before it closes its loop."""
    current = asyncio.current_task()
    left = [task for task in asyncio.all_tasks(loop) if task is not current]
    for task in left:
        task.cancel()
    await asyncio.gather(*left, return_exceptions=True)
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()
