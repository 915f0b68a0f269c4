"""What does a durable run cost? `python bench/durable.py [--quick]`

Prints, from one run on this machine:

1. Time per turn of the scripted run of bench/driver.py (a zero-latency model asking for
   `width` calls of a trivial tool for N turns, then answering "done"; 10x1, 50x4, 200x1)
   for helikon in memory, helikon with a `SqliteRunStore` (synchronous=NORMAL, and FULL),
   and LangGraph's ReAct graph (bench/peers.py) with its `SqliteSaver`, checkpointed per
   super-step under a thread id, `durability="sync"` (each checkpoint is written before
   the next step starts, as helikon commits each transition before its effect). LangGraph
   runs through `invoke`: `SqliteSaver` has no async methods (`AsyncSqliteSaver` goes
   through aiosqlite's thread and is slower). Its connection gets the same `synchronous`
   as helikon's; SQLite's own default, which `SqliteSaver` keeps, is FULL. LangGraph
   without a checkpointer, and with its default `durability="async"` (a checkpoint written
   while the next step runs), are printed for reference. Ratios: helikon+SQLite over
   helikon in memory, and LangGraph+SqliteSaver over helikon+SQLite, at one `synchronous`.
2. Store bytes per turn after one run of 10, 100 and 500 turns, each in a fresh database:
   the bytes SQLite keeps for the rows (`dbstat` payload: record headers and keys included,
   page overhead and free space not), and the file's size after a WAL checkpoint; then the
   same 500-turn run in LangGraph's `SqliteSaver`.
3. Resume time against log length: a run stopped right after its record N was committed,
   before that record's effect started (N = 10, 100, 1000), then `agent.resume(run_id,
   store=store)` timed up to its first effect (the tool call record N asked for), beside
   the `store.get` (every signature checked) and the fold (`Run.from_stored`) inside it.
4. Where helikon+SQLite's time goes, per turn of each scenario, in CPU time (it
   leaves out waiting for the disk and for other processes, so it is steadier than wall
   time): the loop in memory; plus the journal with a connection that does nothing (records
   built, encoded to JSON, signed); plus SQLite's statements on a `:memory:` database; plus
   the file. Then SQLite's floor: the statements one run sent its store, replayed by a
   bare `sqlite3` loop with no helikon (`:memory:` and the file), and the ratio to in
   memory a store could reach if helikon cost nothing around them. Then the transactions
   and the WAL pages each turn writes.

Every run is checked before its figure counts: one result per tool call, the tool run that
many times, the final answer "done", and (untimed) the store holding the finished run with
every call's result (LangGraph: its last checkpoint holding every message). Figures are the
best of several repeats, the variants interleaved within each repeat, so a noisy neighbour
inflates them less. The garbage collector stays on, as in production. The runs and their
checks are in bench/durable_runs.py, the breakdown of section 4 in bench/durable_layers.py.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))

from driver import ZeroModel
from durable_layers import print_layers, profile
from durable_runs import (
    KEY,
    SCENARIOS,
    Echo,
    Helikon,
    check_stored,
    label,
    langgraph_available,
    langgraph_once,
    langgraph_saver,
)
from peers import FINAL_TEXT, Sample

from helikon import Agent, RunConfig
from helikon.durable import SqliteRunStore
from helikon.run.driver import Run

TARGET_VS_MEMORY = 3.0
TARGET_VS_LANGGRAPH = 10.0
TARGET_FLAT = 1.2
TARGET_BYTES = 0.02
SIZES = (10, 100, 500)
RECORDS = (10, 100, 1000)
READS = 3


# ---------------------------------------------------------------- 1. time per turn

Once = Callable[[int, int, int], Any]  # (turns, width, repeat) -> a Sample, or one awaited


@dataclass
class Variant:
    """One way to run the scenarios, and its figures: us per turn of every repeat."""

    name: str
    once: Once
    full: bool = False  # synchronous=FULL: measured after the others, fewer repeats
    samples: dict[tuple[int, int], list[float]] = field(default_factory=dict)

    def best(self, key: tuple[int, int]) -> float:
        return min(self.samples[key])

    def noise(self, key: tuple[int, int]) -> float:
        return statistics.median(self.samples[key]) / self.best(key)


def helikon_variants(work: Path) -> list[Variant]:
    helikon = Helikon()
    stores = {
        sync: SqliteRunStore(work / f"helikon-{sync}.db", key=KEY, synchronous=sync)
        for sync in ("NORMAL", "FULL")
    }

    def stored(sync: Literal["NORMAL", "FULL"]) -> Once:
        def once(turns: int, width: int, i: int) -> Any:
            return helikon.once(turns, width, stores[sync], f"{sync}-{turns}x{width}-{i}")

        return once

    return [
        Variant("helikon, in memory", lambda t, w, i: helikon.once(t, w, None, f"m{i}")),
        Variant("helikon + SqliteRunStore NORMAL", stored("NORMAL")),
        Variant("helikon + SqliteRunStore FULL", stored("FULL"), full=True),
    ]


def langgraph_variants(work: Path) -> list[Variant]:
    savers = {
        "NORMAL": langgraph_saver(work / "langgraph-NORMAL.db", "NORMAL"),
        "FULL": langgraph_saver(work / "langgraph-FULL.db", None),
    }

    def saved(sync: str | None, durability: str = "sync") -> Once:
        def once(turns: int, width: int, i: int) -> Sample:
            saver = None if sync is None else savers[sync]
            thread = f"{sync}-{durability}-{turns}x{width}-{i}"
            return langgraph_once(saver, turns, width, thread, durability)

        return once

    return [
        Variant("langgraph, no checkpointer", saved(None)),
        Variant("langgraph + SqliteSaver NORMAL", saved("NORMAL")),
        Variant("  the same, durability=async", saved("NORMAL", "async")),
        Variant("langgraph + SqliteSaver FULL", saved("FULL"), full=True),
    ]


async def measure(variants: list[Variant], repeat: int, full_repeat: int) -> None:
    """Each scenario `repeat` times, the variants interleaved within a repeat; the FULL
    variants after the others (their fsyncs would slow what runs beside them)."""
    for full, repeats in ((False, repeat), (True, full_repeat)):
        group = [v for v in variants if v.full is full]
        for key in SCENARIOS:
            for i in range(repeats):
                for variant in group:
                    gc.collect()
                    sample = variant.once(*key, i)
                    if asyncio.iscoroutine(sample):
                        sample = await sample
                    us = sample.seconds / key[0] * 1e6
                    variant.samples.setdefault(key, []).append(us)


def print_per_turn(variants: list[Variant], repeat: int, full_repeat: int) -> None:
    print(f"us per turn: the run's wall time / its tool turns, best of {repeat} (FULL: of")
    print(f"{full_repeat}); in brackets median / best over the repeats, how noisy it was:")
    print(f"  {'':<32}" + "".join(f"{label(*s):>16}" for s in SCENARIOS))
    for v in variants:
        cells = "".join(f"{v.best(s):9.1f} ({v.noise(s):4.2f})" for s in SCENARIOS)
        print(f"  {v.name:<32}{cells}")


def print_ratios(by_name: dict[str, Variant]) -> None:
    memory = by_name["helikon, in memory"]
    print("\nratios (of the best figures above):")
    print(f"  {'':<46}" + "".join(f"{label(*s):>9}" for s in SCENARIOS))
    for sync in ("NORMAL", "FULL"):
        ours = by_name[f"helikon + SqliteRunStore {sync}"]
        cells = [ours.best(s) / memory.best(s) for s in SCENARIOS]
        ok = max(cells) <= TARGET_VS_MEMORY
        target = f"target <= {TARGET_VS_MEMORY:g}x: {_verdict(ok)}" if sync == "NORMAL" else ""
        name = f"helikon+SQLite {sync} / helikon in memory"
        print(f"  {name:<46}{_cells(cells)}  {target}".rstrip())
    for sync in ("NORMAL", "FULL"):
        theirs = by_name.get(f"langgraph + SqliteSaver {sync}")
        if theirs is None:
            continue
        ours = by_name[f"helikon + SqliteRunStore {sync}"]
        cells = [theirs.best(s) / ours.best(s) for s in SCENARIOS]
        ok = min(cells) >= TARGET_VS_LANGGRAPH
        target = f"target >= {TARGET_VS_LANGGRAPH:g}x: {_verdict(ok)}" if sync == "NORMAL" else ""
        name = f"LangGraph+SqliteSaver / helikon+SQLite {sync}"
        print(f"  {name:<46}{_cells(cells)}  {target}".rstrip())
    bare = by_name.get("langgraph, no checkpointer")
    if bare is not None:
        saved = by_name["langgraph + SqliteSaver NORMAL"]
        cells = [saved.best(s) / bare.best(s) for s in SCENARIOS]
        print(f"  {'LangGraph+SqliteSaver NORMAL / LangGraph':<46}{_cells(cells)}  (reference)")
    lazy = by_name.get("  the same, durability=async")
    if lazy is not None:
        ours = by_name["helikon + SqliteRunStore NORMAL"]
        cells = [lazy.best(s) / ours.best(s) for s in SCENARIOS]
        name = "the same, durability=async / helikon NORMAL"
        print(f"  {name:<46}{_cells(cells)}  (reference: not written before the next step)")


def _cells(cells: Sequence[float]) -> str:
    return "".join(f"{c:8.2f}x" for c in cells)


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


# ---------------------------------------------------------------- 2. bytes per turn

FIXED = frozenset({"sqlite_schema", "charts", "meta", "sqlite_autoindex_meta_1"})


@dataclass
class Footprint:
    payload: dict[str, int]  # dbstat payload per table and index
    file_bytes: int  # the database file after a WAL checkpoint

    def total(self) -> int:
        return sum(n for name, n in self.payload.items() if name != "sqlite_schema")

    def run_rows(self) -> int:
        """helikon: the run's own rows (its header, records, effects, calls), not the
        chart (kept once per store) or the store's meta row."""
        return sum(n for name, n in self.payload.items() if name not in FIXED)


