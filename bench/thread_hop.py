"""The floor under a run store's thread hop (issue 20, point 6): what it costs, in CPU
time, to hand one operation to a dedicated thread and get its answer back on an asyncio
loop, against running the same operation inline on the loop; no helikon but its
`WriterThread`.

A store operation used to run inline on the caller's loop (SQLite, before issue 20); it now
runs on the store's one writer thread (`helikon.durable.sql_engine.WriterThread`). Whatever
the store's code costs, each operation then pays for the hop: a wake-up of the thread, the
GIL changing hands twice, a wake-up of the loop. This prints that cost per operation for
three pieces of work (nothing; one tiny statement, `SELECT 1`; one tiny write transaction,
`BEGIN IMMEDIATE` / `UPDATE` of one row / `COMMIT` on a WAL file at `synchronous=NORMAL`,
a store write's shape) and four ways to run it:

- `inline`: called on the loop, as before issue 20 (the baseline);
- `bare`: the cheapest hop we know: a `queue.SimpleQueue` to a thread blocked on it, the
  answer handed back with one `loop.call_soon_threadsafe(future.set_result, ...)`;
- `writer`: helikon's `WriterThread.call` (the same, with its checks and a coroutine);
- `executor`: `loop.run_in_executor` on a one-thread `ThreadPoolExecutor` (a
  `concurrent.futures.Future` wrapped in an asyncio one: the usual way).

Then, per turn of bench/durable.py (each turn commits two store operations: the record
asking for the tool calls, and the record carrying their results), what the hop adds, and
the ratio it alone implies for `SqliteRunStore` NORMAL's CPU per turn against the figures
before issue 20 (`--base`: us per turn at 10x1, 50x4, 200x1; measure them with
`bench/compare.py OLD --bench durable`). All figures are process CPU time (both threads),
the best of `--repeat` repeats of `--ops` operations each, the mechanisms interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import SimpleQueue
from typing import Any

from helikon.durable.sql_engine import WriterThread

OPS_PER_TURN = 2  # store operations a turn of bench/durable.py commits (10x1, 50x4, 200x1)
BASE = {"10x1": 233.2, "50x4": 380.0, "200x1": 204.1}  # us/turn before issue 20 (e73853c)

Work = Callable[[], Any]


class Bare:
    """The cheapest hop: a thread blocked on a `SimpleQueue`, answering with one
    `call_soon_threadsafe` of the future's `set_result`."""

    def __init__(self) -> None:
        self.jobs: SimpleQueue[tuple[Work, asyncio.AbstractEventLoop, asyncio.Future[Any]] | None]
        self.jobs = SimpleQueue()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while (job := self.jobs.get()) is not None:
            work, loop, future = job
            loop.call_soon_threadsafe(future.set_result, work())

    async def call(self, work: Work) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.jobs.put((work, loop, future))
        return await future

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join()


class Writer:
    """helikon's `WriterThread`, given the work as a coroutine (as a store does)."""

    def __init__(self) -> None:
        self.thread = WriterThread("bench-hop", "bench", lambda: None)

    async def call(self, work: Work) -> Any:
        return await self.thread.call(_coroutine(work))

    def stop(self) -> None:
        self.thread.stop()


async def _coroutine(work: Work) -> Any:
    return work()


