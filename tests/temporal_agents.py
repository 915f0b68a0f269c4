"""Agents the Temporal tests run, as factories: each test builds fresh ones (a scripted
model counts the calls it answered), and a worker process builds them by name
(`python tests/temporal_agents.py ADDRESS QUEUE STORE NAME ...`, tests/test_temporal_kill.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from helikon import (
    Agent,
    FatalToolError,
    InputGuardrail,
    OutputGuardrail,
    RunConfig,
    ScriptedModel,
    ToolCall,
    tool,
)
from helikon.core.items import Usage
from helikon.models.scripted import ScriptedTurn
from helikon.tools import ToolContext


def weather_agent(*, needs_approval: bool = False, **config: object) -> Agent:
    """Two turns of tools (the second a parallel pair), then an answer."""

    @tool(read_only=True, needs_approval=needs_approval)
    def weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city.
        """
        return f"sunny in {city}"

    script = [
        [ToolCall("c1", "weather", '{"city": "Oslo"}')],
        [
            ToolCall("c2", "weather", '{"city": "Rome"}'),
            ToolCall("c3", "weather", '{"city": "Lima"}'),
        ],
        "Sunny everywhere.",
    ]
    return Agent(
        name="weather",
        model=ScriptedModel(script),
        instructions="Say the weather.",
        tools=[weather],
        config=RunConfig(**config),  # type: ignore[arg-type]
    )


def station_agent(*tools: str, script: list[Any] | None = None, **options: Any) -> Agent:
    """An agent whose tools come from an MCP server, tests/mcp_server.py as a stdio
    subprocess (not connected: a worker connects it; `options` are the server's), offering
    `tools` (add and wipe by default); it adds, then answers."""
    from mcp_support import SERVER

    from helikon.mcp import MCPServer

    server = MCPServer(
        stdio=[sys.executable, SERVER],
        name="station",
        tool_filter=list(tools or ("add", "wipe")),
        **options,
    )
    answers = script or [[ToolCall("a1", "add", '{"a": 2, "b": 3}')], "It is 5."]
    return Agent(name="station", model=ScriptedModel(answers), mcp_servers=[server])


def payments_agent() -> Agent:
    """A transfer that needs approval, then an answer."""

    @tool(needs_approval=True)
    def transfer(amount: int) -> str:
        """Move money.

        Args:
            amount: how much.
        """
        return f"moved {amount}"

    script = [[ToolCall("t1", "transfer", '{"amount": 500}')], "Done."]
    return Agent(name="payments", model=ScriptedModel(script), tools=[transfer])


class City(BaseModel):
    name: str
    people: int


def structured_agent() -> Agent:
    """A typed answer that fails validation once, then is repaired."""
    script = ['{"name": "Oslo"}', '{"name": "Oslo", "people": 700000}']
    return Agent(name="structured", model=ScriptedModel(script), output_type=City)


def triage_agent(**config: object) -> Agent:
    """Hands off to billing, which answers."""
    billing = Agent(name="billing", model=ScriptedModel(["Your bill is 10 EUR."]))
    script = [[ToolCall("h1", "transfer_to_billing", "{}")]]
    return Agent(
        name="triage",
        model=ScriptedModel(script),
        handoffs=[billing],
        config=RunConfig(**config),  # type: ignore[arg-type]
    )


def manager_agent(**config: object) -> Agent:
    """Asks a researcher agent as a tool, then answers."""
    researcher = Agent(name="researcher", model=ScriptedModel(["Paris is in France."]))
    script = [
        [ToolCall("a1", "researcher", '{"input": "where is Paris?"}')],
        "Paris is in France, says the researcher.",
    ]
    return Agent(
        name="manager",
        model=ScriptedModel(script),
        tools=[researcher.as_tool()],
        config=RunConfig(**config),  # type: ignore[arg-type]
    )


def guarded_agent(answer: str) -> Agent:
    """An input guardrail on "forbidden" and an output guardrail on "secret"."""
    no_forbidden = InputGuardrail("no_forbidden", lambda text, context: "forbidden" in text)
    no_secret = OutputGuardrail("no_secret", lambda output, context: "secret" in output.text)
    return Agent(
        name="guarded",
        model=ScriptedModel([answer]),
        input_guardrails=[no_forbidden],
        output_guardrails=[no_secret],
    )


