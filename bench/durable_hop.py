"""Where the writer thread's hop goes in bench/durable.py's own run (issue 20, point 6):
the run with a `SqliteRunStore` NORMAL, its store's engine swapped for one that adds one
piece of the hop at a time, and the writer thread's run split by thread.

bench/thread_hop.py measures the hop's floor with nothing around it (15-17 us of CPU an
operation); in the real run the hop costs several times that. Each engine here runs the
same store code, the runs interleaved, best CPU per turn of each:

- `inline`: each operation on the loop's thread, at once (the store before issue 20);
- `suspend`: the same, then the driver's task suspends on an `Answer` answered with
  `call_soon_threadsafe` from the loop's own thread: the way back to the loop the writer
  thread's answer takes (the self-pipe, a pass of the loop, the driver's stack of
  coroutines resumed), with no thread;
- `blocking`: the operation on the writer thread, the loop's thread blocked until it is
  done (`WriterThread.wait`): the thread's switches without the way back through the loop.
  It breaks the rule (the loop waits on the store); it is here to weigh that part;
- `writer`: the store's own engine, `WriterThread.call`.

Then one more pass of each scenario with the writer thread, split: CPU per turn on the
loop's thread and on the writer thread (the operations themselves, timed around each, and
the rest: waking, answering), against the same inline (the operations, and the rest); and
the context switches a store operation costs each thread (Linux: /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from durable_runs import KEY, SCENARIOS, Helikon, label
from thread_hop import InlineEngine

from helikon.durable import SqliteRunStore, sql_engine
from helikon.durable.sql_engine import Answer, WriterThread

Work = Coroutine[Any, Any, Any]


class SuspendEngine(InlineEngine):
    """The operation inline, then one suspension answered through the loop's self-pipe, as
    the writer thread answers (`sql_engine.Answer`)."""

    async def call(self, work: Work) -> Any:
        loop = asyncio.get_running_loop()
        answer: Answer[Any] = Answer(loop=loop)
        loop.call_soon_threadsafe(answer.answer, self.wait(work), None)
        return await answer


class BlockingEngine(InlineEngine):
    """The operation on the writer thread, the loop's thread blocked until it is done."""

    def __init__(self, writer: WriterThread) -> None:
        self.writer = writer

    async def call(self, work: Work) -> Any:
        return self.writer.wait(work)


class CountingEngine(InlineEngine):
    """Inline, counting the operations (an untimed pass)."""

    def __init__(self) -> None:
        self.ops = 0

    def wait(self, work: Work) -> Any:
        self.ops += 1
        return super().wait(work)


class TimedInline(InlineEngine):
    """Inline, the operations' own CPU time added up."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wait(self, work: Work) -> Any:
        start = time.thread_time()
        try:
            return super().wait(work)
        finally:
            self.seconds += time.thread_time() - start


def interleaved(repeat: int) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    """Best CPU us per turn of each (scenario, engine); store operations per turn."""
    return asyncio.run(_interleaved(repeat))


async def _interleaved(repeat: int) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    helikon = Helikon()
    await helikon.once(10, 1, None, "warm")
    best: dict[tuple[str, str], float] = {}
    ops: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteRunStore(Path(folder) / "run.db", key=KEY, synchronous="NORMAL")
        writer = store._engine
        assert isinstance(writer, WriterThread)
        engines: dict[str, Any] = {
            "inline": InlineEngine(),
            "suspend": SuspendEngine(),
            "blocking": BlockingEngine(writer),
            "writer": writer,
        }
        try:
            for turns, width in SCENARIOS:
                counting = store._engine = CountingEngine()
                run_id = f"{label(turns, width)}-count"
                await helikon.once(turns, width, store, run_id, verify_store=False)
                ops[label(turns, width)] = counting.ops / turns
            for i in range(repeat):
                for turns, width in SCENARIOS:
                    for name, engine in engines.items():
                        store._engine = engine
                        gc.collect()
                        run_id = f"{label(turns, width)}-{name}{i}"
                        await helikon.once(turns, width, store, run_id, verify_store=False)
                        us = helikon.cpu_seconds / turns * 1e6
                        key = (label(turns, width), name)
                        best[key] = min(best.get(key, us), us)
        finally:
            store._engine = writer
            store.close()
    return best, ops


# ---------------------------------------------------------------- the writer thread, split


class _Split:
    """The writer thread's CPU inside its operations, added up (`sql_engine._run` wrapped)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._run: Callable[..., None] = sql_engine._run

    def __enter__(self) -> _Split:
        def timed(work: Work, loop: Any, future: Any) -> None:
            start = time.thread_time()
            self._run(_Timed(work, self, start), loop, future)

        sql_engine._run = timed
        return self

    def __exit__(self, *exc: object) -> None:
        sql_engine._run = self._run


