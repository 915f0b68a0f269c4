"""helikon.tools: schemas from signatures, invoking, batches, permissions.

Concurrency tests are driven by asyncio.Event gates and counters, never by sleeping for time:
`asyncio.sleep(0)` only yields so that every runnable task gets its turn.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from helikon import DEFAULT_TABLE
from helikon.core.context import TransitionCtx
from helikon.core.errors import FatalToolError
from helikon.core.items import ToolCall, ToolResult
from helikon.core.tool_spec import ToolSpec
from helikon.tools import (
    Tool,
    ToolContext,
    ToolPolicy,
    execute_batch,
    output_text,
    tool,
    tools_by_name,
)
from helikon.tools.docstrings import parse_docstring

CONTEXT: ToolContext[Any] = ToolContext("run-1", "call-1", "tester", None)
FACTORY = ToolContext.factory("run-1", "tester", deps={"db": "fake"})


def call(name: str, arguments: str = "{}", call_id: str = "call-1") -> ToolCall:
    return ToolCall(call_id, name, arguments)


async def settle() -> None:
    """Yield until every runnable task has had its turn (scheduling, not timing)."""
    for _ in range(20):
        await asyncio.sleep(0)


# -- schemas -------------------------------------------------------------------------------


class Point(BaseModel):
    """A point on the map."""

    x: int
    y: int = 0


@tool
def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    The sum is exact.

    Args:
        a: the first number.
        b (int): the second
            number, on two lines.

    Returns:
        The sum.
    """
    return a + b


@tool(name="route", description="Plan a route.")
async def plan_route(
    start: Point,
    mode: Literal["walk", "bike"] = "walk",
    stops: list[str] | None = None,
    speed: Annotated[float, Field(description="metres per second", gt=0)] = 1.5,
    note: str | None = None,
) -> list[Point]:
    """Ignored: the description option wins.

    Args:
        start: where the route begins.
        speed: ignored too: the Field's own description wins.
    """
    return [start]


@tool
def ping() -> str:
    return "pong"


@tool
async def whoami(ctx: ToolContext[dict[str, str]], greeting: str) -> str:
    """Say who is calling.

    Args:
        greeting: how to greet.
    """
    return f"{greeting} {ctx.agent} {ctx.run_id} {ctx.call_id} {ctx.deps['db']}"


@tool
def reserved(schema: str, model_config: int, /, title: str = "t") -> str:
    return f"{schema}-{model_config}-{title}"


def test_schema_of_scalars_defaults_and_docstring() -> None:
    assert add.spec == ToolSpec(
        "add",
        "Add two numbers.",
        {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "the first number."},
                "b": {
                    "type": "integer",
                    "default": 2,
                    "description": "the second number, on two lines.",
                },
            },
            "required": ["a"],
            "additionalProperties": False,
        },
    )


def test_schema_of_models_literals_lists_optionals_and_annotated_fields() -> None:
    assert plan_route.name == "route"
    assert plan_route.description == "Plan a route."
    assert plan_route.spec.parameters == {
        "$defs": {
            "Point": {
                "description": "A point on the map.",
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
                "required": ["x"],
            }
        },
        "type": "object",
        "properties": {
            "start": {"$ref": "#/$defs/Point", "description": "where the route begins."},
            "mode": {"type": "string", "enum": ["walk", "bike"], "default": "walk"},
            "stops": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
            },
            "speed": {
                "type": "number",
                "exclusiveMinimum": 0,
                "default": 1.5,
                "description": "metres per second",
            },
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["start"],
        "additionalProperties": False,
    }


def test_schema_of_a_tool_without_parameters() -> None:
    assert ping.spec == ToolSpec(
        "ping",
        "",
        {"type": "object", "properties": {}, "required": [], "additionalProperties": False},
    )


def test_tool_context_is_injected_and_left_out_of_the_schema() -> None:
    assert whoami.spec.parameters == {
        "type": "object",
        "properties": {"greeting": {"type": "string", "description": "how to greet."}},
        "required": ["greeting"],
        "additionalProperties": False,
    }


