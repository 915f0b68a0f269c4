"""What does helikon's loop cost per turn? `python bench/driver.py [--quick]`

Prints, from one run on this machine:

1. helikon's framework time per turn with a zero-latency model and a trivial tool, for
   10 turns x 1 tool, 50 turns x 4 parallel tools and 1000 turns x 1 tool. A turn is one
   model call asking for the tool call(s); every run ends with one more model call that
   answers "done", and per-turn time is the whole run's wall time / the tool turns.
   The model is `ZeroModel` below (pre-built chunks, one tool call per chunk, yielded at
   once), not `ScriptedModel` (which builds and splits its chunks on every call); a
   ScriptedModel row is printed beside it for reference.
2. How the per-turn cost grows: the last 100 turns of the 1000-turn run over the first 100,
   from a timestamp taken at each `TurnStarted` event while the stream is consumed.
3. 10,000 concurrent 2-turn runs in one process (`asyncio.gather`): time, runs/s, peak RSS.
4. What OpenTelemetry costs (`helikon.otel`): the scenarios with OTel off as shipped (the
   extra installed, no tracer provider configured: each run asks whether one is) against a
   baseline that skips that question, and, for information, with the SDK on (a
   `TracerProvider` whose exporter drops the spans). The three are interleaved, best of
   the repeats each (five times as many for the short runs), in the process's CPU time (a
   busy machine distorts it least).
5. The same scenarios through the OpenAI Agents SDK, pydantic-ai and LangGraph when the
   `bench` extra is installed (bench/peers.py says how each is set up), the ratio of the
   fastest peer's per-turn time to helikon's, and each peer's own last-100/first-100 ratio
   (timestamped at each call of its model double).

Figures for the short scenarios are the best of several repeats (a noisy neighbour inflates
a best less). The long run is repeated for helikon; the peers' long runs take seconds to
tens of seconds each, so they run once (and with 200 turns under --quick). The garbage
collector stays on, as in production.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import FINAL_TEXT, PEERS, Sample, check

from helikon import (
    Agent,
    RunCompleted,
    RunConfig,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolOutputItem,
    TurnStarted,
    Usage,
)
from helikon.models.base import (
    FinishChunk,
    ModelChunk,
    ModelInput,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)

TARGET_GROWTH = 1.2
TARGET_VS_PEERS = 10.0
WINDOW = 100
LONG = 1000
SCENARIOS = ((10, 1), (50, 4), (LONG, 1))

RunOnce = Callable[[int, int], Awaitable[Sample]]


# ---------------------------------------------------------------- helikon's side


class ZeroModel:
    """A model that answers instantly with chunks built in advance.

    Stateless, so one agent serves any number of concurrent runs: the turn is read off the
    conversation's length (each tool turn appends `width` calls and `width` results).
    """

    def __init__(self, turns: int, width: int) -> None:
        usage = UsageChunk(Usage(1, 1, 2, 1))
        self.per_turn = 2 * width
        self.answers: list[tuple[ModelChunk, ...]] = [
            (
                *(ToolCallChunk(f"call_{t}_{j}", '{"x": 1}', "echo") for j in range(width)),
                usage,
                FinishChunk("tool_calls"),
            )
            for t in range(turns)
        ]
        self.answers.append((TextChunk(FINAL_TEXT), usage, FinishChunk("stop")))

    async def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        for chunk in self.answers[(len(request.items) - 1) // self.per_turn]:
            yield chunk


class Executions:
    """Counts the tool's executions."""

    def __init__(self) -> None:
        self.count = 0

    def echo_tool(self, sync: bool = False) -> Tool:
        def echo_sync(x: int) -> str:
            """Echo a constant."""
            self.count += 1
            return "ok"

        async def echo(x: int) -> str:
            """Echo a constant."""
            self.count += 1
            return "ok"

        return Tool(echo_sync if sync else echo, name="echo")


async def helikon_once(agent: Agent, executions: Executions, turns: int, width: int) -> Sample:
    """One run, its stream consumed; a timestamp at each TurnStarted."""
    stamps: list[float] = []
    outputs = 0
    final = None
    executions.count = 0
    clock = time.perf_counter
    start = clock()
    async for event in agent.run("go"):
        kind = type(event)
        if kind is TurnStarted:
            stamps.append(clock())
        elif kind is ToolOutputItem:
            outputs += 1
        elif isinstance(event, RunCompleted):
            final = event.output.text
    seconds = clock() - start
    return check("helikon", Sample(seconds, stamps, outputs, executions.count), turns, width, final)


