"""The same zero-latency agent loop in other frameworks, for `bench/driver.py`.

Each peer runs the work helikon's bench runs: `turns` model turns, each asking for `width`
calls of one trivial async tool (`echo(x: int) -> "ok"`, its arguments validated by the
framework), then one final text turn answering "done". The model is a canned double written
against the framework's own model interface, with no I/O and no sleeping:

- OpenAI Agents SDK: a `Model` subclass whose `get_response` returns a `ModelResponse`;
  run with `Runner.run` (not streamed), tracing disabled.
- pydantic-ai: `FunctionModel` over an async function (a sync one would hop to a thread);
  run with `Agent.run` (not streamed), `UsageLimits(request_limit=...)` raised.
- LangGraph: the ReAct graph written out (`StateGraph(MessagesState)`, an agent node calling
  a `BaseChatModel` subclass, `ToolNode`, `tools_condition`); run with `ainvoke`.

A run returns a `Sample`: its wall time, the time of each model call (one per turn), how many
tool calls the framework reported in its result, and the time spent inside the model double.
A missing package makes `available()` return the reason instead of raising.
"""

from __future__ import annotations

import functools
import importlib.util
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

FINAL_TEXT = "done"
ARGUMENTS = '{"x": 1}'


@dataclass
class Sample:
    """One timed run."""

    seconds: float
    stamps: list[float]  # perf_counter at the start of each turn (model call or TurnStarted)
    tool_calls: int  # tool results the framework's own result reports
    executed: int  # times the tool function actually ran
    model_seconds: float = 0.0  # spent inside the model double itself


@dataclass
class Counter:
    """Counts tool executions and model time for one run."""

    tool_runs: int = 0
    model_seconds: float = 0.0
    stamps: list[float] = field(default_factory=list)


RunOnce = Callable[[int, int], Awaitable[Sample]]


@dataclass(frozen=True)
class Peer:
    name: str
    packages: tuple[str, ...]  # the distributions `pip install` names
    modules: tuple[str, ...]  # modules whose presence means the peer can run
    build: Callable[[], RunOnce]

    def available(self) -> str | None:
        """None when the peer can run, else why not."""
        for module in self.modules:
            if importlib.util.find_spec(module) is None:
                return f"not installed (pip install {' '.join(self.packages)})"
        return None

    def versions(self) -> str:
        return ", ".join(f"{name} {version(name)}" for name in self.packages)


def check(name: str, sample: Sample, turns: int, width: int, final: Any) -> Sample:
    """Refuse a run that did not do the work: every call executed, the final answer given."""
    expected = turns * width
    if sample.tool_calls != expected or sample.executed != expected:
        raise AssertionError(
            f"{name}: expected {expected} tool calls, the result reports {sample.tool_calls} "
            f"and the tool ran {sample.executed} times"
        )
    if final != FINAL_TEXT:
        raise AssertionError(f"{name}: final output {final!r}, expected {FINAL_TEXT!r}")
    if len(sample.stamps) != turns + 1:
        raise AssertionError(f"{name}: {len(sample.stamps)} model calls, expected {turns + 1}")
    return sample


# ---------------------------------------------------------------- OpenAI Agents SDK


def openai_agents() -> RunOnce:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.testing import assistant_message, function_call
    from agents.usage import Usage

    class ZeroModel(Model):
        def __init__(self, turns: int, width: int, counter: Counter) -> None:
            self.turns, self.width, self.counter = turns, width, counter

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            start = time.perf_counter()
            turn = len(self.counter.stamps)
            self.counter.stamps.append(start)
            if turn < self.turns:
                output = [
                    function_call("echo", ARGUMENTS, call_id=f"call_{turn}_{j}")
                    for j in range(self.width)
                ]
            else:
                output = [assistant_message(FINAL_TEXT)]
            usage = Usage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2)
            response = ModelResponse(output=output, usage=usage, response_id=None)
            self.counter.model_seconds += time.perf_counter() - start
            return response

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the bench runs Runner.run, not streamed")

    async def run_once(turns: int, width: int) -> Sample:
        counter = Counter()

        @function_tool
        async def echo(x: int) -> str:
            """Echo a constant."""
            counter.tool_runs += 1
            return "ok"

        agent = Agent(name="bench", model=ZeroModel(turns, width, counter), tools=[echo])
        config = RunConfig(tracing_disabled=True)
        start = time.perf_counter()
        result = await Runner.run(agent, "go", max_turns=turns + 5, run_config=config)
        seconds = time.perf_counter() - start
        outputs = sum(1 for item in result.new_items if item.type == "tool_call_output_item")
        sample = Sample(seconds, counter.stamps, outputs, counter.tool_runs, counter.model_seconds)
        return check("openai-agents", sample, turns, width, result.final_output)

    return run_once


