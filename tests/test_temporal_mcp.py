"""Agents with MCP servers on a real Temporal dev server: the listing is an activity run once
as a run starts, its `ListedTool`s are in the workflow's history and the run store's header,
and tool calls go through the worker's own connected server (tests/mcp_server.py, or the
hostile one, as stdio subprocesses the worker starts).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")
pytest.importorskip("mcp")

from mcp_support import hostile
from temporal_agents import station_agent
from temporalio.client import Client

from helikon import Agent, ScriptedModel, ToolCall
from helikon.core import ToolsUnavailable
from helikon.debug import Debugger
from helikon.durable import SqliteRunStore
from helikon.durable.as_trace import stored_trace, trace_lines
from helikon.temporal import TemporalOptions, decide, events, helikon_worker, outcome, start_run
from helikon.trace import TraceHeader

WAIT = 60.0
KEY = b"temporal-mcp-tests-key-0123456789"
DELTAS = {"token_delta", "tool_call_delta", "reasoning_delta"}
WIPE = ToolCall("w1", "wipe", '{"path": "a.txt"}')


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with SqliteRunStore(tmp_path / "runs.db", key=KEY) as opened:
        yield opened


@pytest.fixture
def run_id() -> str:
    return f"r-{uuid.uuid4().hex[:12]}"


def queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


def server_of(agent: Agent) -> Any:
    (server,) = agent.mcp_servers
    return server


async def local_run(agent: Agent, text: str, run_id: str, store: Any) -> list[Any]:
    """The events a local durable run of `agent` streams, its server connected around it."""
    async with server_of(agent):
        streamed = [e async for e in agent.run(text, run_id=run_id, store=store)]
    return [e for e in streamed if e.type not in DELTAS]


async def until_suspended(store: Any, run_id: str) -> list[Any]:
    return [e async for e in events(store, run_id)]


async def test_a_run_lists_its_mcp_tools_once_and_calls_them_through_the_worker(
    client: Client, store: Any, run_id: str, tmp_path: Path
) -> None:
    q = queue()
    served = station_agent()
    async with helikon_worker(client, q, [served], store):
        assert server_of(served).connected  # the worker connected it, for its life
        handle = await start_run(client, station_agent(), "2+3?", task_queue=q, run_id=run_id)
        ended = await asyncio.wait_for(outcome(handle), WAIT)
        history = await handle.fetch_history()
    assert not server_of(served).connected
    assert ended.state.phase == "Done" and ended.output is not None
    assert ended.output.text == "It is 5."

    scheduled = [
        (e.activity_task_scheduled_event_attributes.activity_type.name,
         e.activity_task_scheduled_event_attributes.activity_id)
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]  # fmt: skip
    assert scheduled[0] == ("helikon_list", "0:list")
    assert [name for name, _ in scheduled].count("helikon_list") == 1
    assert ("helikon_tool", "2:a1") in scheduled

    stored = store.get(run_id)
    tools = stored.header.tools
    assert [(t.source, t.spec.name, t.needs_approval, t.read_only) for t in tools] == [
        ("station", "add", False, False),
        ("station", "wipe", True, False),
    ]
    offered = [spec.name for spec in served.model.requests[0].tools]  # type: ignore[attr-defined]
    assert offered == ["add", "wipe"]

    # What a local durable run of the same agent streams and stores, to the tool-set digest.
    with SqliteRunStore(tmp_path / "local.db", key=KEY) as local:
        streamed = await local_run(station_agent(), "2+3?", run_id, local)
        assert local.get(run_id).header.toolset_digest == stored.header.toolset_digest
        assert local.get(run_id).header.tools == tools
    assert list(store.events(run_id)) == streamed
    (result,) = [e.item for e in streamed if e.type == "tool_output_item"]
    assert (result.content, result.is_error) == ("5", False)

    header = trace_lines(store, run_id)[0]  # what export, the debugger and the studio read
    assert isinstance(header, TraceHeader) and header.tools == tools
    never_connected = station_agent()
    debugger = Debugger.replay(stored_trace(store, run_id), never_connected)
    steps = []
    while (step := await debugger.step()) is not None:
        steps.append(step)
    assert steps and [step.divergence for step in steps] == [None] * len(steps)
    assert debugger.state.phase == "Done"
    assert not server_of(never_connected).connected


async def test_a_listing_that_fails_fails_the_run_with_one_terminal_event(
    client: Client, store: Any, run_id: str, tmp_path: Path
) -> None:
    def broken() -> Agent:
        return Agent("paged", ScriptedModel(["never"]), mcp_servers=[hostile("circle", name="h")])

    q = queue()
    served = broken()
    async with helikon_worker(client, q, [served], store):
        handle = await start_run(client, broken(), "hi", task_queue=q, run_id=run_id)
        ended = await asyncio.wait_for(outcome(handle), WAIT)
    state: Any = ended.state
    assert state.phase == "Failed"
    assert isinstance(state.error, ToolsUnavailable) and state.error.source == "h"
    assert "pages in a circle" in state.error.message
    assert served.model.requests == []  # type: ignore[attr-defined]

    stored_events = list(store.events(run_id))
    assert [e.type for e in stored_events] == ["run_started", "run_failed"]
    assert store.get(run_id).info.status == "failed"
    with SqliteRunStore(tmp_path / "local.db", key=KEY) as local:
        assert stored_events == await local_run(broken(), "hi", run_id, local)


async def test_an_approved_mcp_call_runs_on_a_worker_whose_server_lost_it_as_an_error(
    client: Client, store: Any, run_id: str
) -> None:
    """The run lists add and wipe on one worker and suspends at wipe (no hints: it may
    destroy); the approved call runs on another worker, whose server offers add only."""
    script: list[Any] = [[WIPE], "gave up"]
    q = queue()
    first = station_agent(script=script)
    async with helikon_worker(client, q, [first], store, sticky_queue_timeout=1.0):
        handle = await start_run(
            client, station_agent(script=script), "clean up", task_queue=q, run_id=run_id
        )
        seen = [e async for e in events(store, run_id)]
    assert seen[-1].type == "run_suspended"
    (request,) = store.pending(run_id)
    assert request.call.name == "wipe"

    second = station_agent("add", script=script)
    async with helikon_worker(client, q, [second], store, sticky_queue_timeout=1.0):
        await decide(handle, [request.approve()])
        ended = await asyncio.wait_for(outcome(handle), WAIT)
    assert ended.output is not None and ended.output.text == "gave up"
    (wiped,) = [e.item for e in store.events(run_id) if e.type == "tool_output_item"]
    assert wiped.is_error
    assert "no longer offers it as it did when this run started" in wiped.content
    assert [t.spec.name for t in store.get(run_id).header.tools] == ["add", "wipe"]


async def test_an_approved_mcp_call_on_a_worker_whose_server_cannot_list_fails_the_run(
    client: Client, store: Any, run_id: str
) -> None:
    """The second worker's source of the same name pages in a circle: the call cannot be
    bound to any tool there, which fails the run as a dead connection does locally."""
    script: list[Any] = [[WIPE], "never"]
    q = queue()
    async with helikon_worker(
        client, q, [station_agent(script=script)], store, sticky_queue_timeout=1.0
    ):
        handle = await start_run(
            client, station_agent(script=script), "clean up", task_queue=q, run_id=run_id
        )
        _ = [e async for e in events(store, run_id)]
    (request,) = store.pending(run_id)

    lost = Agent("station", ScriptedModel(script), mcp_servers=[hostile("circle", name="station")])
    async with helikon_worker(client, q, [lost], store, sticky_queue_timeout=1.0):
        await decide(handle, [request.approve()])
        ended = await asyncio.wait_for(outcome(handle), WAIT)
    state: Any = ended.state
    assert state.phase == "Failed" and state.error.kind == "tool_failed"
    assert "tool source 'station' cannot list its tools on this worker" in state.error.message
    terminal = [e.type for e in store.events(run_id) if e.type in ("run_completed", "run_failed")]
    assert terminal == ["run_failed"]


async def test_a_nested_run_whose_agent_has_a_server_lists_it_in_its_own_workflow(
    client: Client, store: Any, run_id: str
) -> None:
    """An agent as a tool is a child workflow: it lists its own sources as it starts, and
    its run in the store records them; the parent, which has none, lists nothing."""

    def manager() -> Agent:
        calc = station_agent("add")
        script = [[ToolCall("m1", "station", '{"input": "2+3?"}')], "5, says the station."]
        return Agent("manager", ScriptedModel(script), tools=[calc.as_tool()])

    q = queue()
    async with helikon_worker(client, q, [manager()], store):
        handle = await start_run(client, manager(), "2+3?", task_queue=q, run_id=run_id)
        ended = await asyncio.wait_for(outcome(handle), WAIT)
        parent_history = await handle.fetch_history()
    assert ended.output is not None and ended.output.text == "5, says the station."
    names = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in parent_history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert "helikon_list" not in names
    assert store.get(run_id).header.tools == ()
    nested = store.get(f"{run_id}/2:m1")
    assert [(t.source, t.spec.name) for t in nested.header.tools] == [("station", "add")]
    (result,) = [e.item for e in store.events(f"{run_id}/2:m1") if e.type == "tool_output_item"]
    assert result.content == "5"


async def test_a_run_that_continues_as_new_takes_its_tools_from_the_store_and_lists_no_more(
    client: Client, store: Any, run_id: str, tmp_path: Path
) -> None:
    """Two adds, then a wipe after the run continued as new: the new workflow asks for
    approval of wipe because it took the listed tools from the store (without them it
    would not know wipe needs approval, and its records would diverge from the writer's)."""
    add = '{"a": 2, "b": 3}'
    script: list[Any] = [
        [ToolCall("a1", "add", add)],
        [ToolCall("a2", "add", add)],
        [WIPE],
        "5 twice, and wiped.",
    ]
    q = queue()
    options = TemporalOptions(continue_after_events=12)
    served = station_agent(script=script)
    async with helikon_worker(client, q, [served], store, options=options):
        await start_run(
            client, station_agent(script=script), "2+3 twice?", task_queue=q, run_id=run_id
        )
        seen = await asyncio.wait_for(until_suspended(store, run_id), WAIT)
        assert seen[-1].type == "run_suspended"
        (request,) = store.pending(run_id)
        assert request.call.name == "wipe"
        handle = client.get_workflow_handle(run_id)
        await decide(handle, [request.approve()])
        ended = await asyncio.wait_for(outcome(handle), WAIT)
        latest = await handle.describe()
        history = await handle.fetch_history()  # the last run's
    assert ended.output is not None and ended.output.text == "5 twice, and wiped."
    assert latest.run_id != handle.first_execution_run_id  # it continued as new
    names = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert "helikon_list" not in names and "helikon_head" in names
    results = [e.item for e in store.events(run_id) if e.type == "tool_output_item"]
    assert [(r.content, r.is_error) for r in results] == [
        ("5", False),
        ("5", False),
        ("wiped a.txt", False),
    ]


@pytest.mark.parametrize(("trust_hints", "attempts"), [(False, 1), (True, 5)])
async def test_an_mcp_call_is_retried_only_when_its_read_only_hint_is_trusted(
    client: Client, store: Any, run_id: str, trust_hints: bool, attempts: int
) -> None:
    """add says readOnlyHint: its call may be tried again after a lost worker only when the
    server's hints are trusted (`TemporalOptions.rerun_attempts` is 5)."""
    q = queue()
    async with helikon_worker(client, q, [station_agent(trust_hints=trust_hints)], store):
        handle = await start_run(client, station_agent(), "2+3?", task_queue=q, run_id=run_id)
        await asyncio.wait_for(outcome(handle), WAIT)
        history = await handle.fetch_history()
    (tool,) = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "helikon_tool"
    ]
    assert tool.retry_policy.maximum_attempts == attempts
    (add,) = [t for t in store.get(run_id).header.tools if t.spec.name == "add"]
    assert add.read_only is trust_hints
