"""The figures bench/compare.py compares, measured by this checkout's own benchmarks.

`python bench/figures.py transition|driver|durable [--quick]` prints one JSON object:

    {"bench": "driver", "helikon": "/path/to/helikon/__init__.py",
     "figures": {"driver 10x1": 101.2, ...}}

Every figure is in CPU time of this process (`time.process_time`: it leaves out other
processes and waiting, so it is what a shared machine distorts least), microseconds, the
best of a few repeats inside this one process:

- `transition step`: one step of the default chart's tool cycle (model_response, then
  tool_results) through `transition`, per step: bench/transition.py's `helikon_cycle`.
- `driver TxW`: helikon's CPU per turn of bench/driver.py's ZeroModel run for each of its
  scenarios (`helikon_runner`, the run's CPU time / its tool turns).
- `durable NORMAL TxW`: the same per turn with a `SqliteRunStore` at synchronous=NORMAL, in a
  temporary directory, for bench/durable.py's scenarios (`durable_runs.Helikon`, which times
  the run alone: the store's untimed check comes after).

The pieces measured are the benchmarks' own, imported by module name (the benchmarks do not
import this file back), so a checkout is measured by its own copy of them; bench/compare.py
runs this file with the checkout's `bench/` and root first on the path.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
import timeit
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCHES = ("transition", "driver", "durable")
TURNS_PER_SCENARIO = 2_000  # a scenario's repeats in one process add up to about this many turns


def repeats(turns: int, quick: bool) -> int:
    """How many runs of a `turns`-turn scenario one process times (3 at least)."""
    return max(3, TURNS_PER_SCENARIO // (5 if quick else 1) // turns)


def transition_figures(quick: bool) -> dict[str, float]:
    from transition import helikon_cycle

    number, repeat = (2_000, 3) if quick else (20_000, 5)
    loops = timeit.repeat(helikon_cycle(), number=number, repeat=repeat, timer=time.process_time)
    return {"transition step": min(loops) / number / 2 * 1e6}


async def driver_figures(quick: bool) -> dict[str, float]:
    from driver import SCENARIOS, helikon_runner

    run_once = helikon_runner()
    await run_once(10, 1)  # warm-up: first-use costs (imports, caches) are not per-turn costs
    figures = {}
    for turns, width in SCENARIOS:
        best = float("inf")
        for _ in range(repeats(turns, quick)):
            gc.collect()
            cpu = time.process_time()
            await run_once(turns, width)
            best = min(best, time.process_time() - cpu)
        figures[f"driver {turns}x{width}"] = best / turns * 1e6
    return figures


async def durable_figures(quick: bool) -> dict[str, float]:
    from durable_runs import KEY, SCENARIOS, Helikon

    from helikon.durable import SqliteRunStore

    helikon = Helikon()
    await helikon.once(10, 1, None, "warm")
    figures = {}
    with tempfile.TemporaryDirectory() as work:
        store = SqliteRunStore(Path(work) / "figures.db", key=KEY, synchronous="NORMAL")
        try:
            for turns, width in SCENARIOS:
                best = float("inf")
                for i in range(repeats(turns, quick)):
                    gc.collect()
                    await helikon.once(turns, width, store, f"{turns}x{width}-{i}")
                    best = min(best, helikon.cpu_seconds)
                figures[f"durable NORMAL {turns}x{width}"] = best / turns * 1e6
        finally:
            store.close()
    return figures


def measure(bench: str, quick: bool) -> dict[str, Any]:
    """One bench's figures, with the helikon package that was measured."""
    import helikon

    if bench == "transition":
        figures = transition_figures(quick)
    elif bench == "driver":
        figures = asyncio.run(driver_figures(quick))
    else:
        figures = asyncio.run(durable_figures(quick))
    return {"bench": bench, "helikon": helikon.__file__, "figures": figures}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("bench", choices=BENCHES)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.bench, args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