# ---------------------------------------------------------------- pydantic-ai


def pydantic_ai() -> RunOnce:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    async def run_once(turns: int, width: int) -> Sample:
        counter = Counter()

        async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            start = time.perf_counter()
            turn = len(counter.stamps)
            counter.stamps.append(start)
            if turn < turns:
                parts: list[Any] = [
                    ToolCallPart("echo", ARGUMENTS, tool_call_id=f"call_{turn}_{j}")
                    for j in range(width)
                ]
            else:
                parts = [TextPart(FINAL_TEXT)]
            response = ModelResponse(parts=parts)
            counter.model_seconds += time.perf_counter() - start
            return response

        async def echo(x: int) -> str:
            """Echo a constant."""
            counter.tool_runs += 1
            return "ok"

        agent = Agent(FunctionModel(model), tools=[echo])
        limits = UsageLimits(request_limit=turns + 5)
        start = time.perf_counter()
        result = await agent.run("go", usage_limits=limits)
        seconds = time.perf_counter() - start
        returns = sum(
            1
            for message in result.all_messages()
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        )
        sample = Sample(seconds, counter.stamps, returns, counter.tool_runs, counter.model_seconds)
        return check("pydantic-ai", sample, turns, width, result.output)

    return run_once


# ---------------------------------------------------------------- LangGraph


@functools.cache
def _zero_chat_model() -> type[Any]:
    """LangGraph's model double: a `BaseChatModel` answering from the turn it counts."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ZeroChatModel(BaseChatModel):
        turns: int
        width: int
        counter: Counter

        @property
        def _llm_type(self) -> str:
            return "zero-latency"

        def _reply(self) -> ChatResult:
            start = time.perf_counter()
            turn = len(self.counter.stamps)
            self.counter.stamps.append(start)
            if turn < self.turns:
                calls: list[Any] = [
                    {
                        "name": "echo",
                        "args": {"x": 1},
                        "id": f"call_{turn}_{j}",
                        "type": "tool_call",
                    }
                    for j in range(self.width)
                ]
                message = AIMessage(content="", tool_calls=calls)
            else:
                message = AIMessage(content=FINAL_TEXT)
            result = ChatResult(generations=[ChatGeneration(message=message)])
            self.counter.model_seconds += time.perf_counter() - start
            return result

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            return self._reply()

        async def _agenerate(
            self, messages: list[BaseMessage], *args: Any, **kwargs: Any
        ) -> ChatResult:
            return self._reply()

    return ZeroChatModel


def langgraph_graph(turns: int, width: int, counter: Counter, *, sync: bool = False) -> Any:
    """The ReAct graph, uncompiled: an agent node calling the model double, a `ToolNode`
    over `echo`, `tools_condition` between them. `sync`: a sync node and tool, for
    `invoke` (bench/durable.py: LangGraph's `SqliteSaver` has no async methods)."""
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    model = _zero_chat_model()(turns=turns, width=width, counter=counter)
    if sync:

        @tool
        def echo(x: int) -> str:
            """Echo a constant."""
            counter.tool_runs += 1
            return "ok"

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

    else:

        @tool
        async def echo(x: int) -> str:
            """Echo a constant."""
            counter.tool_runs += 1
            return "ok"

        async def agent(state: MessagesState) -> dict[str, Any]:  # type: ignore[misc]
            return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([echo]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph


def langgraph_sample(
    result: Any, counter: Counter, seconds: float, turns: int, width: int
) -> Sample:
    """A LangGraph run's sample, checked: its ToolMessages, tool runs and final answer."""
    from langchain_core.messages import ToolMessage

    messages = result["messages"]
    results = sum(1 for message in messages if isinstance(message, ToolMessage))
    sample = Sample(seconds, counter.stamps, results, counter.tool_runs, counter.model_seconds)
    return check("langgraph", sample, turns, width, messages[-1].content)


def langgraph() -> RunOnce:
    async def run_once(turns: int, width: int) -> Sample:
        counter = Counter()
        app = langgraph_graph(turns, width, counter).compile()
        config: Any = {"recursion_limit": 2 * turns + 10}
        start = time.perf_counter()
        state: Any = {"messages": [("user", "go")]}
        result = await app.ainvoke(state, config)
        seconds = time.perf_counter() - start
        return langgraph_sample(result, counter, seconds, turns, width)

    return run_once


PEERS = (
    Peer("openai-agents", ("openai-agents",), ("agents",), openai_agents),
    Peer("pydantic-ai", ("pydantic-ai-slim",), ("pydantic_ai",), pydantic_ai),
    Peer(
        "langgraph",
        ("langgraph", "langchain-core"),
        ("langgraph", "langchain_core"),
        langgraph,
    ),
)
