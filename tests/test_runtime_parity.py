"""Parity of the two runtimes: the same scripted scenarios run by the in-process driver
(`agent.run` / `agent.resume` with a run store) and by the Temporal runtime (a real dev
server, `temporal_address`, shared by the session, and a helikon worker per scenario), each
writing to a store of its own; the event streams and what the two stores hold afterwards
must be the same, but for the normalisations tests/parity_support.py names and explains.

Scenarios: tools (a parallel pair, a limit, denied, erring, fatal), handoffs and agents as
tools (and their depth limit, the child token budget), structured output (repaired,
invalid), guardrails, max turns, compaction, model errors, redaction, approvals (suspend,
decide, resume; inside a nested run), continue-as-new, tool sources (MCP), every chart of
charts/ (custom phases, an effect phase) and failing effects, on SQLite and PostgreSQL
stores. Stops (cancel, timeout) are in tests/test_runtime_parity_stops.py. A scenario whose
runtimes diverge is a finding, marked `diverges(...)` (a strict xfail saying how).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

pytest.importorskip("temporalio")

from parity_support import (
    KEY,
    WAIT,
    Make,
    Stores,
    assert_same,
    assert_streams,
    both,
    diverges,
    drained,
    ended,
    new_queue,
    new_run_id,
    run_locally,
    run_on_temporal,
    sqlite_stores,
)
from store_support import PostgresBackend
from temporal_agents import (
    City,
    budget_manager,
    fatal_agent,
    guarded_agent,
    looping_agent,
    manager_agent,
    payments_agent,
    station_agent,
    structured_agent,
    triage_agent,
    weather_agent,
)
from temporalio.client import Client
from temporalio.service import RPCError

from helikon import (
    Agent,
    EffectContext,
    FatalToolError,
    InputGuardrail,
    RunContext,
    ScriptedModel,
    ToolCall,
    tool,
)
from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.durable import RunStore, SqliteRunStore
from helikon.run.chart_effects import Effect
from helikon.temporal import TemporalOptions, decide, events, helikon_worker, outcome, start_run
from helikon.tools import ToolPolicy


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


@pytest.fixture
def run_id() -> str:
    return new_run_id()


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SqliteRunStore, SqliteRunStore]]:
    with sqlite_stores(tmp_path) as opened:
        yield opened


@pytest.fixture
def postgres_stores(postgres_url: str) -> Iterator[Stores]:
    """(the local run's store, the Temporal run's store), each on a PostgreSQL schema of
    its own."""
    local, temporal = PostgresBackend(postgres_url), PostgresBackend(postgres_url)
    try:
        yield local.open(KEY), temporal.open(KEY)
    finally:
        local.close()
        temporal.close()


# ---------------------------------------------------------------- scenarios


def compacting_agent() -> Agent:
    """A tool result over the compaction threshold: the model summarises (Compacting),
    then answers from the summary."""
    script = [
        [ToolCall("c1", "weather", '{"city": "Oslo"}')],
        "Asked for the weather in Oslo: sunny.",
        "Sunny in Oslo.",
    ]
    return replace(weather_agent(compaction_threshold=1), model=ScriptedModel(script))


def mixed_manager() -> Agent:
    """One turn that asks a researcher agent as a tool and calls a plain tool beside it."""
    manager = manager_agent()
    weather = weather_agent().tools[0]
    script = [
        [
            ToolCall("a1", "researcher", '{"input": "where is Paris?"}'),
            ToolCall("w1", "weather", '{"city": "Paris"}'),
        ],
        "Paris is in France, and sunny.",
    ]
    return replace(manager, model=ScriptedModel(script), tools=[*manager.tools, weather])


def fatal_batch() -> Agent:
    """A batch whose second call fails the run (`FatalToolError`) once the first one has
    finished: the failure keeps the finished call's result."""
    first_done = asyncio.Event()

    @tool(read_only=True)
    async def quick() -> str:
        """Quick."""
        first_done.set()
        return "quick done"

    @tool
    async def launch() -> str:
        """Launch."""
        await first_done.wait()
        await asyncio.sleep(0.2)  # the first call's result lands first on Temporal too
        raise FatalToolError("the launch pad is gone")

    script = [[ToolCall("q1", "quick", "{}"), ToolCall("f1", "launch", "{}")], "Launched."]
    return Agent(name="fatal", model=ScriptedModel(script), tools=[quick, launch])