def helikon_runner(
    model: str = "zero", sync_tool: bool = False, tracer_provider: object = None
) -> RunOnce:
    """A `run_once(turns, width)` for helikon with the given model and tool kind (and
    tracer provider, for the OpenTelemetry rows)."""
    executions = Executions()
    echo = executions.echo_tool(sync_tool)
    agents: dict[tuple[int, int], Agent] = {}

    def agent_for(turns: int, width: int) -> Agent:
        config = RunConfig(max_turns=turns + 5, tracer_provider=tracer_provider)
        if model == "scripted":  # stateful: a new one per run, built before the clock starts
            calls = [
                [ToolCall(f"call_{t}_{j}", "echo", '{"x": 1}') for j in range(width)]
                for t in range(turns)
            ]
            scripted = ScriptedModel([*calls, FINAL_TEXT])
            return Agent("bench", scripted, tools=[echo], config=config)
        if (turns, width) not in agents:
            agents[turns, width] = Agent(
                "bench", ZeroModel(turns, width), tools=[echo], config=config
            )
        return agents[turns, width]

    async def run_once(turns: int, width: int) -> Sample:
        return await helikon_once(agent_for(turns, width), executions, turns, width)

    return run_once


# ---------------------------------------------------------------- measuring


@dataclass
class Measured:
    turns: int
    width: int
    samples: list[Sample]

    @property
    def best(self) -> Sample:
        return min(self.samples, key=lambda sample: sample.seconds)

    @property
    def us_per_turn(self) -> float:
        return self.best.seconds / self.turns * 1e6

    def windows(self) -> tuple[float, float] | None:
        """Best first-100 and best last-100 window over the repeats, seconds; None if short."""
        if self.turns < 2 * WINDOW:
            return None
        first = min(s.stamps[WINDOW] - s.stamps[0] for s in self.samples)
        last = min(s.stamps[-1] - s.stamps[-1 - WINDOW] for s in self.samples)
        return first, last

    def ratios(self) -> list[float]:
        return [
            (s.stamps[-1] - s.stamps[-1 - WINDOW]) / (s.stamps[WINDOW] - s.stamps[0])
            for s in self.samples
        ]


async def measure(run_once: RunOnce, turns: int, width: int, repeat: int) -> Measured:
    samples = []
    for _ in range(repeat):
        gc.collect()
        samples.append(await run_once(turns, width))
    return Measured(turns, width, samples)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def concurrent_runs(runs: int) -> None:
    """`runs` 2-turn runs (one tool turn, one answer) of one agent, all at once."""
    executions = Executions()
    agent = Agent(
        "bench", ZeroModel(1, 1), tools=[executions.echo_tool()], config=RunConfig(max_turns=4)
    )
    gc.collect()
    before = peak_rss_mib()
    start = time.perf_counter()
    results = await asyncio.gather(*(agent.run("go").collect() for _ in range(runs)))
    seconds = time.perf_counter() - start
    peak = peak_rss_mib()
    completed = sum(1 for result in results if result.final_output == FINAL_TEXT)
    outputs = sum(
        1 for result in results for event in result.events if type(event) is ToolOutputItem
    )
    assert completed == runs, f"{completed} of {runs} runs completed"
    assert outputs == executions.count == runs, (outputs, executions.count, runs)
    print(f"\n{runs:,} concurrent runs (2 turns each: one tool call, then the answer):")
    print(f"  all {completed:,} completed, {executions.count:,} tool calls executed")
    print(
        f"  total {seconds:.2f} s, {runs / seconds:,.0f} runs/s, {seconds / runs * 1e6:.0f} us/run"
    )
    print(f"  peak RSS {peak:.0f} MiB (peak before the runs: {before:.0f} MiB)")
    del results
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        await asyncio.gather(*(agent.run("go").collect() for _ in range(runs)))
        paused = time.perf_counter() - start
    finally:
        gc.enable()
    print(
        f"  diagnostic: the same runs with the cyclic GC paused: {paused:.2f} s "
        f"({runs / paused:,.0f} runs/s)"
    )


async def profile_long() -> None:
    """Where helikon's time goes in the long run, by own time (cProfile inflates it)."""
    import cProfile
    import pstats

    run_once = helikon_runner()
    await run_once(10, 1)
    profiler = cProfile.Profile()
    profiler.enable()
    await run_once(LONG, 1)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(20)
    stats.sort_stats("cumulative").print_stats(r"helikon", 25)