def test_an_optional_or_annotated_tool_context_is_injected_too() -> None:
    @tool
    def optional(ctx: ToolContext[Any] | None = None) -> str:
        return ""

    @tool
    def annotated(ctx: Annotated[ToolContext[Any], "the run"]) -> str:
        return ""

    assert optional.spec.parameters["properties"] == {}
    assert annotated.spec.parameters["properties"] == {}


async def test_tool_context_reaches_the_tool() -> None:
    context = FACTORY(call("whoami", call_id="c7"))
    result = await whoami.invoke(call("whoami", '{"greeting": "hi"}', "c7"), context)
    assert result == ToolResult("c7", "hi tester run-1 c7 fake")


def test_idempotency_key_is_run_id_seq_and_call_id() -> None:
    context = FACTORY(call("ping", call_id="call-9"))
    assert context.idempotency_key == "run-1:0:call-9"
    assert (context.run_id, context.call_id, context.agent) == ("run-1", "call-9", "tester")
    # A model reusing a call id in a later turn gets another key: the step differs.
    later = ToolContext("run-1", "call-9", "tester", None, seq=5)
    assert later.idempotency_key == "run-1:5:call-9" != context.idempotency_key


async def test_any_parameter_name_works_even_pydantic_reserved_ones() -> None:
    assert reserved.spec.parameters["properties"] == {
        "schema": {"type": "string"},
        "model_config": {"type": "integer"},
        "title": {"type": "string", "default": "t"},
    }
    result = await reserved.invoke(call("reserved", '{"schema": "s", "model_config": 3}'), CONTEXT)
    assert result.content == "s-3-t"


def test_docstring_parsing() -> None:
    doc = parse_docstring(
        """Fetch a page
        from the web.

        Only GET.

        Args:
            url (str): the address.
            retries: how often to retry,
                at most 3.
            **headers: extra headers.

        Raises:
            OSError: never mind.
        """
    )
    assert doc.description == "Fetch a page from the web."
    assert doc.params == {
        "url": "the address.",
        "retries": "how often to retry, at most 3.",
        "headers": "extra headers.",
    }
    assert parse_docstring(None).description == ""


def test_signatures_that_cannot_be_described_are_refused() -> None:
    def variadic(*items: int) -> None: ...

    with pytest.raises(TypeError, match=r"\*args"):
        tool(variadic)
    with pytest.raises(ValueError, match="name"):
        tool(name="has space")(ping.fn)
    with pytest.raises(ValueError, match="timeout"):
        tool(timeout=0)(ping.fn)
    with pytest.raises(ValueError, match="permission"):
        Tool(ping.fn, permission="maybe")  # type: ignore[arg-type]


# -- invoke ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "lines"),
    [
        ('{"a": ', ["- (root): arguments are not valid JSON (Invalid JSON: EOF while parsing"]),
        ("", ["- (root): arguments are not valid JSON"]),
        ("[1, 2]", ["- (root): Input should be an object"]),
        ('{"b": 1}', ["- a: Field required"]),
        (
            '{"a": "one", "b": [], "c": 1}',
            [
                "- a: Input should be a valid integer, unable to parse string as an integer",
                "- b: Input should be a valid integer",
                "- c: Extra inputs are not permitted",
            ],
        ),
    ],
)
async def test_bad_arguments_become_an_error_result_for_the_model(
    arguments: str, lines: list[str]
) -> None:
    result = await add.invoke(call("add", arguments), CONTEXT)
    assert (result.is_error, result.status, result.call_id) == (True, "errored", "call-1")
    header, *rest = result.content.splitlines()
    assert header == "error: invalid arguments for tool 'add':"
    assert len(rest) == len(lines)
    for got, expected in zip(rest, lines, strict=True):
        assert got.startswith(expected)


async def test_nested_field_errors_name_the_path() -> None:
    result = await plan_route.invoke(call("route", '{"start": {"x": "far"}, "speed": 0}'), CONTEXT)
    assert result.content.splitlines()[1:] == [
        "- start.x: Input should be a valid integer, unable to parse string as an integer",
        "- speed: Input should be greater than 0",
    ]


async def test_valid_arguments_are_coerced_and_defaults_filled() -> None:
    result = await plan_route.invoke(call("route", '{"start": {"x": 4}}'), CONTEXT)
    assert result == ToolResult("call-1", '[{"x":4,"y":0}]')


