"""SQLite's floor under a durable run, for bench/durable.py (section 4): the statements a
helikon run sent its `SqliteRunStore`, replayed by a bare `sqlite3` loop, no helikon.

A run goes through a `SqliteRunStore` whose connection records every statement with its
parameters (`BEGIN IMMEDIATE` and `COMMIT` included), then a loop of `execute` calls sends
the same statements, with the same parameters, to a fresh database set up as the store sets
up its own (WAL, the same `synchronous`, the store's schema). What that loop costs per turn
is what SQLite and `sqlite3` cost, whatever helikon does around them: a store can get no
cheaper than it while it commits those transactions.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from durable_runs import KEY, Helikon, label

from helikon.durable import SqliteRunStore, sqlite_sql

Statement = tuple[str, Any, bool]  # (SQL, parameters, executemany)


class RecordingConnection:
    """Wraps a store's `sqlite3.Connection` and keeps every statement sent through it."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.statements: list[Statement] = []

    def execute(self, statement: str, args: Any = ()) -> sqlite3.Cursor:
        self.statements.append((statement, args, False))
        return self.connection.execute(statement, args)

    def executemany(self, statement: str, args: Any) -> sqlite3.Cursor:
        args = list(args)
        self.statements.append((statement, args, True))
        return self.connection.executemany(statement, args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.connection, name)


async def recorded(work: Path, turns: int, width: int) -> list[Statement]:
    """The statements one run of `turns` x `width` sends its store, after a first run (as
    in the benchmark's stores, which hold many runs: the chart is in the store already)."""
    store = SqliteRunStore(work / f"floor-record-{label(turns, width)}.db", key=KEY)
    helikon = Helikon()
    recording = RecordingConnection(store._db)
    try:
        await helikon.once(turns, width, store, "first")
        store._begin.db = recording  # type: ignore[assignment]
        await helikon.once(turns, width, store, "floor")
    finally:
        store.close()
    return recording.statements


def replay(path: str | Path, statements: Sequence[Statement]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of a bare loop sending `statements` to a fresh database
    at `path` (":memory:" too) set up as a `SqliteRunStore` sets up its own."""
    if str(path) != ":memory:":
        SqliteRunStore(path, key=KEY).close()  # the schema, as the store makes it
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA foreign_keys=ON")
        connection.create_function("helikon_now", 0, time.time)  # the store's clock
        if str(path) == ":memory:":
            _schema(connection)
        execute, executemany = connection.execute, connection.executemany
        cpu, wall = time.process_time(), time.perf_counter()
        for statement, args, many in statements:
            cursor = executemany(statement, args) if many else execute(statement, args)
            if statement.lstrip().startswith("SELECT"):
                cursor.fetchall()
        return time.process_time() - cpu, time.perf_counter() - wall
    finally:
        connection.close()


def _schema(connection: sqlite3.Connection) -> None:
    for migration in sqlite_sql.MIGRATIONS:
        for statement in migration.split(";"):
            if statement.strip():
                connection.execute(statement)


async def floor_costs(
    work: Path, scenarios: Sequence[tuple[int, int]], repeat: int
) -> dict[tuple[int, int], dict[str, float]]:
    """Best us per turn of the bare loop: CPU on `:memory:`, CPU and wall on a file."""
    costs: dict[tuple[int, int], dict[str, float]] = {}
    for key in scenarios:
        statements = await recorded(work, *key)
        best: dict[str, float] = {}
        for i in range(repeat):
            fresh = work / f"floor-{label(*key)}-{i}.db"
            for name, path in (("memory", ":memory:"), ("file", fresh)):
                cpu, wall = replay(path, statements)
                for what, seconds in ((f"{name} cpu", cpu), (f"{name} wall", wall)):
                    us = seconds / key[0] * 1e6
                    best[what] = min(best.get(what, us), us)
        costs[key] = best
    return costs
