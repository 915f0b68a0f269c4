"""What does each framework add on top of the wire? `python bench/wire.py [--quick]`

helikon with `OpenAIModel`, and the OpenAI Agents SDK, pydantic-ai and LangGraph with their
own OpenAI adapters (bench/wire_peers.py says how each is set up), all against one local
zero-latency OpenAI wire server (`helikon.testing.OpenAIServer`, in a subprocess on
127.0.0.1, so it never holds the benchmark's GIL). Before each run the server is planned
with `rounds` replies that each ask for `tools` calls of a trivial tool, then one that
answers "done"; a run that does not make exactly those requests, run every tool call and
end with "done" is refused.

Beside them, two bare loops make the same requests with the `openai` client alone: one
helikon's (streamed, the conversation in `extra_body`), one the peers' (not streamed,
`messages=` typed, which the client walks against its types on every call). A framework's
overhead is its time minus the bare loop's of the same kind, in the same run, each the best
of several repeats, the frameworks interleaved repeat by repeat. It is given twice: in wall
time, as asked, and in this process's CPU time, which a busy machine inflates far less (the
server's work is in its own process, so neither includes it).

Prints, from one run:

1. Wall and CPU time per turn (the run's time / its rounds) at 10x1, 50x4 and 200x1 (rounds x
   tools per round), for every framework and both bare loops.
2. Overhead per turn, and the fastest peer's overhead over helikon's (target >= 3x).
3. Growth over the 200-round run: the last 100 turns' time over the first 100's, from the
   stamp the HTTP transport puts on each request (target: helikon's no worse than the best
   peer's); and the same ratio of the overhead alone.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import ARGUMENTS, FINAL_TEXT, Sample, check
from wire_peers import BARE, HELIKON, PEERS, Outcome, RunOnce, WirePeer

TARGET_VS_PEERS = 3.0
WINDOW = 100
LONG = 200
SCENARIOS = ((10, 1), (50, 4), (LONG, 1))
CHUNK = 64  # characters per streamed delta: each call's arguments in one fragment

Key = tuple[int, int]


# ---------------------------------------------------------------- the server, in its own process


def serve() -> int:
    """The server process: `plan ROUNDS TOOLS` queues a run, `served` reports on it."""
    from helikon.testing import OpenAIServer, PlannedReply, PlannedToolCall

    with OpenAIServer() as server:
        print(server.base_url, flush=True)
        for line in sys.stdin:
            command, *args = line.split()
            if command == "plan":
                rounds, tools = int(args[0]), int(args[1])
                server.requests.clear()  # bodies are kept for one run only
                for r in range(rounds):
                    calls = [
                        PlannedToolCall("echo", ARGUMENTS, f"call_{r}_{j}") for j in range(tools)
                    ]
                    server.plan(PlannedReply(tool_calls=calls, chunk_size=CHUNK))
                server.plan(PlannedReply(text=FINAL_TEXT, chunk_size=CHUNK))
                print("ok", flush=True)
            elif command == "served":
                report = {"requests": len(server.requests), "pending": server.pending}
                print(json.dumps(report), flush=True)
    return 0


class ServerProcess:
    """The wire server in a subprocess, planned over its stdin, answering on its stdout."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.base_url = self._read()

    def _read(self) -> str:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError("the wire server process exited")
        return line.strip()

    def _ask(self, command: str) -> str:
        assert self._process.stdin is not None
        self._process.stdin.write(command + "\n")
        self._process.stdin.flush()
        return self._read()

    def plan(self, rounds: int, tools: int) -> None:
        assert self._ask(f"plan {rounds} {tools}") == "ok"

    def check_served(self, rounds: int) -> None:
        """Refuse a run that made other requests than the plan's, or left replies unused."""
        served = json.loads(self._ask("served"))
        if served != {"requests": rounds + 1, "pending": 0}:
            raise AssertionError(f"expected {rounds + 1} requests, all planned; got {served}")

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)


# ---------------------------------------------------------------- measuring


