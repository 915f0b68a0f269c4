"""An agent as a tool called with arguments its schema refuses, on a real Temporal dev
server: the call's error result is the tool's own schema check (`Tool.invalid_arguments`),
the text a local run gives it, no child workflow starts, and the history, which carries the
`AGENT_TOOL_ARGUMENTS` patch's marker, replays. test_runtime_parity compares such a run with
a local one; histories recorded before the patch replay in test_temporal_replay.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from parity_support import WAIT, new_queue, new_run_id
from temporalio.client import Client
from test_temporal_stops import replay_failures

from helikon import Agent, ScriptedModel, ToolCall
from helikon.durable import SqliteRunStore
from helikon.temporal import helikon_worker, outcome, start_run
from helikon.temporal.calls import AGENT_TOOL_ARGUMENTS


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        ('{"query": "where?"}', "- input: Field required\n- query: Extra inputs are not permitted"),
        ('{"input": "where?", "query": "x"}', "- query: Extra inputs are not permitted"),
        ('{"input": 7}', "- input: Input should be a valid string"),
    ],
)
async def test_bad_arguments_get_the_schema_check_and_the_history_replays(
    client: Client, tmp_path: Path, arguments: str, problems: str
) -> None:
    researcher = Agent("researcher", ScriptedModel(["never"]))
    script = [[ToolCall("a1", "researcher", arguments)], "So says the researcher."]
    agent = Agent("manager", ScriptedModel(script), tools=[researcher.as_tool()])
    run_id, queue = new_run_id(), new_queue()
    with SqliteRunStore(tmp_path / "runs.db", key=b"a" * 32) as store:
        async with helikon_worker(client, queue, [agent], store):
            handle = await start_run(client, agent, "where?", task_queue=queue, run_id=run_id)
            ended = await asyncio.wait_for(outcome(handle), WAIT)
        results = [r.input for r in store.get(run_id).records if r.input.kind == "tool_results"]
        nested = [info.run_id for info in store.runs(include_nested=True) if info.parent_run_id]
    assert ended.state.phase == "Done"
    ((result,),) = [inputs.results for inputs in results]  # type: ignore[attr-defined]
    assert result.content == f"error: invalid arguments for tool 'researcher':\n{problems}"
    assert (result.is_error, result.status) == (True, "errored")
    assert nested == []  # no child workflow ran
    assert await replay_failures([handle], queue, agent, AGENT_TOOL_ARGUMENTS) == []
