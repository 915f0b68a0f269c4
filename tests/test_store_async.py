"""The async twins of a store's reads and deletes never block the event loop: a store
waiting on another process's write lock lets the application's other tasks run on."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_store_conformance import CHART, TTL, header, started

from helikon import Agent, ScriptedModel, UserMessage
from helikon.core.errors import RunError, StoreFailed
from helikon.core.items import Item
from helikon.durable import Session, SqliteRunStore, StoreError
from helikon.durable.sql_engine import Answer


async def test_a_waiting_aprune_lets_the_event_loop_run_on(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SqliteRunStore(path, key=b"k" * 32, busy_timeout=3.0) as store:
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            waiting = asyncio.ensure_future(store.aprune(older_than=0.0))
            ticks = 0
            for _ in range(5):  # these run only if the prune waits off the loop
                await asyncio.sleep(0.01)
                ticks += 1
            assert not waiting.done()
            other.execute("COMMIT")
            assert await waiting == 0
        finally:
            other.close()
    assert ticks == 5


async def test_the_async_reads_answer_as_the_plain_ones(tmp_path: Path) -> None:
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        session = store.session("s")
        await session.aadd([], "r")
        assert await session.aitems() == session.items() == ()
        assert await store.aruns() == store.runs() == []
        await session.aclear()


READS = {
    "load": lambda store: store.load("r1"),
    "aheader": lambda store: store.aheader("r1"),
    "arevision": lambda store: store.arevision("r1"),
    "aruns": lambda store: store.aruns(),
    "apending": lambda store: store.apending("r1"),
    "asession_items": lambda store: store.asession_items("s"),
}


@pytest.mark.parametrize("read", READS)
async def test_a_held_sqlite_read_lets_the_event_loop_run_on(tmp_path: Path, read: str) -> None:
    """The read is held inside SQLite (its progress handler waits) until the loop's own
    task lets it go: the task runs only if the read is off the loop. (Were it on the loop,
    the handler's wait would time out and the read end first.)"""
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        await store.create(header(), CHART, "a", TTL, started())
        held, release = threading.Event(), threading.Event()

        def hold() -> int:  # SQLite calls it at each step of the read: it waits once
            if not held.is_set():
                held.set()
                release.wait(10)
            return 0

        store._db.set_progress_handler(hold, 1)
        try:
            reading = asyncio.ensure_future(READS[read](store))
            assert await asyncio.to_thread(held.wait, 10)  # the loop hears of it: not blocked
            ticks = 0
            for _ in range(5):
                await asyncio.sleep(0)
                ticks += 1
            assert (ticks, reading.done()) == (5, False)
            release.set()
            await reading
        finally:
            release.set()
            store._db.set_progress_handler(None, 1)


class OffTheLoop:
    """A session store whose plain (blocking) operations refuse to run on the event loop's
    thread, and whose async twins run them on another thread, as a run store's do; `fail`
    makes the async read fail as a store that cannot read would."""

    def __init__(self, fail: bool = False) -> None:
        self.items: dict[str, tuple[Item, ...]] = {"s": (UserMessage("my name is Ada"),)}
        self.loop_thread = threading.get_ident()
        self.fail = fail

    def _off_the_loop(self) -> None:
        assert threading.get_ident() != self.loop_thread, "store IO on the event loop"

    def session_items(self, session_id: str) -> tuple[Item, ...]:
        self._off_the_loop()
        if self.fail:
            raise StoreError("the disk is gone")
        return self.items.get(session_id, ())

    async def asession_items(self, session_id: str) -> tuple[Item, ...]:
        return await asyncio.to_thread(self.session_items, session_id)

    def add_session_items(self, session_id: str, items: Sequence[Item], run_id: str) -> None:
        self._off_the_loop()
        self.items[session_id] = (*self.items.get(session_id, ()), *items)

    async def aadd_session_items(self, session_id: str, items: Sequence[Item], run_id: str) -> None:
        await asyncio.to_thread(self.add_session_items, session_id, items, run_id)

    def clear_session(self, session_id: str) -> None:
        self._off_the_loop()
        self.items.pop(session_id, None)

    async def aclear_session(self, session_id: str) -> None:
        await asyncio.to_thread(self.clear_session, session_id)


async def test_a_run_reads_and_writes_its_session_off_the_event_loop() -> None:
    sessions = OffTheLoop()
    model = ScriptedModel(["Hello, Ada."])
    result = await Agent("greeter", model).run("hi", session=Session(sessions, "s")).collect()
    assert result.final_output == "Hello, Ada."
    assert [item.content for item in model.requests[0].items] == ["my name is Ada", "hi"]
    assert [getattr(item, "content", None) for item in sessions.items["s"]] == [
        "my name is Ada",
        "hi",
        "Hello, Ada.",
    ]


async def test_a_session_that_cannot_be_read_fails_the_run_before_any_model_call() -> None:
    model = ScriptedModel(["never said"])
    session = Session(OffTheLoop(fail=True), "s")
    with pytest.raises(RunError) as failed:
        await Agent("greeter", model).run("hi", session=session).collect()
    assert failed.value.error == StoreFailed("StoreError", "the disk is gone")
    assert model.requests == []


async def test_an_answer_resumes_its_caller_in_the_pass_it_comes_in() -> None:
    """The writer thread's answer resumes the waiting task at once (a plain future would
    leave it for the next pass of the loop, after the handle scheduled behind it)."""
    loop = asyncio.get_running_loop()
    answer: Answer[str] = Answer(loop=loop)
    order: list[str] = []

    async def caller() -> None:
        order.append(await answer)

    waiting = asyncio.ensure_future(caller())
    await asyncio.sleep(0)  # the caller waits on its answer
    loop.call_soon(answer.answer, "answered", None)  # as the writer thread schedules it
    loop.call_soon(order.append, "the next handle")
    await waiting
    assert order == ["answered", "the next handle"]


async def test_an_answers_error_is_raised_where_its_caller_waits() -> None:
    loop = asyncio.get_running_loop()
    answer: Answer[str] = Answer(loop=loop)
    waiting = asyncio.ensure_future(_awaited(answer))
    await asyncio.sleep(0)
    loop.call_soon(answer.answer, None, LookupError("no such run"))
    with pytest.raises(LookupError, match="no such run"):
        await waiting


async def test_a_cancelled_caller_stops_waiting_and_its_answer_is_dropped() -> None:
    loop = asyncio.get_running_loop()
    answer: Answer[str] = Answer(loop=loop)
    waiting = asyncio.ensure_future(_awaited(answer))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    answer.answer("too late", None)  # the writer thread's answer, after the cancel
    assert answer.cancelled()


async def test_a_caller_cancelled_while_its_write_waits_on_sqlite_leaves_the_store_working(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    with SqliteRunStore(path, key=b"k" * 32, busy_timeout=3.0) as store:
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            waiting = asyncio.ensure_future(store.aprune(older_than=0.0))
            await asyncio.sleep(0.05)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            other.execute("COMMIT")
        finally:
            other.close()
        await store.create(header(), CHART, "a", TTL, started())  # the next write is answered
        assert [info.run_id for info in await store.aruns()] == [header().run_id]


async def _awaited(answer: Answer[str]) -> str:
    return await answer