class _Timed:
    """An operation whose `send` adds its own CPU time to a `_Split`."""

    def __init__(self, work: Work, split: _Split, start: float) -> None:
        self.work, self.split, self.start = work, split, start

    def send(self, value: Any) -> Any:
        try:
            return self.work.send(value)
        finally:
            self.split.seconds += time.thread_time() - self.start

    def close(self) -> None:
        self.work.close()


def _thread_cpu(thread: threading.Thread) -> float:
    assert thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def _switches(native_id: int | None) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of a thread so far; (0, 0) off Linux."""
    try:
        with open(f"/proc/self/task/{native_id}/status") as status:
            lines = dict(line.split(":", 1) for line in status if "ctxt_switches" in line)
    except OSError:
        return 0, 0
    return int(lines["voluntary_ctxt_switches"]), int(lines["nonvoluntary_ctxt_switches"])


Split = dict[str, float]


def split(repeat: int, ops: dict[str, float]) -> dict[str, tuple[Split, Split]]:
    """Per scenario, the best (least process CPU) of `repeat` runs, inline and on the writer
    thread, each split by thread (us per turn) with switches per store operation (`ops`:
    per turn)."""
    return asyncio.run(_split(repeat, ops))


async def _split(repeat: int, ops: dict[str, float]) -> dict[str, tuple[Split, Split]]:
    helikon = Helikon()
    await helikon.once(10, 1, None, "warm")
    found: dict[str, tuple[Split, Split]] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteRunStore(Path(folder) / "split.db", key=KEY, synchronous="NORMAL")
        writer = store._engine
        assert isinstance(writer, WriterThread)
        loop_id, writer_id = threading.get_native_id(), writer._thread.native_id
        try:
            for turns, width in SCENARIOS:
                inline: Split = {"process": float("inf")}
                threaded: Split = {"process": float("inf")}
                for i in range(repeat):
                    timed = TimedInline()
                    store._engine = timed
                    gc.collect()
                    run_id = f"inline-{turns}x{width}-{i}"
                    await helikon.once(turns, width, store, run_id, verify_store=False)
                    cpu = helikon.cpu_seconds
                    if cpu / turns * 1e6 < inline["process"]:
                        inline = _per_turn(turns, process=cpu, operations=timed.seconds)
                    store._engine = writer
                    gc.collect()
                    with _Split() as inside:
                        before = (time.thread_time(), _thread_cpu(writer._thread))
                        switches = (_switches(loop_id), _switches(writer_id))
                        run_id = f"writer-{turns}x{width}-{i}"
                        await helikon.once(turns, width, store, run_id, verify_store=False)
                        loop_cpu = time.thread_time() - before[0]
                        writer_cpu = _thread_cpu(writer._thread) - before[1]
                        after = (_switches(loop_id), _switches(writer_id))
                    if helikon.cpu_seconds / turns * 1e6 < threaded["process"]:
                        threaded = _per_turn(
                            turns,
                            process=helikon.cpu_seconds,
                            loop=loop_cpu,
                            writer=writer_cpu,
                            operations=inside.seconds,
                        )
                        per_run = ops[label(turns, width)] * turns
                        threaded |= _switches_per_op(switches, after, per_run)
                found[label(turns, width)] = (inline, threaded)
        finally:
            store._engine = writer
            store.close()
    return found


def _per_turn(turns: int, **seconds: float) -> Split:
    return {name: value / turns * 1e6 for name, value in seconds.items()}


def _switches_per_op(
    before: tuple[tuple[int, int], tuple[int, int]],
    after: tuple[tuple[int, int], tuple[int, int]],
    ops: float,
) -> Split:
    (lv, li), (wv, wi) = before
    (lv2, li2), (wv2, wi2) = after
    return {
        "loop voluntary": (lv2 - lv) / ops,
        "loop involuntary": (li2 - li) / ops,
        "writer voluntary": (wv2 - wv) / ops,
        "writer involuntary": (wi2 - wi) / ops,
    }


# ---------------------------------------------------------------- nothing around it


async def _deep(depth: int, answer: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """`answer()` awaited under `depth` coroutine frames (the driver's stack is ~11 deep)."""
    if depth == 0:
        return await answer()
    return await _deep(depth - 1, answer)


async def _inline() -> None:
    return None


async def _self_pipe() -> None:
    loop = asyncio.get_running_loop()
    answer: Answer[None] = Answer(loop=loop)
    loop.call_soon_threadsafe(answer.answer, None, None)
    await answer


def bare_suspension(ops: int = 20_000, repeat: int = 5, depth: int = 11) -> dict[str, float]:
    """CPU us per op of `suspend`'s way back with nothing around it: no store, no driver,
    `depth` frames of coroutines; against the same frames not suspending."""
    best: dict[str, float] = {}

    async def measure() -> None:
        for _ in range(repeat):
            for name, answer in (("inline", _inline), ("suspend", _self_pipe)):
                start = time.process_time()
                for _ in range(ops):
                    await _deep(depth, answer)
                us = (time.process_time() - start) / ops * 1e6
                best[name] = min(best.get(name, us), us)

    asyncio.run(measure())
    return best


# ---------------------------------------------------------------- report


def report(best: dict[tuple[str, str], float], ops: dict[str, float]) -> None:
    names = list(dict.fromkeys(name for _, name in best))
    print("bench/durable.py's run, SqliteRunStore NORMAL, CPU us per turn (best), by engine:")
    print(f"{'scenario':<8} {'ops/turn':>8}" + "".join(f" {name:>9}" for name in names))
    for scenario, per_turn in ops.items():
        row = "".join(f" {best[scenario, name]:9.1f}" for name in names)
        print(f"{scenario:<8} {per_turn:8.2f}{row}")
    print("\nadded to inline, us per store operation (and the ratio to inline):")
    print(f"{'scenario':<8}" + "".join(f" {name:>16}" for name in names[1:]))
    for scenario, per_turn in ops.items():
        inline = best[scenario, "inline"]
        cells = []
        for name in names[1:]:
            added = (best[scenario, name] - inline) / per_turn
            cells.append(f" {added:+8.1f} ({best[scenario, name] / inline:5.3f})")
        print(f"{scenario:<8}" + "".join(cells))
    bare = bare_suspension()
    print(
        f"(`suspend`'s way back with nothing around it, 11 coroutine frames deep: "
        f"+{bare['suspend'] - bare['inline']:.1f} us an op)"
    )
    print()


def report_split(found: dict[str, tuple[Split, Split]]) -> None:
    print("the writer thread's run split by thread, CPU us per turn (the run of least CPU):")
    print(
        f"{'scenario':<8} {'inline':>8} {'ops':>7} {'rest':>7} | {'writer':>8} {'loop':>7} "
        f"{'thread':>7} {'ops':>7} {'rest':>6} | switches/op loop, writer (vol+invol)"
    )
    for scenario, (inline, threaded) in found.items():
        thread_rest = threaded["writer"] - threaded["operations"]
        print(
            f"{scenario:<8} {inline['process']:8.1f} {inline['operations']:7.1f} "
            f"{inline['process'] - inline['operations']:7.1f} | {threaded['process']:8.1f} "
            f"{threaded['loop']:7.1f} {threaded['writer']:7.1f} {threaded['operations']:7.1f} "
            f"{thread_rest:6.1f} | {threaded['loop voluntary']:.2f}+"
            f"{threaded['loop involuntary']:.2f}, {threaded['writer voluntary']:.2f}+"
            f"{threaded['writer involuntary']:.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs of each, best kept")
    parser.add_argument("--quick", action="store_true", help="--repeat 3")
    args = parser.parse_args(argv)
    repeat = 3 if args.quick else args.repeat
    best, ops = interleaved(repeat)
    report(best, ops)
    report_split(split(repeat, ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
