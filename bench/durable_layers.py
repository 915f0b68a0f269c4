"""Where helikon+SQLite's time goes, for bench/durable.py (section 4), and `--profile`.

CPU time per turn of this process (it leaves out waiting for the disk and for other
processes, so it is steadier than wall time on a shared machine), in layers, each run
interleaved with the others: the loop in memory; plus the journal through a connection that
does nothing (records built, encoded to JSON, signed); plus SQLite's statements on a
`:memory:` database; plus the file (WAL writes, checkpoints). Then the transactions and the
WAL pages a turn writes, helikon's and LangGraph's.
"""

from __future__ import annotations

import gc
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

from durable_floor import floor_costs
from durable_runs import (
    KEY,
    SCENARIOS,
    Helikon,
    check_stored,
    label,
    langgraph_once,
    langgraph_saver,
)

from helikon.durable import SqliteRunStore
from helikon.durable import sqlite_sql as sql


class NullConnection:
    """Stands in for a store's `sqlite3.Connection`: every statement succeeds and touches
    nothing, so a run through it costs helikon's journaling alone (records built, encoded
    to JSON, chained and signed). It keeps the one run's head as the store writes it, to
    give it back when the store reads it. Counts the transactions begun."""

    rowcount = 1
    in_transaction = False
    ROW: ClassVar[dict[Any, Any]] = {0: 1, "lease_expires": 0.0}  # by index or column name

    def __init__(self) -> None:
        self.transactions = 0
        self.head: tuple[Any, ...] = ()  # head seq, head record's digest, links, last digest

    def execute(self, statement: str, *args: Any) -> NullConnection:
        self.transactions += statement == "BEGIN IMMEDIATE"
        row = args[0] if args else ()
        if statement is sql.CREATE_RUN or statement is sql.ADVANCE:
            self.head = (row["head_seq"], row["head_mac"], row["chain_n"], row["chain_digest"])
        elif statement is sql.SET_CHAIN:
            self.head = (*self.head[:2], row[0], row[1])
        self.row: Any = self.head if statement in (sql.HOLDS, sql.CHAIN) else self.ROW
        return self

    def executemany(self, statement: str, *args: Any) -> NullConnection:
        return self

    def fetchone(self) -> Any:
        return self.row

    def close(self) -> None:
        pass


LAYERS = (
    ("the loop, in memory", "memory"),
    ("+ the journal (records as JSON, HMACs; no database)", "null"),
    ("+ SQLite's statements (a :memory: database)", "sqlite"),
    ("+ the file (WAL writes, checkpoints), NORMAL", "file"),
)


def layer_stores(work: Path) -> tuple[dict[str, SqliteRunStore | None], NullConnection]:
    null = SqliteRunStore(":memory:", key=KEY)
    connection = NullConnection()
    null._begin.db = connection  # type: ignore[assignment]
    stores = {
        "memory": None,
        "null": null,
        "sqlite": SqliteRunStore(":memory:", key=KEY),
        "file": SqliteRunStore(work / "layers.db", key=KEY),
    }
    return stores, connection


async def layer_costs(work: Path, repeat: int) -> dict[tuple[int, int], dict[str, float]]:
    """Best CPU us per turn of each layer (and the file's wall time), interleaved."""
    stores, _ = layer_stores(work)
    helikon = Helikon()
    costs: dict[tuple[int, int], dict[str, float]] = {}
    for key in SCENARIOS:
        best = costs.setdefault(key, {})
        for i in range(repeat):
            for name, store in stores.items():
                gc.collect()
                run_id = f"{name}-{label(*key)}-{i}"
                sample = await helikon.once(*key, store, run_id, verify_store=name != "null")
                cpu = helikon.cpu_seconds / key[0] * 1e6
                best[name] = min(best.get(name, cpu), cpu)
                if name in ("memory", "file"):
                    wall = sample.seconds / key[0] * 1e6
                    best[f"{name} wall"] = min(best.get(f"{name} wall", wall), wall)
    return costs


class CountingConnection:
    """Wraps LangGraph's connection and counts its commits (SqliteSaver commits one
    transaction per `put` and per `put_writes`)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.commits = 0

    def commit(self) -> None:
        self.commits += 1
        self.connection.commit()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.connection, name)


async def helikon_writes(work: Path, key: tuple[int, int]) -> tuple[float, float]:
    """helikon's transactions, and WAL pages (4 KiB) written, per turn of one run."""
    stores, connection = layer_stores(work)
    await Helikon().once(*key, stores["null"], "count", verify_store=False)
    store = SqliteRunStore(work / f"pages-{label(*key)}.db", key=KEY)
    store._db.execute("PRAGMA wal_autocheckpoint=0")  # every page stays in the WAL
    await Helikon().once(*key, store, "pages")
    _, pages, _ = store._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    store.close()
    return connection.transactions / key[0], pages / key[0]


