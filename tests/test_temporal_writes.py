"""The Temporal writing activity's store writes (helikon.temporal.writes), on a real store.

What `write` returns is what its activity reads the run as (the model's conversation, an
input guardrail's items, the listing in the header): it must be what the store reads back,
without the store reading the whole run again after each write.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from helikon import Agent, ScriptedModel, ToolCall, tool
from helikon.core.tool_spec import ListedTool
from helikon.durable import RunStore, open_store
from helikon.temporal import AgentRegistry
from helikon.temporal.messages import Step, Writes
from helikon.temporal.registry import AgentFacts
from helikon.temporal.writes import Written, write


def clerk() -> Agent:
    @tool
    def lookup(name: str) -> str:
        """Look a name up."""
        return f"{name} is in room 4"

    calls = [
        ToolCall("c1", "lookup", '{"name": "ann"}'),
        ToolCall("c2", "lookup", '{"name": "bo"}'),
    ]
    return Agent("clerk", ScriptedModel([calls, "Ann is in room 4, Bo too."]), tools=[lookup])


def read_back(store: RunStore, run_id: str) -> Written:
    stored = store.get(run_id)
    return Written(stored.header, stored.records)


async def test_what_write_returns_is_what_the_store_reads_back(tmp_path: Path) -> None:
    agent = clerk()
    with open_store(f"sqlite:///{tmp_path / 'local.db'}") as local:
        await agent.run("where are ann and bo?", store=local, run_id="r1").collect()
        steps = [Step(r.seq, r.input, r.row) for r in local.get("r1").records]
    registry = AgentRegistry([clerk()])

    def facts_for(tools: Sequence[ListedTool]) -> AgentFacts:
        return registry.facts("clerk", listed=tools)

    assert len(steps) == 4  # start, the two calls, their results, the answer
    with open_store(f"sqlite:///{tmp_path / 'temporal.db'}") as store:
        created = await write(
            store, Writes("r1", "clerk", steps=tuple(steps[:2]), create=True), facts_for
        )
        assert created == read_back(store, "r1")
        again = await write(store, Writes("r1", "clerk", steps=tuple(steps[1:3])), facts_for)
        assert again == read_back(store, "r1")  # a step already stored is skipped
        assert len(again.records) == 3
        rest = await write(store, Writes("r1", "clerk", steps=tuple(steps[3:])), facts_for)
        assert rest == read_back(store, "r1")
        assert [r.seq for r in rest.records] == [s.seq for s in steps]
        assert store.get("r1").info.status == "completed"
        assert await write(store, Writes("r1", "clerk"), facts_for) is None
