"""A nested run on Temporal takes its root's `RunConfig`, as in process (`CHILD_CONFIG`): the
registry's facts for it, and a run on a real Temporal dev server whose nested agent's tool
the root's policy denies, its history replayed at once with `temporalio.worker.Replayer`.
test_runtime_parity compares such runs with local ones; histories recorded before the patch
(nested runs on their own agents' configs) replay in test_temporal_replay."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from parity_support import WAIT, new_queue, new_run_id
from temporalio.client import Client
from test_temporal_stops import replay_failures

from helikon import Agent, RunConfig, ScriptedModel, ToolCall, tool
from helikon.durable import SqliteRunStore
from helikon.temporal import helikon_worker, outcome, start_run
from helikon.temporal.calls import CHILD_CONFIG
from helikon.temporal.registry import AgentRegistry, UnknownAgent
from helikon.tools import ToolPolicy


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


def manager(config: RunConfig) -> Agent:
    """A manager (with `config`) that asks a researcher (of the default config) as a tool;
    the researcher measures with a tool of its own, then answers."""

    @tool(read_only=True)
    def measure() -> str:
        """Measure."""
        return "42 km"

    answers = [[ToolCall("m1", "measure", "{}")], "42 km"]
    researcher = Agent("researcher", ScriptedModel(answers), tools=[measure])
    script = [[ToolCall("a1", "researcher", '{"input": "how far?"}')], "42 km, they say."]
    return Agent("manager", ScriptedModel(script), tools=[researcher.as_tool()], config=config)


def test_the_facts_of_a_nested_run_take_its_roots_config() -> None:
    config = RunConfig(max_turns=3, tool_policy=ToolPolicy(deny={"measure"}))
    registry = AgentRegistry([manager(config)])
    own = registry.facts("researcher")
    rooted = registry.facts("researcher", 50, config_of="manager")
    assert own.config == RunConfig()
    assert rooted.config == RunConfig(
        max_turns=3, tool_policy=ToolPolicy(deny={"measure"}), token_budget=50
    )
    assert rooted.ctx.max_turns == 3 and own.ctx.max_turns == 16
    with pytest.raises(UnknownAgent, match="no agent 'nobody'"):
        registry.facts("researcher", config_of="nobody")


async def test_a_nested_run_takes_its_roots_policy_and_the_history_replays(
    client: Client, tmp_path: Path
) -> None:
    agent = manager(RunConfig(tool_policy=ToolPolicy(deny={"measure"})))
    run_id, queue = new_run_id(), new_queue()
    with SqliteRunStore(tmp_path / "runs.db", key=b"c" * 32) as store:
        async with helikon_worker(client, queue, [agent], store):
            handle = await start_run(client, agent, "how far?", task_queue=queue, run_id=run_id)
            ended = await asyncio.wait_for(outcome(handle), WAIT)
        nested = store.get(f"{run_id}/2:a1")
    assert ended.state.phase == "Done"
    denied = [e for r in nested.records for e in r.events if e.type == "permission_denied"]
    assert [(e.tool, e.reason) for e in denied] == [("measure", "policy")]  # type: ignore[attr-defined]
    child = client.get_workflow_handle(f"{run_id}/2:a1")
    assert await replay_failures([handle, child], queue, agent, CHILD_CONFIG) == []
