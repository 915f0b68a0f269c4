"""The agent loop of `bench/wire.py`, on real OpenAI adapters, in each framework.

Each runner does one run against the local OpenAI wire server at `base_url`: `turns` model
calls that each ask for `width` calls of one trivial async tool (`echo(x: int) -> "ok"`),
then one that answers "done". The server's replies are planned before each run
(bench/wire.py). Every framework talks to it through the official `openai` client, with the
client's own retries off:

- helikon: `OpenAIModel.chat` (always streamed); the run's event stream consumed.
- bare streamed and bare plain: the same requests made with `AsyncOpenAI` alone, in a plain
  loop (no framework): the floors overheads are measured from. "bare streamed" makes
  helikon's requests (streamed, the conversation in `extra_body`, so the client does not
  walk it against its types); "bare plain" the peers' (not streamed, `messages=` typed).
- OpenAI Agents SDK: `OpenAIChatCompletionsModel` on an `AsyncOpenAI`; `Runner.run`
  (not streamed), tracing disabled.
- pydantic-ai: `OpenAIChatModel` with an `OpenAIProvider` on an `AsyncOpenAI`; `Agent.run`
  (not streamed), `UsageLimits(request_limit=...)` raised.
- LangGraph: the ReAct graph written out over `langchain-openai`'s `ChatOpenAI` with the
  tool bound; `ainvoke` (not streamed).

Agents and clients are built once per framework and reused across runs, as a server would;
the clock covers the run alone. Every framework's `AsyncOpenAI` is given an HTTP client whose
transport stamps each request as it leaves (wall clock and this process's CPU time, after the
framework and the `openai` client have built it), so turns are timed at the same point for
everyone. A runner returns an `Outcome`; bench/wire.py checks the work was done
(`peers.check`).
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

try:  # the HTTP library the installed openai client is built on
    import httpx2 as httpx
except ImportError:  # openai < 3
    import httpx  # type: ignore[no-redef]

MODEL = "gpt-test"
API_KEY = "bench"
ECHO_SCHEMA = {
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
}


@dataclass
class Outcome:
    """One run, as the framework reported it, and as the transport saw it."""

    seconds: float  # wall time
    cpu: float  # this process's CPU time (the server runs in another)
    tool_calls: int  # tool results the framework's own result reports
    executed: int  # times the tool function ran
    final: Any  # the final answer
    stamps: list[float] = field(default_factory=list)  # wall time at each request
    cpu_stamps: list[float] = field(default_factory=list)  # CPU time at each request


RunOnce = Callable[[int, int], Awaitable[Outcome]]


class Stamps(httpx.AsyncBaseTransport):
    """An HTTP transport that stamps each request, then sends it on the real one."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.wall: list[float] = []
        self.cpu: list[float] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.wall.append(time.perf_counter())
        self.cpu.append(time.process_time())
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def http_client(self) -> Any:
        import openai

        return openai.DefaultAsyncHttpxClient(transport=self)


class Clock:
    """Times one run: wall and CPU time, and the transport's stamps of its requests."""

    def __init__(self, stamps: Stamps) -> None:
        self.stamps = stamps

    def start(self) -> None:
        self.stamps.wall.clear()
        self.stamps.cpu.clear()
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def outcome(self, tool_calls: int, executed: int, final: Any) -> Outcome:
        """The run just timed (`start`, `stop`), with what the framework reported."""
        stamps = self.stamps
        wall, cpu = self.wall, self.cpu
        return Outcome(wall, cpu, tool_calls, executed, final, stamps.wall[:], stamps.cpu[:])


