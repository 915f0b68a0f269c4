"""The Temporal writing activity's store writes (helikon.temporal.writes), and following a
run's events from the store (helikon.temporal.events), on a real store.

What `write` returns is what its activity reads the run as (the model's conversation, an
input guardrail's items, the listing in the header): it must be what the store reads back,
without the store reading the whole run again after each write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from test_store_conformance import CHART, USAGE, done, header, started

from helikon import Agent, ScriptedModel, ToolCall, tool
from helikon.core.events import RunCompleted, TurnStarted
from helikon.core.items import FinalOutput
from helikon.core.tool_spec import ListedTool
from helikon.durable import RunStore, SqliteRunStore, StoredRun, open_store
from helikon.temporal import AgentRegistry, events
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

    def facts_for(tools: Sequence[ListedTool], chart: str) -> AgentFacts:
        return registry.facts("clerk", chart=chart, listed=tools)

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


class CountedStore(SqliteRunStore):
    """A SQLite store that counts its whole-run reads."""

    loads = 0

    async def load(self, run_id: str) -> StoredRun:
        self.loads += 1
        return await super().load(run_id)


async def test_following_a_run_reads_it_again_only_when_it_changed(tmp_path: Path) -> None:
    with CountedStore(tmp_path / "runs.db") as store:
        lease, head = await store.create(header(), CHART, "a", 30.0, started(), ())
        seen: list[Any] = []

        async def follow() -> None:
            async for event in events(store, "r1", poll=0.02):
                seen.append(event)

        following = asyncio.create_task(follow())
        for _ in range(100):  # until the follower has read the run and waits for more
            await asyncio.sleep(0.02)
            if seen:
                break
        await asyncio.sleep(0.4)  # twenty polls, with nothing written: no read
        assert (store.loads, seen) == (1, [TurnStarted(0)])
        await store.append("r1", lease, done(2), head, (), "completed")
        await asyncio.wait_for(following, 10)
    assert store.loads == 2
    assert seen[-1] == RunCompleted(FinalOutput("Sent.", None, USAGE), USAGE)