def langgraph_writes(work: Path, key: tuple[int, int]) -> tuple[float, float]:
    """LangGraph's commits, and WAL pages written, per turn of one run."""
    saver = langgraph_saver(work / f"pages-langgraph-{label(*key)}.db", "NORMAL")
    connection = saver.conn
    connection.execute("PRAGMA wal_autocheckpoint=0")
    saver.conn = counting = CountingConnection(connection)
    langgraph_once(saver, *key, "pages")
    _, pages, _ = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    connection.close()
    return counting.commits / key[0], pages / key[0]


async def print_layers(work: Path, repeat: int, with_langgraph: bool) -> None:
    costs = await layer_costs(work, repeat)
    print("\nwhere helikon+SQLite NORMAL's time goes: CPU us per turn of this process, best")
    print(f"of {repeat}, each layer added to the one above (CPU time leaves out waiting for the")
    print("disk and for other processes, so it is steadier than wall time):")
    print(f"  {'':<56}" + "".join(f"{label(*k):>9}" for k in SCENARIOS))
    previous: dict[tuple[int, int], float] = {}
    for text, name in LAYERS:
        cells = ""
        for k in SCENARIOS:
            value = costs[k][name]
            cells += f"{value - previous[k]:+9.1f}" if k in previous else f"{value:9.1f}"
            previous[k] = value
        print(f"  {text:<56}{cells}")
    _row("= helikon + SqliteRunStore NORMAL, CPU", [costs[k]["file"] for k in SCENARIOS])
    _row("  the same, wall time", [costs[k]["file wall"] for k in SCENARIOS])
    floor = await floor_costs(work, SCENARIOS, repeat)
    print("  SQLite alone: the statements of one such run (BEGIN IMMEDIATE to COMMIT),")
    print("  replayed by a bare sqlite3 loop, no helikon (bench/durable_floor.py):")
    _row("  on :memory:, CPU", [floor[k]["memory cpu"] for k in SCENARIOS])
    _row("  on a file, NORMAL, CPU", [floor[k]["file cpu"] for k in SCENARIOS])
    _row("  on a file, NORMAL, wall time", [floor[k]["file wall"] for k in SCENARIOS])
    print("  the floor, (in memory + SQLite alone on the file) / in memory, against")
    print("  helikon + SqliteRunStore / in memory (the target: <= 3x):")
    for clock, memory, stored in (("CPU", "memory", "file"), ("wall", "memory wall", "file wall")):
        cells = [
            (costs[k][memory] + floor[k][f"file {clock.lower()}"]) / costs[k][memory]
            for k in SCENARIOS
        ]
        print(f"  {f'  the floor, {clock}':<56}{_cells(cells)}")
        cells = [costs[k][stored] / costs[k][memory] for k in SCENARIOS]
        print(f"  {f'  helikon + SqliteRunStore, {clock}':<56}{_cells(cells)}")
    ours = [await helikon_writes(work, k) for k in SCENARIOS]
    _row("helikon: transactions per turn (1 + calls, 2 at least)", [t for t, _ in ours])
    _row("  WAL pages (4 KiB) written per turn", [p for _, p in ours])
    if with_langgraph:
        theirs = [langgraph_writes(work, k) for k in SCENARIOS]
        _row("LangGraph: commits per turn (put, put_writes)", [t for t, _ in theirs])
        _row("  WAL pages (4 KiB) written per turn", [p for _, p in theirs])


def _cells(cells: Sequence[float]) -> str:
    return "".join(f"{c:8.2f}x" for c in cells)


def _row(text: str, cells: Sequence[float]) -> None:
    print(f"  {text:<56}" + "".join(f"{c:9.1f}" for c in cells))


async def profile(work: Path) -> None:
    """Where helikon's time goes in a 200x1 run with a SqliteRunStore, by CPU time (a busy
    machine's wall clock would charge other processes to whatever ran; cProfile inflates
    every figure, the small functions most)."""
    import cProfile
    import pstats

    helikon = Helikon()
    store = SqliteRunStore(work / "profile.db", key=KEY)
    await helikon.once(10, 1, store, "warm")
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    await helikon.once(200, 1, store, "profiled", verify_store=False)
    profiler.disable()
    check_stored(store, "profiled", 200)
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(r"helikon", 30)