def erring_agent() -> Agent:
    """A tool that raises (an error result the model reads), then an answer."""

    @tool
    def broken(path: str) -> str:
        """Break.

        Args:
            path: where.
        """
        raise ValueError(f"no such file: {path}")

    script = [[ToolCall("b1", "broken", '{"path": "a.txt"}')], "It is broken."]
    return Agent(name="erring", model=ScriptedModel(script), tools=[broken])


async def test_tools_in_parallel(
    client: Client, stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """One call, then a parallel pair, then an answer."""
    await both(client, stores, run_id, weather_agent, "weather?")
    assert ended(stores[0], run_id) == "Done"
    assert_same(*stores)


@pytest.mark.parametrize(
    ("make", "text", "ends"),
    [
        pytest.param(triage_agent, "my bill?", "Done", id="handoff"),
        pytest.param(
            lambda: triage_agent(max_agent_depth=0),
            "bill?",
            "max_agent_depth_exceeded",
            id="handoff-too-deep",
        ),
        pytest.param(manager_agent, "where is Paris?", "Done", id="agent-as-tool"),
        pytest.param(
            lambda: manager_agent(max_agent_depth=0),
            "where?",
            "max_agent_depth_exceeded",
            id="agent-as-tool-too-deep",
        ),
        pytest.param(
            lambda: budget_manager(100), "how far?", "budget_exceeded", id="child-token-budget"
        ),
        pytest.param(structured_agent, "a city", "Done", id="structured-output-repaired"),
        pytest.param(
            lambda: guarded_agent("fine"),
            "something forbidden",
            "guardrail_tripped",
            id="input-guardrail",
        ),
        pytest.param(
            lambda: guarded_agent("a secret"), "hello", "guardrail_tripped", id="output-guardrail"
        ),
        pytest.param(lambda: guarded_agent("fine"), "hello", "Done", id="guardrails-pass"),
        pytest.param(fatal_agent, "launch", "tool_failed", id="fatal-tool-error"),
        pytest.param(fatal_batch, "launch", "tool_failed", id="fatal-tool-error-in-a-batch"),
        pytest.param(mixed_manager, "where is Paris?", "Done", id="agent-and-tool-in-a-batch"),
        pytest.param(lambda: looping_agent(2), "ping", "max_turns_exceeded", id="max-turns"),
        pytest.param(
            lambda: weather_agent(parallel_tool_call_limit=1),
            "weather?",
            "Done",
            id="parallel-limit",
        ),
        pytest.param(
            lambda: weather_agent(tool_policy=ToolPolicy(deny={"weather"})),
            "weather?",
            "Done",
            id="tool-denied",
        ),
        pytest.param(compacting_agent, "weather?", "Done", id="compaction"),
        pytest.param(
            lambda: weather_agent(redact=lambda text: text.replace("Oslo", "[city]")),
            "weather in Oslo?",
            "Done",
            id="redacted",
            marks=diverges(
                "RunConfig.redact is not applied on Temporal: its store holds the input, "
                "the tool call's arguments and its result as they are ('Oslo'), where a "
                "local run's store holds them redacted ('[city]')"
            ),
        ),
        pytest.param(erring_agent, "go", "Done", id="tool-error"),
        pytest.param(
            lambda: Agent(name="mute", model=ScriptedModel([])),
            "hello?",
            "model_call_failed",
            id="model-error",
        ),
        pytest.param(
            lambda: Agent(
                name="structured",
                model=ScriptedModel(['{"name": "Oslo"}', "not even JSON"]),
                output_type=City,
            ),
            "a city",
            "invalid_structured_output",
            id="structured-output-invalid",
        ),
    ],
)
async def test_a_run_to_its_end(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    make: Make,
    text: str,
    ends: str,
) -> None:
    """`ends`: the phase the run ends in when it completes, else its error's kind."""
    await both(client, stores, run_id, make, text)
    assert ended(stores[0], run_id) == ends
    assert_same(*stores)


def approval_agent() -> Agent:
    """Three calls in one turn, two transfers that need approval around a balance lookup
    that does not, then an answer."""

    @tool(needs_approval=True)
    def transfer(amount: int) -> str:
        """Move money.

        Args:
            amount: how much.
        """
        return f"moved {amount}"

    @tool(read_only=True)
    def balance() -> str:
        """The balance."""
        return "1200 EUR"

    script = [
        [
            ToolCall("t1", "transfer", '{"amount": 500}'),
            ToolCall("b1", "balance", "{}"),
            ToolCall("t2", "transfer", '{"amount": 70}'),
        ],
        "Done.",
    ]
    return Agent(name="payments", model=ScriptedModel(script), tools=[transfer, balance])


Decide = Callable[[tuple[ApprovalRequest, ...]], list[ApprovalDecision]]


@pytest.mark.parametrize(
    "decide_",
    [
        pytest.param(lambda asked: [r.approve("ok") for r in asked], id="approved"),
        pytest.param(lambda asked: [r.reject("too much") for r in asked], id="rejected"),
        pytest.param(
            lambda asked: [asked[0].approve("ok"), asked[1].reject("twice?")], id="one-each"
        ),
    ],
)
async def test_approvals_suspend_decide_resume(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    decide_: Decide,
) -> None:
    """The run suspends on the calls that need approval (compared there), the decisions are
    taken (`agent.resume` from the store; the workflow's `decide` update), and the run
    goes on to its end (compared again)."""
    local, temporal = stores
    mine = await run_locally(approval_agent, "pay", local, run_id)
    asked = local.pending(run_id)
    assert len(asked) == 2 and local.get(run_id).info.status == "suspended"
    queue = new_queue()
    async with helikon_worker(client, queue, [approval_agent()], temporal):
        handle = await start_run(client, approval_agent(), "pay", task_queue=queue, run_id=run_id)
        theirs = [e async for e in events(temporal, run_id)]  # to the suspension
        assert_streams(mine, theirs)
        assert_same(local, temporal)
        assert temporal.pending(run_id) == asked
        await decide(handle, decide_(asked))
        await asyncio.wait_for(outcome(handle), WAIT)
    mine = await drained(approval_agent().resume(run_id, decide_(asked), store=local))
    theirs = [e async for e in events(temporal, run_id, after=len(theirs))]
    assert ended(local, run_id) == "Done"
    assert_streams(mine, theirs)
    assert_same(local, temporal)


async def test_a_run_that_continues_as_new(
    client: Client, stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """A workflow whose history grows long continues as new, reading its head from the
    store: what it stores is still what one local run stores."""
    local, temporal = stores
    options = TemporalOptions(continue_after_events=12)
    mine = await run_locally(weather_agent, "weather?", local, run_id)
    theirs = await run_on_temporal(client, weather_agent, "weather?", temporal, run_id, options)
    handle = client.get_workflow_handle(run_id)
    assert (await handle.describe()).run_id != handle.first_execution_run_id  # it continued
    assert_streams(mine, theirs)
    assert_same(local, temporal)


def paged_agent() -> Agent:
    """A tool source whose listing pages in a circle (tests/mcp_hostile_server.py)."""
    from mcp_support import hostile

    return Agent("paged", ScriptedModel(["never"]), mcp_servers=[hostile("circle")])


@pytest.mark.parametrize(
    ("make", "ends"),
    [
        pytest.param(station_agent, "Done", id="listed-and-called"),
        pytest.param(paged_agent, "tools_unavailable", id="listing-fails"),
    ],
)
async def test_tools_from_a_tool_source(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    make: Make,
    ends: str,
) -> None:
    """An MCP server's tools (tests/mcp_server.py over stdio), listed once as the run
    starts and kept in its header; or a listing that fails the run."""
    pytest.importorskip("mcp")
    local, temporal = stores
    agent = make()
    async with agent.mcp_servers[0]:  # a local run lists a connected source; a worker
        mine = await drained(agent.run("2+3?", store=local, run_id=run_id))  # connects its own
    theirs = await run_on_temporal(client, make, "2+3?", temporal, run_id)
    assert ended(local, run_id) == ends
    assert_streams(mine, theirs)
    assert_same(local, temporal)


@pytest.mark.parametrize(
    ("make", "text"),
    [
        pytest.param(weather_agent, "weather?", id="tools"),
        pytest.param(triage_agent, "my bill?", id="handoff"),
        pytest.param(manager_agent, "where is Paris?", id="agent-as-tool"),
    ],
)
async def test_on_postgresql(
    client: Client,
    postgres_stores: tuple[RunStore, RunStore],
    run_id: str,
    make: Make,
    text: str,
) -> None:
    """Both runtimes on PostgreSQL stores (the scenarios above run on SQLite ones)."""
    await both(client, postgres_stores, run_id, make, text)
    assert ended(postgres_stores[0], run_id) == "Done"
    assert_same(*postgres_stores)


def approving_triage() -> Agent:
    """Hands off to payments_agent, whose transfer needs approval."""
    script = [[ToolCall("h1", "transfer_to_payments", "{}")]]
    return Agent(name="triage", model=ScriptedModel(script), handoffs=[payments_agent()])


def approving_manager() -> Agent:
    """Asks payments_agent as a tool (its transfer needs approval), then answers."""
    script = [[ToolCall("a1", "payments", '{"input": "pay 500"}')], "Asked."]
    return Agent(name="manager", model=ScriptedModel(script), tools=[payments_agent().as_tool()])


async def ended_or_waiting(store: RunStore, run_id: str, nested: str) -> None:
    """Wait until run `run_id` ended, or its nested run has suspended and the run has not
    ended `SETTLE` seconds later."""
    waited_since = None
    for _ in range(int(WAIT / 0.05)):
        runs = {info.run_id: info.status for info in await store.aruns(include_nested=True)}
        if runs.get(run_id) in ("completed", "failed"):
            return
        if runs.get(nested) == "suspended":
            now = asyncio.get_running_loop().time()
            waited_since = waited_since or now
            if now - waited_since > SETTLE:
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} neither ended nor waited on {nested}")


SETTLE = 3.0
"""Seconds a parent whose nested run suspended is given to end."""


@pytest.mark.parametrize(
    ("make", "where"),
    [
        pytest.param(
            approving_triage,
            "/2",
            id="handoff",
            marks=diverges(
                "a handoff target that needs approval: locally it is left suspended and "
                "the parent fails Cancelled(\"handoff target 'payments' waited for "
                "approval; a handoff cannot suspend: ...\"); on Temporal the target's "
                "workflow waits for a decision and the parent waits on it, running"
            ),
        ),
        pytest.param(
            approving_manager,
            "/2:a1",
            id="agent-as-tool",
            marks=diverges(
                "an agent as a tool that needs approval: locally it is left suspended and "
                "the parent gets an empty, non-error result ('') and goes on; on Temporal "
                "the nested workflow waits for a decision and the parent waits on it, running"
            ),
        ),
    ],
)
async def test_approval_in_a_nested_run(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    make: Make,
    where: str,
) -> None:
    """A nested run whose call needs approval (no `on_approval` handler)."""
    local, temporal = stores
    await run_locally(make, "pay", local, run_id)
    queue = new_queue()
    async with helikon_worker(client, queue, [make()], temporal):
        handle = await start_run(client, make(), "pay", task_queue=queue, run_id=run_id)
        try:
            await ended_or_waiting(temporal, run_id, run_id + where)
        finally:
            with contextlib.suppress(RPCError):  # a run that waits: not left on the server
                await handle.terminate("the parity test is done with it")
    assert local.get(run_id + where).info.status == "suspended"
    assert_same(local, temporal)


def guarded_payments(checked: list[str]) -> Agent:
    """approval_agent with an input guardrail that passes, noting each check in `checked`."""

    def check(text: str, context: Any) -> bool:
        checked.append(text)
        return False

    return replace(approval_agent(), input_guardrails=[InputGuardrail("noted", check)])


async def test_input_guardrails_run_once_across_a_suspension(
    client: Client, stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """The input guardrails run before the first model call only: not again when the run
    resumes after its suspension (locally a new `Run`, on Temporal the same workflow)."""
    local, temporal = stores
    here: list[str] = []
    there: list[str] = []
    await run_locally(lambda: guarded_payments(here), "pay", local, run_id)
    asked = local.pending(run_id)
    await drained(guarded_payments(here).resume(run_id, [r.approve() for r in asked], store=local))
    queue = new_queue()
    async with helikon_worker(client, queue, [guarded_payments(there)], temporal):
        agent = guarded_payments(there)
        handle = await start_run(client, agent, "pay", task_queue=queue, run_id=run_id)
        _ = [e async for e in events(temporal, run_id)]  # to the suspension
        await decide(handle, [r.approve() for r in asked])
        await asyncio.wait_for(outcome(handle), WAIT)
    assert here == there == ["pay"]
    assert_same(local, temporal)


# ---------------------------------------------------------------- charts


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("retrieve_answer", "completed"),
        ("plan_act", "completed"),
        ("approval_gated", "suspended"),
        ("budget_assistant", "completed"),
        ("triage", "completed"),
    ],
)
async def test_the_example_charts(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    name: str,
    status: str,
) -> None:
    """Each chart of charts/ on its offline script: custom phases (Planning), an effect
    phase (Retrieving: the `retrieve` effect's result is an input), tools with deps, a
    suspension for approval (compared there), a handoff."""
    chart = importlib.import_module(f"charts.{name}")
    deps = chart.deps() if hasattr(chart, "deps") else None

    def make() -> Agent:
        agent: Agent = chart.agent(ScriptedModel(chart.script()))
        return agent

    local, temporal = stores
    context = RunContext(deps)
    mine = await drained(
        make().run(chart.EXAMPLE_INPUT, store=local, run_id=run_id, context=context)
    )
    queue = new_queue()
    async with helikon_worker(client, queue, [make()], temporal, deps=deps):
        handle = await start_run(
            client, make(), chart.EXAMPLE_INPUT, task_queue=queue, run_id=run_id
        )
        theirs = [e async for e in events(temporal, run_id)]  # to its end or suspension
        if theirs[-1].type != "run_suspended":
            await asyncio.wait_for(outcome(handle), WAIT)
    assert local.get(run_id).info.status == status
    assert_streams(mine, theirs)
    assert_same(local, temporal)