@dataclass(frozen=True)
class WirePeer:
    """A framework on the wire: how to build its runner for a server at a base URL."""

    name: str
    packages: tuple[str, ...]  # the distributions `pip install` names
    modules: tuple[str, ...]  # modules whose presence means it can run
    build: Callable[[str], RunOnce]
    streamed: bool  # which bare loop its overhead is measured from
    how: str  # one line: the adapter and the call

    def available(self) -> str | None:
        """None when it can run, else why not."""
        for module in self.modules:
            if importlib.util.find_spec(module) is None:
                return f"not installed (pip install {' '.join(self.packages)})"
        return None

    def versions(self) -> str:
        return ", ".join(f"{name} {version(name)}" for name in self.packages)


class Executions:
    """Counts a tool's executions."""

    def __init__(self) -> None:
        self.count = 0

    async def echo(self, x: int) -> str:
        """Echo a constant."""
        self.count += 1
        return "ok"


def _client(base_url: str, stamps: Stamps) -> Any:
    import openai

    http = stamps.http_client()
    return openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0, http_client=http)


# ---------------------------------------------------------------- helikon


def helikon(base_url: str) -> RunOnce:
    from helikon import Agent, RunCompleted, RunConfig, Tool, ToolOutputItem
    from helikon.models.openai import OpenAIModel

    clock = Clock(Stamps())
    model = OpenAIModel.chat(MODEL, client=_client(base_url, clock.stamps), max_retries=0)
    executions = Executions()
    echo = Tool(executions.echo, name="echo")
    agents: dict[int, Agent] = {}

    async def run_once(turns: int, width: int) -> Outcome:
        agent = agents.get(turns)
        if agent is None:
            config = RunConfig(max_turns=turns + 5)
            agent = agents[turns] = Agent("bench", model, tools=[echo], config=config)
        executions.count = outputs = 0
        final = None
        clock.start()
        async for event in agent.run("go"):
            if type(event) is ToolOutputItem:
                outputs += 1
            elif isinstance(event, RunCompleted):
                final = event.output.text
        clock.stop()
        return clock.outcome(outputs, executions.count, final)

    return run_once


# ---------------------------------------------------------------- the bare loops

BARE_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {"name": "echo", "description": "Echo a constant.", "parameters": ECHO_SCHEMA},
    }
]


async def _streamed_call(client: Any, messages: list[Any]) -> tuple[list[Any], str]:
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=[],
        tools=BARE_TOOLS,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"messages": messages},  # as helikon sends it: not walked by the client
    )
    calls: dict[int, list[str]] = {}  # index -> [id, name, arguments...]
    text: list[str] = []
    async with stream:
        async for chunk in stream:
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                for fragment in delta.tool_calls or ():
                    call = calls.setdefault(fragment.index, [fragment.id or "", ""])
                    if fragment.function is not None:
                        call[1] = fragment.function.name or call[1]
                        call.append(fragment.function.arguments or "")
    return [(c[0], c[1], "".join(c[2:])) for c in calls.values()], "".join(text)


async def _plain_call(client: Any, messages: list[Any]) -> tuple[list[Any], str]:
    response = await client.chat.completions.create(
        model=MODEL, messages=messages, tools=BARE_TOOLS
    )
    message = response.choices[0].message
    calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()]
    return calls, message.content or ""


def bare(streamed: bool) -> Callable[[str], RunOnce]:
    def build(base_url: str) -> RunOnce:
        clock = Clock(Stamps())
        client = _client(base_url, clock.stamps)
        call_model = _streamed_call if streamed else _plain_call
        executions = Executions()

        async def run_once(turns: int, width: int) -> Outcome:
            executions.count = results = 0
            messages: list[Any] = [{"role": "user", "content": "go"}]
            clock.start()
            while True:
                calls, text = await call_model(client, messages)
                if not calls:
                    break
                messages.append(
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                            for i, n, a in calls
                        ],
                    }
                )
                for call_id, _, arguments in calls:
                    output = await executions.echo(**json.loads(arguments))
                    messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
                    results += 1
            clock.stop()
            return clock.outcome(results, executions.count, text)

        return run_once

    return build


# ---------------------------------------------------------------- OpenAI Agents SDK