def budget_manager(budget: int) -> Agent:
    """A manager that spends 90 tokens, then asks a researcher that spends 50 on a call
    asking for a tool, and would then answer."""

    @tool(read_only=True)
    def measure() -> str:
        """Measure."""
        return "42 km"

    asks = ScriptedTurn([ToolCall("m1", "measure", "{}")], Usage(50, 0, 50, 1))
    researcher = Agent(name="researcher", model=ScriptedModel([asks, "42 km"]), tools=[measure])
    script = [
        ScriptedTurn([ToolCall("a1", "researcher", '{"input": "how far?"}')], Usage(90, 0, 90, 1)),
        "I could not find out.",
    ]
    return Agent(
        name="manager",
        model=ScriptedModel(script),
        tools=[researcher.as_tool()],
        config=RunConfig(token_budget=budget),
    )


def looping_agent(max_turns: int) -> Agent:
    """Calls a tool every turn, forever: max_turns ends it."""

    @tool(read_only=True)
    def ping() -> str:
        """Ping."""
        return "pong"

    script = [[ToolCall(f"p{i}", "ping", "{}")] for i in range(max_turns + 2)]
    return Agent(
        name="looping",
        model=ScriptedModel(script),
        tools=[ping],
        config=RunConfig(max_turns=max_turns),
    )


def slow_agent(marks: Path, *, read_only: bool = False, timeout: float | None = None) -> Agent:
    """A tool that marks each start and end in `marks`' folder, and waits for `marks`
    to exist before ending (so a test can kill a worker mid-call, or cancel)."""

    async def slow(tag: str, context: ToolContext[None]) -> str:
        start = marks.parent / f"start-{tag}-{os.getpid()}"
        start.write_text(context.idempotency_key)
        while not marks.exists():
            await asyncio.sleep(0.05)
        (marks.parent / f"end-{tag}-{os.getpid()}").write_text(context.idempotency_key)
        return f"{tag} done"

    slow.__doc__ = """Something slow.

    Args:
        tag: a name for the call.
    """
    slow_tool = tool(name="slow", read_only=read_only)(slow)

    @tool(read_only=True)
    def quick(tag: str) -> str:
        """Something quick.

        Args:
            tag: a name.
        """
        (marks.parent / f"quick-{tag}-{os.getpid()}").write_text("ran")
        return f"{tag} quick"

    script = [
        [ToolCall("q1", "quick", '{"tag": "a"}'), ToolCall("s1", "slow", '{"tag": "b"}')],
        "All done.",
    ]
    return Agent(
        name="slow",
        model=ScriptedModel(script),
        tools=[quick, slow_tool],
        config=RunConfig(timeout=timeout),
    )


def slow_triage(marks: Path) -> Agent:
    """Hands off to `slow_agent(marks)`, which waits on its slow tool."""
    script = [[ToolCall("h1", "transfer_to_slow", "{}")]]
    return Agent(name="triage", model=ScriptedModel(script), handoffs=[slow_agent(marks)])


def slow_manager(marks: Path) -> Agent:
    """Asks `slow_agent(marks)` as a tool (it waits on its slow tool), then answers."""
    script = [[ToolCall("a1", "slow", '{"input": "go"}')], "The slow agent is done."]
    return Agent(name="manager", model=ScriptedModel(script), tools=[slow_agent(marks).as_tool()])


def fatal_agent() -> Agent:
    """A tool that fails the run (`FatalToolError`)."""

    @tool
    def launch() -> str:
        """Launch."""
        raise FatalToolError("the launch pad is gone")

    script = [[ToolCall("f1", "launch", "{}")], "Launched."]
    return Agent(name="fatal", model=ScriptedModel(script), tools=[launch])


BULK = 3 * 1024 * 1024
"""Bytes of a bulky tool's result: over Temporal's 2 MB payload limit."""


def bulky_agent(
    ran: list[str] | None = None, *, answer: str = "Dumped.", size: int = BULK
) -> Agent:
    """A tool that is not idempotent returns `size` characters (each run appended to
    `ran`), then the model answers `answer`."""
    runs = ran if ran is not None else []

    @tool
    def dump() -> str:
        """Dump the archive."""
        runs.append("dump")
        return "x" * size

    script = [[ToolCall("d1", "dump", "{}")], answer]
    return Agent(name="bulky", model=ScriptedModel(script), tools=[dump])


async def _serve(address: str, queue: str, store_url: str, marks: str, read_only: bool) -> None:
    from temporalio.client import Client

    from helikon.durable import open_store
    from helikon.temporal import TemporalOptions, helikon_worker

    client = await Client.connect(address)
    store = open_store(store_url)
    options = TemporalOptions(tool_heartbeat=2.0)
    agent = slow_agent(Path(marks), read_only=read_only)
    async with helikon_worker(
        client, queue, [agent], store, options=options, sticky_queue_timeout=1.0
    ):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    address, queue, store_url, marks, read_only = sys.argv[1:6]
    asyncio.run(_serve(address, queue, store_url, marks, read_only == "1"))