async def run_otel(repeat: int) -> None:
    """OpenTelemetry off as shipped vs a baseline without the provider lookup, and on."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    import helikon.run.building as building  # where Run.__init__ looks its observer up
    import helikon.run.driver as driver

    class Dropped(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Dropped()))
    lookup = building.observer_for

    def no_lookup(run: object) -> None:
        return None

    off, on = helikon_runner(), helikon_runner(tracer_provider=provider)
    rows: dict[str, dict[tuple[int, int], list[float]]] = {"off": {}, "baseline": {}, "on": {}}
    await off(10, 1)
    await on(10, 1)
    for turns, width in SCENARIOS:
        for samples in rows.values():
            samples[turns, width] = []
        for _ in range(repeat if turns == LONG else 5 * repeat):  # short runs: noisier
            for name, run_once in (("off", off), ("baseline", off), ("on", on)):
                building.observer_for = no_lookup if name == "baseline" else lookup  # type: ignore[assignment]
                try:
                    gc.collect()
                    cpu = time.process_time()
                    await run_once(turns, width)
                    rows[name][turns, width].append((time.process_time() - cpu) / turns * 1e6)
                finally:
                    building.observer_for = lookup
    provider.shutdown()
    run = driver.Run(Agent("bench", ZeroModel(1, 1)))
    calls = 100_000
    start = time.process_time()
    for _ in range(calls):
        lookup(run)
    asked = (time.process_time() - start) / calls * 1e6

    print(
        f"\nOpenTelemetry (helikon.otel), interleaved, best of {5 * repeat} "
        f"({repeat} for the long run), in CPU time:"
    )
    print(f"  with OTel off a run asks once whether it has a tracer provider: {asked:.2f} us/run")
    for turns, width in SCENARIOS:
        best = {name: min(samples[turns, width]) for name, samples in rows.items()}
        print(
            f"  {label(turns, width):<20} off {best['off']:8.1f} us/turn, baseline "
            f"{best['baseline']:8.1f}: off costs {best['off'] / best['baseline'] - 1:+6.1%}; "
            f"SDK on {best['on']:8.1f} ({best['on'] / best['baseline']:.2f}x)"
        )


# ---------------------------------------------------------------- reporting


def label(turns: int, width: int) -> str:
    return f"{turns} turns x {width} tool{'s' if width > 1 else ''}"


def growth_line(name: str, measured: Measured, note: str) -> str:
    windows = measured.windows()
    if windows is None:
        return f"  {name:<16} n/a (fewer than {2 * WINDOW} turns)"
    first, last = windows
    per = 1e6 / WINDOW
    return (
        f"  {name:<16} {last / first:5.2f}   first {WINDOW}: {first * per:8.1f} us/turn, "
        f"last {WINDOW}: {last * per:8.1f} us/turn  ({note})"
    )


async def run_helikon(repeat: int) -> dict[tuple[int, int], Measured]:
    zero = helikon_runner()
    await zero(10, 1)  # warm-up: first-use costs (imports, caches) are not per-turn costs
    results = {}
    for turns, width in SCENARIOS:
        results[turns, width] = await measure(zero, turns, width, repeat)

    print(f"helikon (ZeroModel, async tool), best of {repeat}:")
    print("  (per turn = the run's wall time / its tool turns; the closing answer turn is in")
    print("  the wall time, so short runs carry the per-run cost too)")
    for (turns, width), measured in results.items():
        print(f"  {measured.us_per_turn:8.1f} us/turn  {label(turns, width)}")

    print("for reference, also best of", repeat)
    variants = {
        "ScriptedModel, async tool": helikon_runner("scripted"),
        "ZeroModel, sync tool (runs in a worker thread)": helikon_runner(sync_tool=True),
    }
    for name, run_once in variants.items():
        await run_once(10, 1)
        for turns, width in SCENARIOS[:2]:
            measured = await measure(run_once, turns, width, repeat)
            print(f"  {measured.us_per_turn:8.1f} us/turn  {label(turns, width)}, {name}")
    return results


async def measure_peer(
    run_once: RunOnce, repeat: int, peer_turns: int
) -> dict[tuple[int, int], Measured]:
    await run_once(10, 1)  # warm-up
    results = {}
    for turns, width in SCENARIOS:
        if turns == LONG:
            results[turns, width] = await measure(run_once, peer_turns, width, 1)
        else:
            results[turns, width] = await measure(run_once, turns, width, repeat)
    return results


async def run_peers(
    repeat: int, peer_turns: int
) -> tuple[dict[str, dict[tuple[int, int], Measured]], list[str]]:
    measured: dict[str, dict[tuple[int, int], Measured]] = {}
    notes = []
    for peer in PEERS:
        missing = peer.available()
        if missing is not None:
            notes.append(f"  {peer.name:<16} {missing}")
            continue
        try:
            results = await measure_peer(peer.build(), repeat, peer_turns)
        except Exception as exc:  # a peer's API moved, or it did not do the work: say so
            notes.append(f"  {peer.name:<16} FAILED: {type(exc).__name__}: {exc}")
            continue
        measured[peer.name] = results
        long = results[LONG, 1].best
        model_us = long.model_seconds / peer_turns * 1e6
        notes.append(
            f"  {peer.name:<16} {peer.versions()}; its model double took "
            f"{model_us:.1f} us/turn of that (long run)"
        )
    return measured, notes


def print_comparison(
    ours: dict[tuple[int, int], Measured],
    peers: dict[str, dict[tuple[int, int], Measured]],
    peer_turns: int,
    repeat: int,
) -> None:
    names = list(peers)
    header = f"  {'scenario':<22}{'helikon':>10}" + "".join(f"{n:>15}" for n in names)
    print(f"\nus per turn, side by side (short scenarios best of {repeat}; peers' long run once):")
    print(header + "   fastest peer / helikon")
    for key in SCENARIOS:
        turns, width = key
        row = f"  {label(turns, width):<22}{ours[key].us_per_turn:10.1f}"
        peer_us = {name: peers[name][key].us_per_turn for name in names}
        row += "".join(f"{peer_us[name]:15.1f}" for name in names)
        if peer_us:
            fastest = min(peer_us, key=lambda name: peer_us[name])
            ratio = peer_us[fastest] / ours[key].us_per_turn
            verdict = "ok" if ratio >= TARGET_VS_PEERS else "BELOW TARGET"
            row += f"   {ratio:6.1f}x ({fastest}; target >= {TARGET_VS_PEERS:g}x: {verdict})"
        print(row)
    if peer_turns != LONG and names:
        print(
            f"  (the peers' long run has {peer_turns} turns, not {LONG}: their per-turn cost "
            "grows with the conversation, so this favours them)"
        )


def print_growth(
    ours: Measured, peers: dict[str, dict[tuple[int, int], Measured]], repeat: int
) -> None:
    print(f"\nper-turn growth: last {WINDOW} turns / first {WINDOW} turns of the long run")
    print(f"  (target for helikon <= {TARGET_GROWTH}; helikon stamps TurnStarted events, the")
    print("  peers stamp each call of their model double)")
    median = statistics.median(ours.ratios())
    verdict = "ok" if ours.windows() and _growth(ours) <= TARGET_GROWTH else "ABOVE TARGET"
    note = f"{LONG} turns, best window of {repeat} runs; median ratio {median:.2f}; {verdict}"
    print(growth_line("helikon", ours, note))
    for name, results in peers.items():
        long = results[LONG, 1]
        print(growth_line(name, long, f"{long.turns} turns, one run"))


def _growth(measured: Measured) -> float:
    windows = measured.windows()
    assert windows is not None
    return windows[1] / windows[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, shorter peer runs")
    parser.add_argument("--no-peers", action="store_true", help="measure helikon only")
    parser.add_argument(
        "--peer-turns", type=int, help=f"turns of the peers' long run (default {LONG}; 200 quick)"
    )
    parser.add_argument(
        "--runs", type=int, help="concurrent runs (default 10,000; 2,000 under --quick)"
    )
    parser.add_argument(
        "--profile", action="store_true", help=f"cProfile helikon's {LONG}-turn run and stop"
    )
    args = parser.parse_args(argv)
    if args.profile:
        asyncio.run(profile_long())
        return 0
    repeat = 3 if args.quick else 7
    peer_turns = args.peer_turns or (200 if args.quick else LONG)
    runs = args.runs or (2_000 if args.quick else 10_000)
    if peer_turns < 2 * WINDOW:
        parser.error(f"--peer-turns must be at least {2 * WINDOW}")

    print(f"python {sys.version.split()[0]}; {'quick' if args.quick else 'full'} run\n")
    ours = asyncio.run(run_helikon(repeat))
    asyncio.run(run_otel(repeat))
    asyncio.run(concurrent_runs(runs))
    if args.no_peers:
        print_growth(ours[LONG, 1], {}, repeat)
        return 0

    start = time.perf_counter()
    peers, notes = asyncio.run(run_peers(repeat, peer_turns))
    print(f"\npeers ({time.perf_counter() - start:.0f} s to measure):")
    print("\n".join(notes))
    print_comparison(ours, peers, peer_turns, repeat)
    print_growth(ours[LONG, 1], peers, repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