@dataclass
class Framework:
    peer: WirePeer
    run_once: RunOnce
    runs: dict[Key, list[Outcome]] = field(default_factory=dict)

    def per_turn(self, key: Key, cpu: bool = False) -> float:
        """Best us per turn over the repeats."""
        best = min(run.cpu if cpu else run.seconds for run in self.runs[key])
        return best / key[0] * 1e6

    def windows(self, cpu: bool = False) -> tuple[float, float]:
        """Best first-100 and last-100 window of the long run, seconds."""
        stamps = [run.cpu_stamps if cpu else run.stamps for run in self.runs[LONG, 1]]
        first = min(s[WINDOW] - s[0] for s in stamps)
        last = min(s[-1] - s[-1 - WINDOW] for s in stamps)
        return first, last


async def run_checked(
    framework: Framework, server: ServerProcess, rounds: int, tools: int
) -> Outcome:
    server.plan(rounds, tools)
    gc.collect()
    outcome = await framework.run_once(rounds, tools)
    server.check_served(rounds)
    sample = Sample(outcome.seconds, outcome.stamps, outcome.tool_calls, outcome.executed)
    check(framework.peer.name, sample, rounds, tools, outcome.final)
    return outcome


def repeats(rounds: int, repeat: int) -> int:
    return repeat if rounds < LONG else max(2, repeat // 2)


async def measure(frameworks: list[Framework], server: ServerProcess, repeat: int) -> None:
    for framework in frameworks:  # warm-up: imports, connections, caches
        await run_checked(framework, server, 10, 1)
    for key in SCENARIOS:
        for _ in range(repeats(key[0], repeat)):  # interleaved: a busy moment hits everyone
            for framework in frameworks:
                outcome = await run_checked(framework, server, *key)
                framework.runs.setdefault(key, []).append(outcome)


def build(peers: Sequence[WirePeer], base_url: str) -> tuple[list[Framework], list[str]]:
    frameworks, notes = [], []
    for peer in peers:
        missing = peer.available()
        if missing is not None:
            notes.append(f"  {peer.name:<14} {missing}")
            continue
        frameworks.append(Framework(peer, peer.build(base_url)))
        notes.append(f"  {peer.name:<14} {peer.versions()}: {peer.how}")
    return frameworks, notes


async def run_all(
    peers: Sequence[WirePeer], server: ServerProcess, repeat: int
) -> tuple[list[Framework], list[str]]:
    frameworks, notes = build(peers, server.base_url)
    await measure(frameworks, server, repeat)
    return frameworks, notes


async def profile(server: ServerProcess) -> None:
    """Where helikon's time goes in the 200-round run, by own time (cProfile inflates it)."""
    import cProfile
    import pstats

    framework = Framework(HELIKON, HELIKON.build(server.base_url))
    await run_checked(framework, server, 10, 1)
    profiler = cProfile.Profile()
    profiler.enable()
    await run_checked(framework, server, LONG, 1)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(r"helikon", 25)


# ---------------------------------------------------------------- reporting


def label(key: Key) -> str:
    return f"{key[0]} x {key[1]}"


def baseline(frameworks: list[Framework], peer: WirePeer) -> Framework:
    return next(f for f in frameworks if f.peer in BARE and f.peer.streamed == peer.streamed)


def print_times(frameworks: list[Framework], repeat: int) -> None:
    long = repeats(LONG, repeat)
    for cpu in (False, True):
        kind = "CPU time of this process" if cpu else "wall time"
        print(f"\n{kind} per turn, us (best of {repeat}; {LONG} rounds: best of {long}):")
        print(f"  {'rounds x tools':<16}" + "".join(f"{f.peer.name:>15}" for f in frameworks))
        for key in SCENARIOS:
            cells = "".join(f"{f.per_turn(key, cpu):15.1f}" for f in frameworks)
            print(f"  {label(key):<16}{cells}")


def print_overhead(frameworks: list[Framework]) -> None:
    ours = next(f for f in frameworks if f.peer is HELIKON)
    peers = [f for f in frameworks if f.peer in PEERS]

    def overhead(framework: Framework, key: Key, cpu: bool) -> float:
        bare = baseline(frameworks, framework.peer)
        return framework.per_turn(key, cpu) - bare.per_turn(key, cpu)

    print("\noverhead per turn, us: the framework's time minus the bare loop's of the same kind")
    print("  (helikon's over 'bare streamed', the peers' over 'bare plain'; same run)")
    names = "".join(f"{f.peer.name:>15}" for f in peers)
    for cpu in (False, True):
        kind = "CPU" if cpu else "wall"
        print(f"  {kind:<5}{'rounds x tools':<15}{'helikon':>10}{names}   fastest peer / helikon")
        for key in SCENARIOS:
            mine = overhead(ours, key, cpu)
            theirs = {f.peer.name: overhead(f, key, cpu) for f in peers}
            row = f"  {'':<5}{label(key):<15}{mine:10.1f}"
            row += "".join(f"{value:15.1f}" for value in theirs.values())
            if theirs:
                row += "   " + verdict_vs_peers(mine, theirs)
            print(row)


def verdict_vs_peers(mine: float, theirs: dict[str, float]) -> str:
    fastest = min(theirs, key=lambda name: theirs[name])
    if mine <= 0:
        return f"helikon at or under the floor ({fastest} fastest peer): ok"
    ratio = theirs[fastest] / mine
    verdict = "ok" if ratio >= TARGET_VS_PEERS else "BELOW TARGET"
    return f"{ratio:6.1f}x ({fastest}; target >= {TARGET_VS_PEERS:g}x: {verdict})"


def print_growth(frameworks: list[Framework]) -> None:
    print(f"\ngrowth over the {LONG}-round run: last {WINDOW} turns / first {WINDOW} turns")
    print("  (each window timed from the transport's stamp on each request; 'own' subtracts")
    print("  the bare loop's windows of the same kind, leaving the framework's own cost)")
    per = 1e6 / WINDOW
    for cpu in (False, True):
        print(f"  {'CPU time' if cpu else 'wall time'}:")
        ratios: dict[str, float] = {}
        for framework in frameworks:
            first, last = framework.windows(cpu)
            ratio = ratios[framework.peer.name] = last / first
            line = (
                f"    {framework.peer.name:<14} {ratio:5.2f}   first {WINDOW}: "
                f"{first * per:8.1f} us/turn, last {WINDOW}: {last * per:8.1f} us/turn"
            )
            if framework.peer not in BARE:
                line += own_growth(framework, baseline(frameworks, framework.peer), cpu)
            print(line)
        print(growth_verdict(ratios))


def own_growth(framework: Framework, bare: Framework, cpu: bool) -> str:
    (first, last), (bare_first, bare_last) = framework.windows(cpu), bare.windows(cpu)
    own_first, own_last = (first - bare_first) * 1e6 / WINDOW, (last - bare_last) * 1e6 / WINDOW
    ratio = f"{own_last / own_first:5.2f}" if own_first > 0 else "  n/a"
    return f"; own {own_first:7.1f} -> {own_last:7.1f} us/turn ({ratio})"


def growth_verdict(ratios: dict[str, float]) -> str:
    peers = [name for name in ratios if name in {p.name for p in PEERS}]
    if not peers or "helikon" not in ratios:
        return "    (no peers measured)"
    best = min(peers, key=lambda name: ratios[name])
    verdict = "ok" if ratios["helikon"] <= ratios[best] else "ABOVE TARGET"
    return (
        f"    helikon {ratios['helikon']:.2f} vs the best peer's {ratios[best]:.2f} ({best}): "
        f"target no worse: {verdict}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--no-peers", action="store_true", help="helikon and the bare loops only")
    parser.add_argument("--profile", action="store_true", help="cProfile helikon's long run")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve()
    repeat = 3 if args.quick else 5
    server = ServerProcess()
    try:
        if args.profile:
            asyncio.run(profile(server))
            return 0
        print(
            f"python {sys.version.split()[0]}; openai {version('openai')}; "
            f"{'quick' if args.quick else 'full'} run"
        )
        print(f"server: helikon.testing.OpenAIServer in a subprocess at {server.base_url}")
        chosen = (HELIKON, *BARE, *(() if args.no_peers else PEERS))
        start = time.perf_counter()
        frameworks, notes = asyncio.run(run_all(chosen, server, repeat))
        print("\n".join(notes))
        print(f"({time.perf_counter() - start:.0f} s to measure)")
        print_times(frameworks, repeat)
        print_overhead(frameworks)
        print_growth(frameworks)
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