def footprint(path: Path) -> Footprint:
    """Sizes of a closed database: dbstat payload per b-tree, and the file's size."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = connection.execute("SELECT name, SUM(payload) FROM dbstat GROUP BY name")
        payload = {name: int(n) for name, n in rows.fetchall()}
    finally:
        connection.close()
    return Footprint(payload, path.stat().st_size)


async def helikon_footprint(work: Path, turns: int) -> Footprint:
    path = work / f"bytes-helikon-{turns}.db"
    store = SqliteRunStore(path, key=KEY)
    try:
        await Helikon().once(turns, 1, store, f"bytes-{turns}")
    finally:
        store.close()
    return footprint(path)


def langgraph_footprint(work: Path, turns: int) -> tuple[Footprint, float]:
    path = work / f"bytes-langgraph-{turns}.db"
    saver = langgraph_saver(path, "NORMAL")
    try:
        sample = langgraph_once(saver, turns, 1, "bytes")
    finally:
        saver.conn.close()
    return footprint(path), sample.seconds


def print_overflow(path: Path, turns: int) -> None:
    """Why the file outgrows the rows: records spilled into overflow pages."""
    connection = sqlite3.connect(path)
    try:
        pages, payload, unused = connection.execute(
            "SELECT COUNT(*), SUM(payload), SUM(unused) FROM dbstat "
            "WHERE name = 'records' AND pagetype = 'overflow'"
        ).fetchone()
        longest = connection.execute("SELECT MAX(LENGTH(data) + LENGTH(mac)) FROM records")
        (widest,) = longest.fetchone()
    finally:
        connection.close()
    if not pages:
        return
    print(
        f"  of the {turns}-turn file, {pages:,} pages ({pages * 4096:,} bytes) are overflow pages"
    )
    print(f"  of `records` holding {payload:,} bytes ({unused:,} unused): a record over ~1,000")
    print("  bytes does not fit a cell of a WITHOUT ROWID table's leaf, and spills into a page")
    print(f"  of its own (the widest record here: {widest:,} bytes of data and signature)")


async def print_bytes(work: Path, with_langgraph: bool) -> None:
    print("\nstore bytes per turn (one run of N turns x 1 tool, each in a fresh database):")
    print("  row bytes = dbstat payload of the run's rows (header, records, effects, calls:")
    print("  record headers and keys included, page overhead and free space not); the chart")
    print("  (kept once per store) is not in it. file = the database after a WAL checkpoint.")
    print(f"  {'turns':>6}{'row bytes':>12}{'per turn':>10}{'file bytes':>12}{'per turn':>10}")
    sizes = {turns: await helikon_footprint(work, turns) for turns in SIZES}
    for turns, size in sizes.items():
        rows = size.run_rows()
        print(
            f"  {turns:>6}{rows:>12,}{rows / turns:>10,.0f}"
            f"{size.file_bytes:>12,}{size.file_bytes / turns:>10,.0f}"
        )
    first, last = (sizes[n].run_rows() / n for n in (SIZES[0], SIZES[-1]))
    verdict = _verdict(last / first <= TARGET_FLAT)
    print(
        f"  flat: row bytes per turn at {SIZES[-1]} / at {SIZES[0]} turns = {last / first:.2f} "
        f"(target <= {TARGET_FLAT}: {verdict})"
    )
    chart = sizes[SIZES[-1]].payload.get("charts", 0)
    print(f"  the chart row: {chart:,} bytes, once per store and chart")
    print_overflow(work / f"bytes-helikon-{SIZES[-1]}.db", SIZES[-1])
    if not with_langgraph:
        return
    turns = SIZES[-1]
    theirs, seconds = langgraph_footprint(work, turns)
    ours = sizes[turns]
    print(f"  the same {turns}-turn run in LangGraph's SqliteSaver ({seconds:.1f} s to run):")
    print(f"  {'':<22}{'helikon':>14}{'langgraph':>16}{'helikon / langgraph':>22}")
    for what, a, b in (
        ("row bytes, all tables", ours.total(), theirs.total()),
        ("file bytes", ours.file_bytes, theirs.file_bytes),
    ):
        print(f"  {what:<22}{a:>14,}{b:>16,}{a / b:>21.2%}")
    verdict = _verdict(ours.total() / theirs.total() <= TARGET_BYTES)
    print(f"  (target: helikon's row bytes <= {TARGET_BYTES:.0%} of LangGraph's: {verdict};")
    print("  helikon's here include the chart and the store's meta row)")


# ---------------------------------------------------------------- 3. resume time


@dataclass
class Resumed:
    get: float  # store.get: every row read, every signature checked
    fold: float  # Run.from_stored: identity checks, the fold, the state re-derived
    first_effect: float  # agent.resume(...) until the tool call record N asked for runs


async def stopped_at(store: SqliteRunStore, records: int, run_id: str) -> tuple[Agent, Echo]:
    """A run stopped right after its record `records` (a model response asking for a tool
    call) was committed, before the call started; its worker gone, its lease released.

    The call's row went with that record, so the store counts it in flight: its tool is
    `idempotent`, so the resumed run runs it (a plain tool would get "interrupted")."""
    turns = records // 2 + 2
    echo = Echo()
    config = RunConfig(max_turns=turns + 5)
    tools = [echo.tool(idempotent=True)]
    agent = Agent("bench", ZeroModel(turns, 1), tools=tools, config=config)
    run = Run(agent, input="go", store=store, run_id=run_id)
    while run.seq < records - 1:
        await run.step()
    await run.apply()
    assert run.seq == records and run.journal is not None and run.next_action is not None
    await run.journal.close("running")
    return agent, echo


async def resume_once(store: SqliteRunStore, records: int, run_id: str) -> Resumed:
    agent, echo = await stopped_at(store, records, run_id)
    clock = time.perf_counter
    get = fold = float("inf")
    for _ in range(READS):  # reads change nothing: the best of a few, per stopped run
        gc.collect()
        start = clock()
        stored = store.get(run_id)
        got = clock()
        Run.from_stored(agent, store, stored)
        get, fold = min(get, got - start), min(fold, clock() - got)
    echo.count, echo.first = 0, None
    gc.collect()
    start_resume = clock()
    result = await agent.resume(run_id, store=store).collect()
    assert echo.first is not None
    turns = records // 2 + 2
    remaining = turns - records // 2 + 1  # the call record N asked for, and the turns after
    if result.final_output != FINAL_TEXT or echo.count != remaining:
        raise AssertionError(
            f"resumed run {run_id}: {result.final_output!r} after {echo.count} tool runs, "
            f"expected {FINAL_TEXT!r} after {remaining}"
        )
    check_stored(store, run_id, turns)
    return Resumed(get, fold, echo.first - start_resume)


async def print_resume(work: Path, repeat: int) -> None:
    store = SqliteRunStore(work / "resume.db", key=KEY)
    print(f"\nresume against log length: {repeat} runs stopped right after record N was")
    print("committed, before the tool call it asks for started; each resumed once, after")
    print(f"store.get and the fold alone were timed {READS} times; the best, in ms:")
    head = f"{'store.get':>11}{'fold':>9}{'resume to first effect':>24}{'per record':>14}"
    print(f"  {'records':>8}{head}")
    try:
        for records in RECORDS:
            runs = [
                await resume_once(store, records, f"resume-{records}-{i}") for i in range(repeat)
            ]
            get, fold, first = (
                min(getattr(r, f) for r in runs) for f in ("get", "fold", "first_effect")
            )
            print(
                f"  {records:>8}{get * 1e3:>11.2f}{fold * 1e3:>9.2f}{first * 1e3:>24.2f}"
                f"{first / records * 1e6:>11.1f} us"
            )
    finally:
        store.close()


# ---------------------------------------------------------------- main


async def per_turn(work: Path, repeat: int, full_repeat: int, with_langgraph: bool) -> None:
    helikon = Helikon()
    await helikon.once(10, 1, None, "warm")  # first-use costs are not per-turn costs
    variants = helikon_variants(work)
    if with_langgraph:
        langgraph_once(None, 10, 1, "warm")
        variants += langgraph_variants(work)
    await measure(variants, repeat, full_repeat)
    print_per_turn(variants, repeat, full_repeat)
    print_ratios({v.name: v for v in variants})


def load() -> str:
    """The machine's load, to read the figures by: above its CPU count, they are inflated."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min: {five:.1f}) on {os.cpu_count()} CPUs"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--no-langgraph", action="store_true", help="measure helikon only")
    parser.add_argument("--dir", type=Path, help="where the databases go (default: a temp dir)")
    parser.add_argument("--profile", action="store_true", help="cProfile a 200x1 stored run")
    args = parser.parse_args(argv)
    repeat, full_repeat, resume_repeat = (3, 1, 3) if args.quick else (7, 3, 5)
    with_langgraph = not args.no_langgraph
    missing = langgraph_available() if with_langgraph else None
    if missing is not None:
        print(f"langgraph: {missing}; measuring helikon only\n")
        with_langgraph = False
    with tempfile.TemporaryDirectory(dir=args.dir) as where:
        work = Path(where)
        if args.profile:
            asyncio.run(profile(work))
            return 0
        print(f"python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}; ", end="")
        print(f"{'quick' if args.quick else 'full'} run; databases in {work}")
        print(f"{load()} at the start\n")
        start = time.perf_counter()
        asyncio.run(per_turn(work, repeat, full_repeat, with_langgraph))
        asyncio.run(print_bytes(work, with_langgraph))
        asyncio.run(print_resume(work, resume_repeat))
        asyncio.run(print_layers(work, repeat, with_langgraph))
        print(f"\n({time.perf_counter() - start:.0f} s in all; {load()} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