async def test_an_exception_becomes_an_error_result() -> None:
    @tool
    async def explode(reason: str) -> str:
        raise ValueError(reason)

    result = await explode.invoke(call("explode", '{"reason": "boom"}'), CONTEXT)
    assert result == ToolResult("call-1", "error: ValueError: boom", True, "errored")


async def test_fatal_tool_error_propagates_with_a_note_naming_the_call() -> None:
    @tool
    def meltdown() -> str:
        raise FatalToolError("reactor offline")

    with pytest.raises(FatalToolError, match="reactor offline") as raised:
        await meltdown.invoke(call("meltdown", call_id="c3"), CONTEXT)
    assert (raised.value.tool, raised.value.call_id) == ("meltdown", "c3")
    assert raised.value.__notes__ == ["raised by tool 'meltdown' (call 'c3')"]


async def test_sync_tools_run_in_a_worker_thread() -> None:
    @tool
    def where(ctx: ToolContext[Any]) -> int:
        return threading.get_ident()

    result = await where.invoke(call("where"), CONTEXT)
    assert not result.is_error
    assert int(result.content) != threading.get_ident()


@pytest.mark.parametrize(
    ("output", "text"),
    [
        ("plain text", "plain text"),
        (None, ""),
        (Point(x=1), '{"x":1,"y":0}'),
        ({"ok": True, "items": [1, 2]}, '{"ok":true,"items":[1,2]}'),
        ([Point(x=2, y=3)], '[{"x":2,"y":3}]'),
        (42, "42"),
        ("päivää", "päivää"),
    ],
)
def test_return_values_are_serialized_to_text(output: Any, text: str) -> None:
    assert output_text(output) == text


async def test_a_timeout_gives_an_error_result() -> None:
    @tool(timeout=0.01)
    async def hang() -> str:
        await asyncio.Event().wait()
        return "never"

    result = await hang.invoke(call("hang"), CONTEXT)
    assert result == ToolResult(
        "call-1", "error: tool 'hang' timed out after 0.01 seconds", True, "errored"
    )


def test_a_sync_tools_timeout_holds_and_nothing_waits_for_its_thread() -> None:
    """The thread cannot be stopped: it runs on, its result discarded, and the event loop's
    shutdown does not wait for it. Generous bounds: blocks 5 s, timeout 0.5 s, within 2 s."""
    release = threading.Event()

    @tool(timeout=0.5)
    def block() -> str:
        release.wait(5)
        return "late"

    started = time.monotonic()
    try:
        result = asyncio.run(block.invoke(call("block"), CONTEXT))
        elapsed = time.monotonic() - started
    finally:
        release.set()

    assert result.content == "error: tool 'block' timed out after 0.5 seconds"
    assert elapsed < 2, f"returned after {elapsed:.1f} s"


async def test_a_timeout_error_the_tool_raises_itself_is_an_ordinary_error() -> None:
    @tool(timeout=60)
    async def upstream() -> str:
        raise TimeoutError("upstream slow")

    result = await upstream.invoke(call("upstream"), CONTEXT)
    assert result.content == "error: TimeoutError: upstream slow"


async def test_invoke_never_swallows_cancellation() -> None:
    started, seen = asyncio.Event(), []

    @tool
    async def wait() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "never"

    task = asyncio.create_task(wait.invoke(call("wait"), CONTEXT))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]


@tool
async def cancels_itself() -> str:
    """Raise CancelledError without anyone cancelling the call (a bug in the tool)."""
    raise asyncio.CancelledError("upstream future was cancelled")


@tool
def cancels_itself_in_a_thread() -> str:
    """The same from a sync tool, in its worker thread."""
    raise asyncio.CancelledError("thread gave up")


@pytest.mark.parametrize("own", [cancels_itself, cancels_itself_in_a_thread])
async def test_a_cancelled_error_the_tool_raises_itself_is_its_failure(own: Tool) -> None:
    result = await own.invoke(call(own.name), CONTEXT)
    assert result.is_error and result.status == "errored"
    assert result.content.startswith("error: CancelledError: ")


@pytest.mark.parametrize("count", [1, 2])
async def test_a_tools_own_cancelled_error_in_a_batch_is_an_error_result(count: int) -> None:
    calls = [call("cancels_itself", call_id=f"c{n}") for n in range(count)]
    results = await execute_batch(calls, {"cancels_itself": cancels_itself}, FACTORY)
    assert [r.call_id for r in results] == [f"c{n}" for n in range(count)]
    assert all(r.status == "errored" and "CancelledError" in r.content for r in results)


