"""An agent run as a tool when its caller stops while it runs: the caller cancelled, its
timeout passing, or a fatal call failing the batch. The nested run ends through its chart
(`Failed(Cancelled(reason))`, `Failed(TimedOut)`), its end stored, before the call is cut
short; the caller's input is its own stop, landed on what the nested run spent
(helikon.run.subagent). In process, on a SQLite store; tests/test_runtime_parity_stops.py
compares the same stops with the Temporal runtime.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from driver_support import drain, ends_once

from helikon import (
    Agent,
    Cancelled,
    FatalToolError,
    RunConfig,
    RunFailed,
    ScriptedModel,
    ScriptedTurn,
    TimedOut,
    ToolCall,
    Usage,
    tool,
)
from helikon.core.state import Cancel, Fail
from helikon.durable import SqliteRunStore

NESTED = "root/2:h1"
"""The nested run's id: the root's run id, the step that asked for the call, its call id."""


def usage(tokens: int) -> Usage:
    return Usage(input_tokens=tokens, output_tokens=tokens, total_tokens=2 * tokens, requests=1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteRunStore]:
    with SqliteRunStore(tmp_path / "runs.db") as opened:
        yield opened


class Stall:
    """A tool of the nested run that waits forever; `started` is set once it runs."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

        @tool
        async def stall() -> str:
            """Wait forever."""
            self.started.set()
            await asyncio.Event().wait()
            return "unreachable"

        self.tool = stall


def boss(stall: Stall, *others: Any, **config: Any) -> Agent:
    """A boss whose one turn (spending 5) asks a helper as a tool, beside a call of each
    of `others`; the helper spends 20 on a call of `stall`."""
    helper_turn = ScriptedTurn([ToolCall("s1", "stall", "{}")], usage(20))
    helper = Agent("helper", ScriptedModel([helper_turn]), tools=[stall.tool])
    calls = [
        ToolCall("h1", "helper", '{"input": "x"}'),
        *(ToolCall(f"{other.name}1", other.name, "{}") for other in others),
    ]
    return Agent(
        "boss",
        ScriptedModel([ScriptedTurn(calls, usage(5)), "never"]),
        tools=[helper.as_tool(), *others],
        config=RunConfig(**config),
    )


def last_input(store: SqliteRunStore, run_id: str) -> Any:
    return store.get(run_id).records[-1].input


def ended(store: SqliteRunStore, run_id: str) -> tuple[str, str | None, Any]:
    """(status, lease owner, error) of a stored run, from its run line and its last record."""
    stored = store.get(run_id)
    return stored.info.status, stored.info.lease_owner, stored.records[-1].state_after.error


async def test_a_cancelled_caller_leaves_its_agent_tool_run_ended_in_the_store(
    store: SqliteRunStore,
) -> None:
    stall = Stall()
    before = asyncio.all_tasks()
    streaming = boss(stall).run("go", store=store, run_id="root")
    running = asyncio.create_task(drain(streaming))
    await stall.started.wait()
    streaming.cancel("enough")
    events = await running

    assert ends_once(events, RunFailed).error == Cancelled("enough")
    # The caller's input: its own stop, the call cut short, what the helper spent counted.
    assert last_input(store, "root") == Cancel("enough", (), usage(20))
    assert streaming.run is not None and streaming.run.usage == usage(5) + usage(20)
    # The helper took the same stop as its input and ended, its end stored, its lease let go.
    assert last_input(store, NESTED) == Cancel("enough")
    assert ended(store, NESTED) == ("failed", None, Cancelled("enough"))
    assert store.get(NESTED).records[-1].state_after.usage == usage(20)
    assert asyncio.all_tasks() == before


async def test_a_timed_out_caller_leaves_its_agent_tool_run_timed_out(
    store: SqliteRunStore,
) -> None:
    stall = Stall()
    events = await drain(boss(stall, timeout=0.5).run("go", store=store, run_id="root"))

    assert ends_once(events, RunFailed).error == TimedOut(0.5)
    assert last_input(store, "root") == Fail(TimedOut(0.5), (), usage(20))
    assert last_input(store, NESTED) == Fail(TimedOut(0.5))
    assert ended(store, NESTED) == ("failed", None, TimedOut(0.5))


async def test_a_fatal_call_of_the_batch_leaves_its_agent_tool_run_cancelled(
    store: SqliteRunStore,
) -> None:
    """The batch's fatal call cancels the helper's call; the caller has no stop of its
    own, so the helper ends `Cancelled("cancelled")`, as a cancel without a reason."""
    stall = Stall()

    @tool
    async def explode() -> str:
        """Fail the run once the helper waits."""
        await stall.started.wait()
        raise FatalToolError("disk on fire")

    events = await drain(boss(stall, explode).run("go", store=store, run_id="root"))

    assert ends_once(events, RunFailed).error.kind == "tool_failed"
    assert ended(store, NESTED) == ("failed", None, Cancelled("cancelled"))
