"""What does reading a run's header cost, against reading the whole run?
`python bench/store_header.py [--quick] [--url URL]`

A Temporal tool call of an agent with tool sources needs the tools its run listed, which
its header holds. Prints, from one run on this machine, for stored runs of 10, 200 and 1000
records: `await store.load(run_id)` (every record, event, call and decision read, every
signature checked) against `await store.aheader(run_id)` (the header alone, checked alike)
and `await store.arevision(run_id)` (what a follower polls, reading the run only when it
changed),
each the best of several repeats of a batch of reads, in microseconds per read, and their
ratio; then how each grows from the 10-record run to the 1000-record one (the header's
should stay near 1).

The runs are real durable runs (bench/driver.py's zero-latency model asking for one call
of a trivial tool per turn), stepped until their record N is committed. Their headers list
no tools (the agent has no tool source): a listing is a constant part of one run, read
alike by both. The store is a `SqliteRunStore` in a temporary folder, or the store `--url`
names (a `postgresql://` one measures PostgreSQL: each read is then a round trip).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from driver import ZeroModel
from durable_runs import KEY, Echo

from helikon import Agent, RunConfig
from helikon.durable import RunStore, open_store
from helikon.run.driver import Run

RECORDS = (10, 200, 1000)


async def stored_run(store: RunStore, records: int, run_id: str) -> None:
    """A run stepped until its record `records` is committed, its lease released."""
    turns = records // 2 + 2
    agent = Agent("bench", ZeroModel(turns, 1), tools=[Echo().tool()])
    run = Run(
        agent,
        input="go",
        store=store,
        run_id=run_id,
        config=RunConfig(max_turns=turns + 5),
    )
    while run.seq < records:
        await run.step()
    assert run.journal is not None
    await run.journal.close("running")


async def per_read(
    read: Callable[[str], Awaitable[Any]], run_id: str, reads: int, repeat: int
) -> float:
    """Seconds per `read(run_id)`: the best over `repeat` batches of `reads` reads."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        for _ in range(reads):
            await read(run_id)
        best = min(best, (time.perf_counter() - start) / reads)
    return best


async def measure(store: RunStore, repeat: int) -> None:
    print(f"best of {repeat} batches, in us per read:")
    print(f"  {'records':>8}{'load':>12}{'aheader':>10}{'arevision':>11}{'load / aheader':>17}")
    figures: list[tuple[float, float]] = []
    for records in RECORDS:
        run_id = f"header-{records}-{time.time_ns()}"
        await stored_run(store, records, run_id)
        stored = await store.load(run_id)
        if len(stored.records) != records or await store.aheader(run_id) != stored.header:
            raise AssertionError(f"run {run_id}: {len(stored.records)} records, or another header")
        reads = max(5, 2000 // records)  # batches of about the same length at each size
        load = await per_read(store.load, run_id, reads, repeat)
        header = await per_read(store.aheader, run_id, 200, repeat)
        revision = await per_read(store.arevision, run_id, 200, repeat)  # a follower's poll
        print(
            f"  {records:>8}{load * 1e6:>12.1f}{header * 1e6:>10.1f}{revision * 1e6:>11.1f}"
            f"{load / header:>16.1f}x"
        )
        figures.append((load, header))
    (load_first, header_first), (load_last, header_last) = figures[0], figures[-1]
    print(
        f"growth from {RECORDS[0]} to {RECORDS[-1]} records: load {load_last / load_first:.1f}x, "
        f"aheader {header_last / header_first:.2f}x"
    )


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min: {five:.1f}) on {os.cpu_count()} CPUs"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--url", help="the store to measure (default: SQLite in a temp dir)")
    args = parser.parse_args(argv)
    repeat = 3 if args.quick else 7
    with tempfile.TemporaryDirectory() as where:
        url = args.url or f"sqlite:///{Path(where) / 'runs.db'}"
        print(f"python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}; {load_average()}")
        store = open_store(url, key=KEY)
        try:
            print(f"store: {store!r}")
            asyncio.run(measure(store, repeat))
        finally:
            store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