def openai_agents(base_url: str) -> RunOnce:
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool

    clock = Clock(Stamps())
    model = OpenAIChatCompletionsModel(MODEL, _client(base_url, clock.stamps))
    executions = Executions()

    @function_tool
    async def echo(x: int) -> str:
        """Echo a constant."""
        return await executions.echo(x)

    agent = Agent(name="bench", model=model, tools=[echo])
    config = RunConfig(tracing_disabled=True)

    async def run_once(turns: int, width: int) -> Outcome:
        executions.count = 0
        clock.start()
        result = await Runner.run(agent, "go", max_turns=turns + 5, run_config=config)
        clock.stop()
        outputs = sum(1 for item in result.new_items if item.type == "tool_call_output_item")
        return clock.outcome(outputs, executions.count, result.final_output)

    return run_once


# ---------------------------------------------------------------- pydantic-ai


def pydantic_ai(base_url: str) -> RunOnce:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ToolReturnPart
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    clock = Clock(Stamps())
    provider = OpenAIProvider(openai_client=_client(base_url, clock.stamps))
    executions = Executions()

    async def echo(x: int) -> str:
        """Echo a constant."""
        return await executions.echo(x)

    agent = Agent(OpenAIChatModel(MODEL, provider=provider), tools=[echo])

    async def run_once(turns: int, width: int) -> Outcome:
        executions.count = 0
        limits = UsageLimits(request_limit=turns + 5)
        clock.start()
        result = await agent.run("go", usage_limits=limits)
        clock.stop()
        returns = sum(
            1
            for message in result.all_messages()
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        )
        return clock.outcome(returns, executions.count, result.output)

    return run_once


# ---------------------------------------------------------------- LangGraph


def langgraph(base_url: str) -> RunOnce:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    executions = Executions()

    @tool
    async def echo(x: int) -> str:
        """Echo a constant."""
        return await executions.echo(x)

    clock = Clock(Stamps())
    chat = ChatOpenAI(
        model=MODEL,
        base_url=base_url,
        api_key=API_KEY,
        max_retries=0,
        http_async_client=clock.stamps.http_client(),
    )
    model = chat.bind_tools([echo])

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([echo]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile()

    async def run_once(turns: int, width: int) -> Outcome:
        executions.count = 0
        config: Any = {"recursion_limit": 2 * turns + 10}
        state: Any = {"messages": [("user", "go")]}
        clock.start()
        result = await app.ainvoke(state, config)
        clock.stop()
        messages = result["messages"]
        results = sum(1 for message in messages if isinstance(message, ToolMessage))
        return clock.outcome(results, executions.count, messages[-1].content)

    return run_once


HELIKON = WirePeer(
    "helikon", ("openai",), ("openai",), helikon, True, "OpenAIModel.chat, agent.run (streamed)"
)
BARE = (
    WirePeer(
        "bare streamed",
        ("openai",),
        ("openai",),
        bare(True),
        True,
        "AsyncOpenAI alone, stream=True, messages in extra_body",
    ),
    WirePeer(
        "bare plain",
        ("openai",),
        ("openai",),
        bare(False),
        False,
        "AsyncOpenAI alone, not streamed, messages= typed",
    ),
)
PEERS = (
    WirePeer(
        "openai-agents",
        ("openai-agents",),
        ("agents",),
        openai_agents,
        False,
        "OpenAIChatCompletionsModel, Runner.run",
    ),
    WirePeer(
        "pydantic-ai",
        ("pydantic-ai-slim",),
        ("pydantic_ai",),
        pydantic_ai,
        False,
        "OpenAIChatModel + OpenAIProvider, Agent.run",
    ),
    WirePeer(
        "langgraph",
        ("langgraph", "langchain-openai"),
        ("langgraph", "langchain_openai"),
        langgraph,
        False,
        "ChatOpenAI.bind_tools in a StateGraph, ainvoke",
    ),
)
