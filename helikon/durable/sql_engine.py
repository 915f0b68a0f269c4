"""Where a SQL store's IO runs: never on its caller's event loop.

Theory of operation: every operation of a store (`helikon.durable.sql_store`) is a
coroutine handed to the store's engine, which runs it on a thread of the store's own; an
async caller awaits the answer (its loop goes on meanwhile), a sync caller waits for it.

- `WriterThread` (SQLite): one thread runs the operations one at a time, to the end. A
  SQLite statement never waits on a socket, so the coroutine of an operation never
  suspends: the thread runs it with one `send`, with no event loop of its own, and one
  operation's transaction is never interleaved with another's.
- `LoopThread` (PostgreSQL): an event loop in a thread, running psycopg's async engine.
  An async pool belongs to the loop it was opened in (psycopg/psycopg#737: used from a
  second `asyncio.run` it hangs), and a store outlives its callers' loops, so the pool
  lives on the store's loop.

Either refuses work once closed (`StoreError`) and work submitted from its own thread
(which would wait for itself forever).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from contextlib import suppress
from contextvars import Context
from queue import SimpleQueue
from typing import Any, Protocol, TypeVar

from helikon.durable.records import StoreError

T = TypeVar("T")
Work = Coroutine[Any, Any, Any]


class Engine(Protocol):
    def wait(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the engine's thread and wait for it (a sync caller)."""
        ...

    async def call(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the engine's thread; the caller's loop goes on meanwhile."""
        ...

    def stop(self) -> None: ...


class WriterThread:
    """One thread that runs a store's operations in turn (`stop` ends it, then `closed`
    runs on it: the connection is closed on the thread that used it). An async caller's
    answer comes back straight to its loop, with one `call_soon_threadsafe` that resumes
    the caller in that same pass of the loop (`Answer`; no `concurrent.futures` future
    between, and no closures made per operation: bench/thread_hop.py measures the hop
    against its floor, bench/durable_hop.py in a run)."""

    def __init__(self, name: str, where: str, closed: Callable[[], None]) -> None:
        self._where, self._closed = where, closed
        self._jobs: SimpleQueue[_Job | None] = SimpleQueue()
        self._open = True
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def wait(self, work: Coroutine[Any, Any, T]) -> T:
        _check(self._open, self._thread, work, self._where)
        future: Future[T] = Future()
        self._jobs.put((work, None, future))
        return future.result()

    async def call(self, work: Coroutine[Any, Any, T]) -> T:
        _check(self._open, self._thread, work, self._where)
        loop = asyncio.get_running_loop()
        answer: Answer[T] = Answer(loop=loop)
        self._jobs.put((work, loop, answer))
        return await answer

    def stop(self) -> None:
        """Let the operations submitted finish, then close and end the thread."""
        if self._open:
            self._open = False
            self._jobs.put(None)
            if threading.current_thread() is not self._thread:
                self._thread.join()

    def _serve(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                _run(*job)
        finally:
            self._closed()


_Job = tuple[Work, "asyncio.AbstractEventLoop | None", "Answer[Any] | Future[Any]"]
"""An operation, and where its answer goes: an async caller's `Answer` on its loop, or (no
loop) a sync caller's future."""


def _run(work: Work, loop: asyncio.AbstractEventLoop | None, future: Any) -> None:
    """Run `work` to its end on this thread (it must not suspend: it has no loop to), and
    answer its caller."""
    value: Any = None
    error: BaseException | None = None
    try:
        work.send(None)
    except StopIteration as done:
        value = done.value
    except BaseException as exc:  # the caller's, raised where it waits
        error = exc
    else:
        work.close()
        error = RuntimeError("a store operation waited on the writer thread")
    if loop is None:
        _settle(future, value, error)
    else:
        with suppress(RuntimeError):  # the caller's loop closed meanwhile
            loop.call_soon_threadsafe(future.answer, value, error)


def _settle(future: Any, value: Any, error: BaseException | None) -> bool:
    """Answer `future`; False if its caller has stopped waiting (it was cancelled)."""
    if future.cancelled():
        return False
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)
    return True


class Answer(asyncio.Future[T]):
    """The future an async caller of `WriterThread` awaits. Its answer, set on the caller's
    loop by the writer thread's `call_soon_threadsafe`, resumes the waiting task in that
    same pass of the loop: a plain future schedules its waiters for the next pass, one more
    pass (and one more `select`) a store operation (bench/README.md weighs it: up to a tenth
    of the hop in a run). Only the answer runs its waiters at once, from the handle the
    writer thread scheduled, never from inside another callback; a cancelled `Answer`
    schedules them as any future does, and its answer is then dropped."""

    def __init__(self, *, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._waiting: list[tuple[Callable[[Any], object], Context | None]] = []

    def add_done_callback(
        self, fn: Callable[[Any], object], *, context: Context | None = None
    ) -> None:
        if self.done():
            super().add_done_callback(fn, context=context)
        else:
            self._waiting.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        kept = [waiter for waiter in self._waiting if waiter[0] != fn]
        removed = len(self._waiting) - len(kept)
        self._waiting = kept
        return removed + super().remove_done_callback(fn)

    def cancel(self, msg: Any | None = None) -> bool:
        if not super().cancel(msg):
            return False
        self._release(self.get_loop().call_soon)
        return True

    def answer(self, value: Any, error: BaseException | None) -> None:
        """Set the answer and resume its waiters now (on the loop, from the writer
        thread's `call_soon_threadsafe`); nothing if the caller stopped waiting."""
        if _settle(self, value, error):
            self._release(_now)

    def _release(self, run: Callable[..., object]) -> None:
        waiting, self._waiting = self._waiting, []
        for fn, context in waiting:
            run(fn, self, context=context)


def _now(fn: Callable[[Any], object], future: Any, *, context: Context | None) -> None:
    """Run a waiter at once, in its context, its error reported as the loop reports a
    callback's (as the loop would have run it, a pass later)."""
    try:
        if context is None:
            fn(future)
        else:
            context.run(fn, future)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        message = f"Exception in callback {fn!r} of a store's answer"
        future.get_loop().call_exception_handler(
            {"message": message, "exception": exc, "future": future}
        )


class LoopThread:
    """An event loop in a thread of the store's; `stop` runs `closing` on it, then ends it."""

    def __init__(self, name: str, where: str, closing: Callable[[], Awaitable[None]]) -> None:
        self._where, self._closing = where, closing
        self._loop = asyncio.new_event_loop()
        self._open = True
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def wait(self, work: Coroutine[Any, Any, T]) -> T:
        _check(self._open, self._thread, work, self._where)
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    async def call(self, work: Coroutine[Any, Any, T]) -> T:
        _check(self._open, self._thread, work, self._where)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))

    def stop(self) -> None:
        if not self._open:
            return
        self._open = False
        loop = self._loop
        if threading.current_thread() is self._thread:  # collected on its own loop
            closing = loop.create_task(_awaited(self._closing()))
            closing.add_done_callback(lambda _: loop.stop())
            return
        try:
            asyncio.run_coroutine_threadsafe(_awaited(self._closing()), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join()

    def _serve(self) -> None:
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()


async def _awaited(work: Awaitable[None]) -> None:
    await work


def _check(open_: bool, thread: threading.Thread, work: Work, where: str) -> None:
    if not open_:
        work.close()
        raise StoreError(f"the run store {where} is closed")
    if threading.current_thread() is thread:  # it would wait for itself forever
        work.close()
        raise RuntimeError("a run store's own thread cannot wait on the store")