# -- permissions ----------------------------------------------------------------------------


def _limit_over_100(args: dict[str, Any]) -> bool:
    return bool(args["amount"] > 100)


def _broken(args: dict[str, Any]) -> bool:
    raise KeyError("nope")


def _pay_tool(**options: Any) -> Tool:
    def pay(amount: int, to: str = "bob") -> str:
        return f"paid {amount} to {to}"

    return Tool(pay, **options)


@pytest.mark.parametrize(
    ("options", "arguments", "expected"),
    [
        ({}, '{"amount": 5}', "allow"),
        ({"needs_approval": True}, '{"amount": 5}', "ask"),
        ({"needs_approval": _limit_over_100}, '{"amount": 5}', "allow"),
        ({"needs_approval": _limit_over_100}, '{"amount": 500}', "ask"),
        ({"needs_approval": _limit_over_100}, '{"amount": "5"}', "allow"),  # coerced first
        ({"needs_approval": _limit_over_100}, '{"amount": "lots"}', "ask"),  # fails closed
        ({"needs_approval": _limit_over_100}, "not json", "ask"),
        ({"needs_approval": _broken}, '{"amount": 5}', "ask"),
        ({"permission": "ask"}, '{"amount": 5}', "ask"),
        ({"permission": "deny", "needs_approval": True}, '{"amount": 5}', "deny"),
        ({"permission": "deny", "needs_approval": _limit_over_100}, '{"amount": 5}', "deny"),
        ({"permission": "ask", "needs_approval": _limit_over_100}, '{"amount": 5}', "ask"),
    ],
)
def test_permission_for(options: dict[str, Any], arguments: str, expected: str) -> None:
    assert _pay_tool(**options).permission_for(call("pay", arguments)) == expected


def test_policy_combines_the_run_and_each_tool_strictest_wins() -> None:
    @tool(read_only=True)
    def look() -> str:
        return ""

    @tool(needs_approval=True, read_only=True)
    def peek() -> str:
        return ""

    @tool(permission="deny")
    def burn() -> str:
        return ""

    tools = [look, peek, burn, _pay_tool(), ping]
    assert dict(ToolPolicy().permissions(tools)) == {
        "look": "allow",
        "peek": "ask",
        "burn": "deny",
        "pay": "allow",
        "ping": "allow",
    }
    policy = ToolPolicy(ask_for_side_effects=True, deny={"ping"}, ask=["look"])  # type: ignore[arg-type]
    assert policy.deny == frozenset({"ping"})
    assert dict(policy.permissions(tools)) == {
        "look": "ask",
        "peek": "ask",
        "burn": "deny",
        "pay": "ask",
        "ping": "deny",
    }
    assert dict(ToolPolicy(default="deny").permissions([look])) == {"look": "deny"}


def test_call_policy_covers_argument_dependent_approval() -> None:
    pay = _pay_tool(needs_approval=_limit_over_100)
    policy = ToolPolicy()
    assert policy.call_policy([add, ping]) is None
    call_policy = policy.call_policy([add, pay])
    assert call_policy is not None
    assert call_policy(call("add", '{"a": 1}')) is None
    ctx = TransitionCtx(
        table=DEFAULT_TABLE, tools=policy.permissions([add, pay]), call_policy=call_policy
    )
    assert ctx.permission(call("pay", '{"amount": 5}')) == "allow"
    assert ctx.permission(call("pay", '{"amount": 500}')) == "ask"


def test_tools_by_name_refuses_duplicates() -> None:
    assert tools_by_name([add, ping]) == {"add": add, "ping": ping}
    with pytest.raises(ValueError, match="'add'"):
        tools_by_name([add, tool(name="add")(ping.fn)])


# -- execute_batch --------------------------------------------------------------------------


