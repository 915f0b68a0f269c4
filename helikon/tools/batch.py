"""`execute_batch`: one turn's tool calls, run concurrently, results in the calls' order.

The calls run as tasks of one `asyncio.TaskGroup`, so no call outlives the batch: when a call
raises `FatalToolError` the group cancels the others and the error is re-raised as itself;
when the batch is cancelled the cancellation reaches every call in flight. A call's own
`CancelledError` (one raised while nobody cancelled it) is its error result, as `Tool.invoke`
decides, so it neither escapes nor leaves the call without a result.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from helikon.core.errors import FatalToolError
from helikon.core.items import ToolCall, ToolResult
from helikon.tools.context import ToolContext
from helikon.tools.tool import Tool

ContextFactory = Callable[[ToolCall], ToolContext[Any]]
ResultCallback = Callable[[ToolCall, ToolResult], Awaitable[None]]
StartCallback = Callable[[ToolCall], Awaitable[None]]
Observe = Callable[[ToolCall, Callable[[], Awaitable[ToolResult]]], Awaitable[ToolResult]]


async def execute_batch(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    context_factory: ContextFactory,
    limit: int | None = None,
    *,
    on_start: StartCallback | None = None,
    on_result: ResultCallback | None = None,
    observe: Observe | None = None,
) -> tuple[ToolResult, ...]:
    """Run `calls` concurrently and return one result per call, in the calls' order.

    Args:
        calls: the turn's tool calls.
        tools: the tools the model may call, by name; an unknown name gets an error result
            listing them.
        context_factory: builds the `ToolContext` a call's tool receives.
        limit: at most this many calls in flight; None for no limit.
        on_start: awaited with each call just before it starts (a run store records that
            the call started there).
        on_result: awaited with each call and its result as soon as the call finishes (a
            run store records results there). Both run inside the batch, so an exception
            they raise fails the batch.
        observe: runs each call, given the call and what invokes it, in the task that runs
            the call (a run's OpenTelemetry span is current there while the tool runs).

    Raises:
        FatalToolError: a tool raised it; the calls still in flight were cancelled first.
        ValueError: `limit` is below 1.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1 or None, not {limit!r}")
    if len(calls) == 1:
        # One call needs no task group: awaited in the caller's task, cancellation still
        # reaches it, and a turn saves a task and two loop passes (bench/driver.py).
        return (await _one(calls[0], tools, context_factory, on_start, on_result, observe),)
    gate: asyncio.Semaphore | contextlib.nullcontext[None]
    gate = asyncio.Semaphore(limit) if limit is not None else contextlib.nullcontext()
    results: dict[int, ToolResult] = {}

    failing = False

    async def run(index: int, call: ToolCall) -> None:
        nonlocal failing
        async with gate:
            # A fatal error frees its slot before the group cancels the rest: a queued call
            # woken in that moment must not start.
            if failing:
                return
            if on_start is not None:
                await on_start(call)
            try:
                result = await _invoke(call, tools, context_factory, observe)
            except FatalToolError:
                failing = True
                raise
        results[index] = result
        if on_result is not None:
            await on_result(call, result)

    try:
        async with asyncio.TaskGroup() as group:
            for index, call in enumerate(calls):
                group.create_task(run(index, call), name=f"tool:{call.name}:{call.call_id}")
    except BaseExceptionGroup as failed:
        raise _unwrap(failed) from None
    return tuple(results[index] for index in range(len(calls)))


async def _one(
    call: ToolCall,
    tools: Mapping[str, Tool],
    context_factory: ContextFactory,
    on_start: StartCallback | None,
    on_result: ResultCallback | None,
    observe: Observe | None,
) -> ToolResult:
    if on_start is not None:
        await on_start(call)
    result = await _invoke(call, tools, context_factory, observe)
    if on_result is not None:
        await on_result(call, result)
    return result


async def _invoke(
    call: ToolCall,
    tools: Mapping[str, Tool],
    context_factory: ContextFactory,
    observe: Observe | None = None,
) -> ToolResult:
    if observe is not None:
        return await observe(call, lambda: _invoke(call, tools, context_factory))
    found = tools.get(call.name)
    if found is None:
        available = ", ".join(sorted(tools)) or "(none)"
        content = f"error: unknown tool {call.name!r}; available tools: {available}"
        return ToolResult(call.call_id, content, is_error=True, status="errored")
    return await found.invoke(call, context_factory(call))


def _unwrap(failed: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error a failed batch raises: the first `FatalToolError`, else the lone error."""
    fatal = failed.subgroup(FatalToolError)
    if fatal is not None:
        return _first(fatal)
    return failed.exceptions[0] if len(failed.exceptions) == 1 else failed


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first