async def failing_effect(context: EffectContext) -> JsonValue:
    raise OSError("the index is down")


async def hostile_effect(context: EffectContext) -> JsonValue:
    return {"passages": float("nan")}  # not JSON: never written, never fed to the chart


@pytest.mark.parametrize(
    "retrieve",
    [
        pytest.param(failing_effect, id="raises"),
        pytest.param(hostile_effect, id="returns-no-json"),
    ],
)
async def test_an_effect_that_fails(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    retrieve: Callable[[EffectContext], Awaitable[JsonValue]],
) -> None:
    """charts/retrieve_answer.py with an effect that fails the run, naming it."""
    from charts.retrieve_answer import EXAMPLE_INPUT, agent, script

    def make() -> Agent:
        built = agent(ScriptedModel(script()))
        return replace(built, effects=[Effect("retrieve", retrieve)])

    await both(client, stores, run_id, make, EXAMPLE_INPUT)
    assert ended(stores[0], run_id) == "effect_failed"
    assert_same(*stores)


async def test_the_comparison_tells_a_difference(
    stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """Two local runs whose models answer differently at the end: `assert_same` names the
    record that differs (a comparison that cannot fail would make every scenario pass)."""

    def other() -> Agent:
        agent = weather_agent()
        turns = list(agent.model.turns)  # type: ignore[attr-defined]
        return replace(agent, model=ScriptedModel([*turns[:-1], "Rain everywhere."]))

    local, temporal = stores
    await run_locally(weather_agent, "weather?", local, run_id)
    await run_locally(other, "weather?", temporal, run_id)
    with pytest.raises(AssertionError, match=f"{run_id} record 6 input: ModelResponse"):
        assert_same(local, temporal)