class Probe:
    """Counts calls in flight behind one gate the test opens."""

    def __init__(self, wait_for: int) -> None:
        self.in_flight = 0
        self.peak = 0
        self.cancelled: list[int] = []
        self.release = asyncio.Event()
        self.reached = asyncio.Event()
        self.wait_for = wait_for

    def tool(self) -> Tool:
        @tool
        async def work(n: int) -> int:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            if self.in_flight == self.wait_for:
                self.reached.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.append(n)
                raise
            finally:
                self.in_flight -= 1
            return n

        return work


def work_calls(count: int) -> list[ToolCall]:
    return [call("work", f'{{"n": {n}}}', f"c{n}") for n in range(count)]


@pytest.mark.parametrize(("limit", "peak"), [(1, 1), (2, 2), (3, 3), (None, 5)])
async def test_peak_concurrency_equals_the_limit(limit: int | None, peak: int) -> None:
    probe = Probe(wait_for=peak)
    batch = asyncio.create_task(
        execute_batch(work_calls(5), {"work": probe.tool()}, FACTORY, limit)
    )
    await probe.reached.wait()
    await settle()  # a gate that let too many through would show it now
    assert probe.in_flight == peak
    probe.release.set()
    results = await batch
    assert probe.peak == peak
    assert [result.content for result in results] == ["0", "1", "2", "3", "4"]


async def test_results_keep_the_calls_order_when_later_calls_finish_first() -> None:
    first_may_finish = asyncio.Event()
    finished: list[str] = []

    @tool
    async def slow() -> str:
        await first_may_finish.wait()
        return "slow"

    @tool
    def fast() -> str:
        return "fast"

    async def record(done: ToolCall, result: ToolResult) -> None:
        finished.append(result.content)
        if done.name == "fast":
            first_may_finish.set()

    calls = [call("slow", call_id="a"), call("fast", call_id="b")]
    results = await execute_batch(
        calls, {"slow": slow, "fast": fast}, FACTORY, None, on_result=record
    )
    assert finished == ["fast", "slow"]
    assert results == (ToolResult("a", "slow"), ToolResult("b", "fast"))


async def test_bad_input_in_a_batch_gives_error_results_and_the_rest_run() -> None:
    calls = [call("add", '{"a": 1}', "a"), call("nope", call_id="b"), call("add", "{", "c")]
    results = await execute_batch(calls, {"add": add, "ping": ping}, FACTORY)
    assert results[0] == ToolResult("a", "3")
    assert results[1] == ToolResult(
        "b", "error: unknown tool 'nope'; available tools: add, ping", True, "errored"
    )
    assert results[2].is_error
    assert results[2].content.startswith("error: invalid arguments for tool 'add':")


async def test_fatal_tool_error_cancels_the_siblings_and_is_raised_as_itself() -> None:
    probe = Probe(wait_for=2)

    @tool
    async def fail() -> str:
        await probe.reached.wait()
        raise FatalToolError("disk on fire")

    before = asyncio.all_tasks()
    calls = [*work_calls(2), call("fail", call_id="f"), *work_calls(4)[2:]]
    with pytest.raises(FatalToolError, match="disk on fire") as raised:
        await execute_batch(calls, {"work": probe.tool(), "fail": fail}, FACTORY, limit=3)
    assert (raised.value.tool, raised.value.call_id) == ("fail", "f")
    assert sorted(probe.cancelled) == [0, 1]  # in flight: cancelled; queued (2, 3): never ran
    assert probe.peak == 2
    assert asyncio.all_tasks() == before


async def test_cancelling_the_batch_reaches_every_call_in_flight() -> None:
    probe = Probe(wait_for=3)
    before = asyncio.all_tasks()
    batch = asyncio.create_task(execute_batch(work_calls(3), {"work": probe.tool()}, FACTORY))
    await probe.reached.wait()
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    assert sorted(probe.cancelled) == [0, 1, 2]
    assert probe.in_flight == 0
    assert asyncio.all_tasks() == before


async def test_an_on_result_failure_fails_the_batch_as_itself() -> None:
    async def broken(done: ToolCall, result: ToolResult) -> None:
        raise OSError("store unavailable")

    with pytest.raises(OSError, match="store unavailable"):
        await execute_batch([call("ping")], {"ping": ping}, FACTORY, on_result=broken)


async def test_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        await execute_batch([], {}, FACTORY, limit=0)


async def test_an_empty_batch_returns_no_results() -> None:
    assert await execute_batch([], {}, FACTORY) == ()
