"""The async twins of a store's reads and deletes never block the event loop: a store
waiting on another process's write lock lets the application's other tasks run on."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from helikon.durable import SqliteRunStore


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
