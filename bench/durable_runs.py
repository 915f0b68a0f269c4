"""The scripted runs of bench/durable.py, durable: helikon with a `SqliteRunStore`,
LangGraph's ReAct graph (bench/peers.py) with its `SqliteSaver`; each run checked.

The run is bench/driver.py's: a zero-latency model (`ZeroModel`) asking for `width` calls of
a trivial async tool for `turns` turns, then answering "done". A run counts only when the
framework reports one result per tool call, the tool ran that many times and the answer is
"done"; and, untimed, the store holds it (helikon: completed, every call's result in its
rows; LangGraph: its last checkpoint holds every message).
"""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from driver import ZeroModel
from peers import FINAL_TEXT, Counter, Sample, check, langgraph_graph, langgraph_sample

from helikon import Agent, RunCompleted, RunConfig, Tool, ToolOutputItem, TurnStarted
from helikon.core.items import ToolResult
from helikon.durable import SqliteRunStore

SCENARIOS = ((10, 1), (50, 4), (200, 1))
KEY = b"bench-durable-key-0123456789abcdef"


# ---------------------------------------------------------------- helikon's side


class Echo:
    """The trivial async tool; counts its executions and stamps the first one."""

    def __init__(self) -> None:
        self.count = 0
        self.first: float | None = None

    def tool(self, *, idempotent: bool = False) -> Tool:
        async def echo(x: int) -> str:
            """Echo a constant."""
            if self.first is None:
                self.first = time.perf_counter()
            self.count += 1
            return "ok"

        return Tool(echo, name="echo", idempotent=idempotent)


@dataclass
class Helikon:
    """helikon's agents for the scripted runs, one per (turns, width), one tool."""

    echo: Echo = field(default_factory=Echo)
    agents: dict[tuple[int, int], Agent] = field(default_factory=dict)
    cpu_seconds: float = 0.0  # the last run's CPU time (this process)

    def agent(self, turns: int, width: int) -> Agent:
        if (turns, width) not in self.agents:
            config = RunConfig(max_turns=turns + 5)
            model = ZeroModel(turns, width)
            self.agents[turns, width] = Agent(
                "bench", model, tools=[self.echo.tool()], config=config
            )
        return self.agents[turns, width]

    async def once(
        self,
        turns: int,
        width: int,
        store: SqliteRunStore | None,
        run_id: str,
        *,
        verify_store: bool = True,
    ) -> Sample:
        """One run, its stream consumed; checked, and (untimed) its stored run checked."""
        agent = self.agent(turns, width)
        stamps: list[float] = []
        outputs, final, self.echo.count = 0, None, 0
        clock = time.perf_counter
        cpu = time.process_time()
        start = clock()
        async for event in agent.run("go", store=store, run_id=run_id):
            kind = type(event)
            if kind is TurnStarted:
                stamps.append(clock())
            elif kind is ToolOutputItem:
                outputs += 1
            elif isinstance(event, RunCompleted):
                final = event.output.text
        seconds = clock() - start
        self.cpu_seconds = time.process_time() - cpu
        sample = check(
            "helikon", Sample(seconds, stamps, outputs, self.echo.count), turns, width, final
        )
        if store is not None and verify_store:
            check_stored(store, run_id, turns * width)
        return sample


def check_stored(store: SqliteRunStore, run_id: str, calls: int) -> None:
    """The store holds the run, completed, with every call's result and the final answer."""
    stored = store.get(run_id)
    finished = sum(1 for call in stored.calls if call.finished)
    results = sum(1 for r in stored.records for item in r.appends if isinstance(item, ToolResult))
    answer = stored.records[-1].state_after
    if stored.info.status != "completed" or finished != calls or results != calls:
        raise AssertionError(
            f"helikon: run {run_id} is {stored.info.status} in the store with {finished} "
            f"finished calls and {results} results, expected completed with {calls}"
        )
    if getattr(getattr(answer, "output", None), "text", None) != FINAL_TEXT:
        raise AssertionError(f"helikon: stored run {run_id} ends in {answer!r}, not {FINAL_TEXT!r}")


# ---------------------------------------------------------------- LangGraph's side


def langgraph_saver(path: Path, synchronous: str | None) -> Any:
    """A `SqliteSaver` on a file of its own; `synchronous` None keeps SQLite's default."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(connection)
    saver.setup()  # WAL, as SqliteSaver sets it
    if synchronous is not None:
        connection.execute(f"PRAGMA synchronous={synchronous}")
    return saver


def langgraph_once(
    saver: Any, turns: int, width: int, thread: str, durability: str = "sync"
) -> Sample:
    """One LangGraph run (`invoke`), checkpointed by `saver` under `thread`; checked, and
    (untimed) its last checkpoint checked."""
    counter = Counter()
    app = langgraph_graph(turns, width, counter, sync=True).compile(checkpointer=saver)
    config: Any = {"recursion_limit": 2 * turns + 10, "configurable": {"thread_id": thread}}
    state: Any = {"messages": [("user", "go")]}
    options = {} if saver is None else {"durability": durability}
    start = time.perf_counter()
    result = app.invoke(state, config, **options)
    seconds = time.perf_counter() - start
    sample = langgraph_sample(result, counter, seconds, turns, width)
    if saver is not None:
        kept = app.get_state(config).values["messages"]
        if len(kept) != len(result["messages"]) or kept[-1].content != FINAL_TEXT:
            raise AssertionError(f"langgraph: thread {thread}'s last checkpoint lacks the run")
    return sample


def langgraph_available() -> str | None:
    for module in ("langgraph", "langchain_core", "langgraph.checkpoint.sqlite"):
        try:
            if importlib.util.find_spec(module) is None:
                raise ImportError(module)
        except ImportError:
            return "not installed (pip install -e '.[bench]')"
    return None


def label(turns: int, width: int) -> str:
    return f"{turns}x{width}"
