"""`Connection`: one MCP client session, held open by a task of its own.

The SDK's `Client` is an anyio context: its task group and cancel scopes must be entered and
left in the same task. The tool calls come from a run's tasks, a group of servers connects
in parallel, and the code that closes a server may run in yet another task, so none of them
can own the client. Each connection has a task that enters the client, reports it ready,
waits until it is told to close, and leaves it. The SDK's teardown (ending a subprocess,
closing HTTP sessions), and a transport that crashes, happen in that task and never reach
a run's. What ended the connection is kept (`ended`) for the errors that follow it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

logger = logging.getLogger("helikon.mcp")

# After its close timeout, a connection's task is cancelled and given this long to unwind.
_UNWIND = 5.0


class Connection:
    """Opens and holds `open_client()`'s client in a task of its own.

    Args:
        open_client: makes the (not yet entered) client context.
        label: names the task.
    """

    def __init__(
        self, open_client: Callable[[], AbstractAsyncContextManager[Any]], label: str
    ) -> None:
        self._open_client = open_client
        self._label = label
        self._task: asyncio.Task[None] | None = None
        self._client: Any = None
        self._closing = asyncio.Event()
        self.ended: BaseException | None = None

    @property
    def client(self) -> Any:
        """The entered client while the connection is open; None before and after."""
        return self._client

    @property
    def open(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self, timeout: float | None) -> None:
        """Connect; return once the client is entered (the handshake is done).

        Raises:
            TimeoutError: not connected within `timeout` seconds (the attempt is abandoned).
            Exception: what connecting raised.
        """
        if self.open:
            return
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._closing = asyncio.Event()
        self.ended = None
        self._task = asyncio.create_task(self._hold(ready), name=f"helikon-mcp:{self._label}")
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(ready)
        except BaseException:
            await self.stop(0)
            if ready.done() and not ready.cancelled():
                ready.exception()  # retrieved: it is what is being raised, or superseded
            raise

    async def stop(self, timeout: float | None) -> None:
        """Leave the client in its task; past `timeout` seconds, cancel that task."""
        task = self._task
        if task is None:
            return
        self._closing.set()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=_UNWIND)
        self._task = None

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        try:
            async with self._open_client() as client:
                self._client = client
                if not ready.done():
                    ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:  # the task ends here: nobody else would see it
            self.ended = exc
            if not ready.done():
                if isinstance(exc, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(exc)
            else:
                logger.debug("MCP connection %s ended: %r", self._label, exc)
        finally:
            self._client = None
