"""What does building an OpenAI request cost helikon? `python bench/request.py [--quick]`

Prints, from one run on this machine:

1. The time to build helikon's part of a request, the message list (Chat Completions) and
   the input items (Responses API), for a conversation window of 2,000 items, in steady
   state: each measured call follows one more tool turn (a call and its result) appended
   to the conversation, as in a run. The client's own work (validating and JSON-encoding
   the body, HTTP) is not in it. The first build over a window that long (a resumed run's
   first call) is printed beside it.
   Beside them, what the `openai` client's own walk of typed parameters would cost on the
   same lists (each message checked against every message type), which helikon avoids by
   handing the conversation over as `extra_body` (helikon.models.openai_request.as_given).
2. The driver's per-turn cost over a 1,000-turn run with a stand-in model that builds the
   Chat Completions message list on every call, then answers at once with pre-built
   chunks (no HTTP), against the same run with the plain zero-latency model of
   bench/driver.py: first 100 turns, last 100 turns, and their ratio.

Figures are the best of several repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from driver import Executions, ZeroModel, helikon_once

from helikon import Agent, Conversation, RunConfig, ToolCall, ToolResult, UserMessage
from helikon.models.base import ModelChunk, ModelInput
from helikon.models.openai_chat import chat_messages
from helikon.models.openai_responses import responses_input

TARGET_US = 100.0
ITEMS = 2_000
WINDOW = 100


def build_us(build: Callable[[ModelInput], Any], items: int, calls: int) -> tuple[float, float]:
    """(first build over `items` items, best steady-state build near `items` items), in us."""
    conversation = Conversation([UserMessage("go")])
    turn = 0
    while len(conversation) < items - 2 * calls:
        conversation.extend(_turn(turn))
        turn += 1
    clock = time.perf_counter
    start = clock()
    build(_request(conversation))
    first = (clock() - start) * 1e6
    best = float("inf")
    for _ in range(calls):
        conversation.extend(_turn(turn))
        turn += 1
        request = _request(conversation)
        start = clock()
        build(request)
        best = min(best, clock() - start)
    return first, best * 1e6


def _turn(turn: int) -> tuple[ToolCall, ToolResult]:
    call_id = f"call_{turn}"
    return ToolCall(call_id, "echo", '{"x": 1}'), ToolResult(call_id, "echo", "ok")


def _request(conversation: Conversation) -> ModelInput:
    return ModelInput("You are terse.", conversation.window())


class BuildingModel(ZeroModel):
    """`ZeroModel` that first builds the Chat Completions message list, as a real adapter."""

    async def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        chat_messages(request)
        async for chunk in super().stream(request):
            yield chunk


async def per_turn(model: ZeroModel, turns: int, repeat: int) -> tuple[float, float]:
    """Best first-100 and last-100 us per turn of a `turns`-turn run."""
    executions = Executions()
    agent = Agent(
        "bench", model, tools=[executions.echo_tool()], config=RunConfig(max_turns=turns + 5)
    )
    first = last = float("inf")
    for _ in range(repeat):
        gc.collect()
        sample = await helikon_once(agent, executions, turns, 1)
        stamps = sample.stamps
        first = min(first, stamps[WINDOW] - stamps[0])
        last = min(last, stamps[-1] - stamps[-1 - WINDOW])
    return first / WINDOW * 1e6, last / WINDOW * 1e6


def print_client_walk(calls: int) -> None:
    """What `create(messages=...)` would spend walking the list against its types."""
    try:  # private to the client; measured here only to show what extra_body saves
        from openai._utils import async_maybe_transform
        from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
        from openai.types.responses.response_create_params import (
            ResponseCreateParamsStreaming,
        )
    except ImportError:
        return
    conversation = Conversation([UserMessage("go")])
    conversation.extend(item for turn in range(ITEMS // 2) for item in _turn(turn))
    request = _request(conversation)
    for name, body, params in (
        ("chat messages", {"messages": chat_messages(request)}, CompletionCreateParamsStreaming),
        ("responses input", {"input": responses_input(request)}, ResponseCreateParamsStreaming),
    ):
        best = float("inf")
        for _ in range(max(3, calls // 50)):
            start = time.perf_counter()
            asyncio.run(async_maybe_transform(body, params))
            best = min(best, time.perf_counter() - start)
        print(f"  {name:<16} the client's walk of the typed parameter: {best * 1e6:10.1f} us")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    repeat = 2 if args.quick else 5
    calls = 50 if args.quick else 200

    print(f"python {sys.version.split()[0]}; {'quick' if args.quick else 'full'} run\n")
    print(f"building helikon's request at {ITEMS:,} items (the client's encoding excluded):")
    for name, build in (("chat messages", chat_messages), ("responses input", responses_input)):
        build_us(build, 200, 20)  # warm-up
        first, steady = build_us(build, ITEMS, calls)
        verdict = "ok" if steady <= TARGET_US else "ABOVE TARGET"
        print(
            f"  {name:<16} {steady:8.1f} us per call, best of {calls} "
            f"(target <= {TARGET_US:g} us: {verdict}); first build {first:8.1f} us"
        )

    print_client_walk(calls)

    turns = 1_000
    print(f"\ndriver per turn over {turns:,} turns x 1 tool, best of {repeat}:")
    for name, model in (
        ("ZeroModel", ZeroModel(turns, 1)),
        ("builds chat request", BuildingModel(turns, 1)),
    ):
        asyncio.run(per_turn(type(model)(2 * WINDOW, 1), 2 * WINDOW, 1))  # warm-up
        first, last = asyncio.run(per_turn(model, turns, repeat))
        print(
            f"  {name:<20} first {WINDOW}: {first:8.1f} us/turn, last {WINDOW}: "
            f"{last:8.1f} us/turn, ratio {last / first:5.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