class Executor:
    """`loop.run_in_executor` on a one-thread pool."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(1)

    async def call(self, work: Work) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, work)

    def stop(self) -> None:
        self.pool.shutdown()


class Inline:
    """No hop: the work runs on the loop."""

    async def call(self, work: Work) -> Any:
        return work()

    def stop(self) -> None:
        pass


MECHANISMS: dict[str, Callable[[], Any]] = {
    "inline": Inline,
    "bare": Bare,
    "writer": Writer,
    "executor": Executor,
}


def works(folder: Path) -> dict[str, tuple[Work, Callable[[], None]]]:
    """Each piece of work, with what closes what it opened. The connections are shared
    across threads, one user at a time (as the store's is)."""
    select = sqlite3.connect(":memory:", check_same_thread=False)
    db = sqlite3.connect(folder / "hop.db", isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, n INTEGER)")
    db.execute("INSERT OR IGNORE INTO counter VALUES (1, 0)")

    def commit() -> None:
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE counter SET n = n + 1 WHERE id = 1")
        db.execute("COMMIT")

    return {
        "no-op": (lambda: None, lambda: None),
        "SELECT 1": (lambda: select.execute("SELECT 1").fetchone(), select.close),
        "commit": (commit, db.close),
    }


async def _run(call: Callable[[Work], Coroutine[Any, Any, Any]], work: Work, ops: int) -> None:
    for _ in range(ops):
        await call(work)


def measure(mechanism: Any, work: Work, ops: int) -> tuple[float, float]:
    """(CPU us per op, voluntary context switches per op) of `ops` operations on a loop."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_run(mechanism.call, work, ops // 10))  # warm up
        switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
        cpu = time.process_time()
        loop.run_until_complete(_run(mechanism.call, work, ops))
        cpu = time.process_time() - cpu
        switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - switches
    finally:
        loop.close()
    return cpu / ops * 1e6, switches / ops


def floor(ops: int, repeat: int) -> dict[tuple[str, str], tuple[float, float]]:
    """Best (us per op, switches per op) of each (work, mechanism), interleaved."""
    best: dict[tuple[str, str], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        pieces = works(Path(folder))
        mechanisms = {name: make() for name, make in MECHANISMS.items()}
        try:
            for _ in range(repeat):
                for work_name, (work, _close) in pieces.items():
                    for name, mechanism in mechanisms.items():
                        us, switches = measure(mechanism, work, ops)
                        key = (work_name, name)
                        if key not in best or us < best[key][0]:
                            best[key] = (us, switches)
        finally:
            for mechanism in mechanisms.values():
                mechanism.stop()
            for _work, close in pieces.values():
                close()
    return best


class InlineEngine:
    """A store engine that runs each operation on its caller's thread, on the loop (as the
    store did before issue 20): the same store code, no hop."""

    def wait(self, work: Coroutine[Any, Any, Any]) -> Any:
        try:
            work.send(None)
        except StopIteration as done:
            return done.value
        raise RuntimeError("a store operation waited")

    async def call(self, work: Coroutine[Any, Any, Any]) -> Any:
        return self.wait(work)

    def stop(self) -> None:
        pass


async def in_a_run(repeat: int) -> dict[tuple[str, str], float]:
    """Best CPU us per turn of bench/durable.py's helikon run with a `SqliteRunStore`
    NORMAL, its operations on the writer thread and inline (the engine swapped), the two
    interleaved; and the store operations a turn commits."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from durable_runs import KEY, SCENARIOS, Helikon, label

    from helikon.durable import SqliteRunStore

    helikon = Helikon()
    await helikon.once(10, 1, None, "warm")
    best: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteRunStore(Path(folder) / "run.db", key=KEY, synchronous="NORMAL")
        writer, inline = store._engine, InlineEngine()
        try:
            for i in range(repeat):
                for turns, width in SCENARIOS:
                    for name, engine in (("writer", writer), ("inline", inline)):
                        store._engine = engine
                        gc.collect()
                        await helikon.once(turns, width, store, f"{label(turns, width)}-{name}{i}")
                        us = helikon.cpu_seconds / turns * 1e6
                        key = (label(turns, width), name)
                        best[key] = min(best.get(key, us), us)
        finally:
            store._engine = writer
            store.close()
    return best


def report_run(best: dict[tuple[str, str], float]) -> None:
    print("bench/durable.py's run, SqliteRunStore NORMAL, CPU us per turn (best):")
    print(f"{'scenario':<8} {'inline':>8} {'writer':>8} {'hop/turn':>8} {'ratio':>6}")
    for scenario in dict.fromkeys(s for s, _ in best):
        inline, writer = best[scenario, "inline"], best[scenario, "writer"]
        hop = writer - inline
        print(f"{scenario:<8} {inline:8.1f} {writer:8.1f} {hop:8.1f} {writer / inline:6.3f}")
    print()


def report(best: dict[tuple[str, str], tuple[float, float]], base: dict[str, float]) -> None:
    print("CPU per operation (us), process time, best of the repeats; voluntary switches/op")
    print(f"{'work':<10} {'mechanism':<9} {'us/op':>7} {'hop us/op':>9} {'switches':>8}")
    for (work, name), (us, switches) in best.items():
        hop = us - best[work, "inline"][0]
        print(f"{work:<10} {name:<9} {us:7.1f} {hop:9.1f} {switches:8.2f}")
    print()
    print(f"What the hop alone adds per turn of bench/durable.py ({OPS_PER_TURN} store ops a")
    print("turn), and the ratio it implies against the CPU per turn before the hop:")
    header = "".join(f" {scenario + ' ratio':>12}" for scenario in base)
    print(f"{'work':<10} {'mechanism':<9} {'us/turn':>8}{header}")
    for (work, name), (us, _) in best.items():
        if name == "inline":
            continue
        added = (us - best[work, "inline"][0]) * OPS_PER_TURN
        ratios = "".join(f" {(turn + added) / turn:12.3f}" for turn in base.values())
        print(f"{work:<10} {name:<9} {added:8.1f}{ratios}")
    budget = ", ".join(f"{s} {turn * 0.1 / OPS_PER_TURN:.1f}" for s, turn in base.items())
    print(f"\nThe 10% limit leaves per store op (us), if nothing else changed: {budget}")
    print(f"(before-issue-20 us/turn taken: {base})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=2000, help="operations per measurement")
    parser.add_argument("--repeat", type=int, default=15, help="measurements, best kept")
    parser.add_argument("--quick", action="store_true", help="--ops 500 --repeat 3")
    parser.add_argument(
        "--base",
        default=",".join(f"{s}={us:g}" for s, us in BASE.items()),
        help="us per turn before the hop, per scenario (default: %(default)s)",
    )
    parser.add_argument(
        "--run",
        action="store_true",
        help="also bench/durable.py's run, the store's operations on its thread and inline",
    )
    args = parser.parse_args(argv)
    ops, repeat = (500, 3) if args.quick else (args.ops, args.repeat)
    base = {s: float(us) for s, us in (part.split("=") for part in args.base.split(","))}
    report(floor(ops, repeat), base)
    if args.run:
        print()
        report_run(asyncio.run(in_a_run(repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
