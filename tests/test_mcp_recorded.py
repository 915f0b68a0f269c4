"""The tools a run took from its MCP servers are recorded in its trace and its run store: a
run resumed from the store offers them again, whatever the server lists by then (the
tool-set digest still matches), and a trace replays in the debugger with no server at all.

The server is tests/mcp_server.py in process (the official SDK's server); the store is a
real SQLite file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_server import build

from helikon import Agent, RunSuspended, ScriptedModel, ToolCall
from helikon.core import ListedTool, ToolSpec
from helikon.debug import Debugger
from helikon.durable.as_trace import trace_lines
from helikon.durable.sqlite import SqliteRunStore
from helikon.mcp import MCPServer
from helikon.run import SnapshotMismatch
from helikon.trace import TraceHeader, TraceWriter, read_trace


def station(**options: Any) -> MCPServer:
    """tests/mcp_server.py in process, under one name whatever its options."""
    return MCPServer(server=build(), name="station", **options)


WIPE = ToolCall("w1", "wipe", '{"path": "a.txt"}')
ADD = ToolCall("a1", "add", '{"a": 2, "b": 3}')


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with SqliteRunStore(tmp_path / "runs.db") as opened:
        yield opened


async def suspend(store: Any, run_id: str) -> tuple[ListedTool, ...]:
    """A run whose model adds, then wipes (a tool that needs approval): it suspends there."""
    async with station(tool_filter=["add", "wipe"]) as server:
        agent = Agent("ops", ScriptedModel([[ADD], [WIPE]]), mcp_servers=[server])
        result = await agent.run("clean up", run_id=run_id, store=store).collect()
    assert isinstance(result.events[-1], RunSuspended)
    header = store.get(run_id).header
    return tuple(header.tools)


async def test_the_store_records_the_listed_tools_with_their_source_and_permissions(
    store: Any,
) -> None:
    tools = await suspend(store, "r1")
    assert [(t.source, t.spec.name, t.needs_approval, t.read_only) for t in tools] == [
        ("station", "add", False, False),
        ("station", "wipe", True, False),
    ]
    assert tools[1].spec.parameters["properties"] == {"path": {"title": "Path", "type": "string"}}


async def test_a_resumed_run_offers_what_it_recorded_though_the_server_lists_otherwise(
    store: Any,
) -> None:
    await suspend(store, "r1")
    (request,) = store.pending("r1")
    # The server now offers three tools, not two: the run still offers its two, and its
    # tool-set digest matches (before the record, this was a SnapshotMismatch).
    async with station(tool_filter=["add", "wipe", "notes"]) as server:
        await server.list_tools()
        agent = Agent("ops", ScriptedModel([[ADD], [WIPE], "done"]), mcp_servers=[server])
        resumed = agent.resume("r1", [request.approve()], store=store)
        result = await resumed.collect()
        offered = [spec.name for spec in agent.model.requests[0].tools]
    assert result.final_output == "done"
    assert offered == ["add", "wipe"]
    wiped = [e.item for e in result.events if e.type == "tool_output_item"]
    assert [(r.call_id, r.content, r.is_error) for r in wiped] == [("w1", "wiped a.txt", False)]


async def test_a_recorded_tool_the_server_no_longer_offers_answers_with_an_error(
    store: Any,
) -> None:
    await suspend(store, "r1")
    (request,) = store.pending("r1")
    async with station(tool_filter=["add"]) as server:  # wipe is gone
        await server.list_tools()
        agent = Agent("ops", ScriptedModel([[ADD], [WIPE], "gave up"]), mcp_servers=[server])
        result = await agent.resume("r1", [request.approve()], store=store).collect()
    (wiped,) = [e.item for e in result.events if e.type == "tool_output_item"]
    assert wiped.is_error
    assert "no longer offers it as it did when this run started" in wiped.content
    assert result.final_output == "gave up"


async def test_resuming_with_an_agent_that_lacks_the_source_is_refused(store: Any) -> None:
    await suspend(store, "r1")
    (request,) = store.pending("r1")
    other = MCPServer(server=build(), name="elsewhere")
    agent = Agent("ops", ScriptedModel(["x"]), mcp_servers=[other])
    with pytest.raises(SnapshotMismatch, match="came from tool source 'station'"):
        agent.resume("r1", [request.approve()], store=store)


async def test_a_trace_records_the_tools_and_replays_with_no_server(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    async with station(tool_filter=["add"]) as server:
        agent = Agent("calc", ScriptedModel([[ADD], "5"]), mcp_servers=[server])
        with TraceWriter(path) as writer:
            done = await agent.run("2+3", trace=writer).collect()
    assert done.final_output == "5"
    trace = read_trace(path)
    (recorded,) = trace.header.tools
    assert (recorded.source, recorded.spec.name, recorded.needs_approval) == (
        "station",
        "add",
        False,
    )

    never_connected = station(tool_filter=["add"])
    again = Agent("calc", ScriptedModel([]), mcp_servers=[never_connected])
    debugger = Debugger.replay(trace, again)
    steps = []
    while (step := await debugger.step()) is not None:
        steps.append(step)
    assert len(steps) == len(trace.transitions())
    assert [step.divergence for step in steps] == [None] * len(steps)
    assert debugger.state.phase == "Done"
    assert not never_connected.connected


async def test_a_stored_runs_trace_carries_its_tools(store: Any) -> None:
    recorded = await suspend(store, "r1")
    header = trace_lines(store, "r1")[0]
    assert isinstance(header, TraceHeader)
    assert header.tools == recorded


def test_a_recorded_tool_with_a_schema_that_is_not_one_is_refused_by_a_replay() -> None:
    bad = ListedTool("station", ToolSpec("add", "Add.", {"type": "array"}))
    agent = Agent("calc", ScriptedModel([]), mcp_servers=[station()])
    from helikon.run.driver import Run

    with pytest.raises(ValueError, match="add"):
        Run(agent).take_recorded_tools([bad])
