"""Parity of the two runtimes: the same scripted scenarios run by the in-process driver
(`agent.run` / `agent.resume` with a run store) and by the Temporal runtime (a real dev
server and a helikon worker, `temporal_address`), each writing to a SQLite store of its own;
what the two stores hold afterwards must be the same.

Both runs of a scenario take the same run id (the stores are separate), so nested runs'
ids (`{run_id}/{seq}`, `{run_id}/{seq}:{call_id}`) and approval requests (bound to the run
id) match without rewriting. What is compared, for every run each store holds: the header,
the run's line (`RunInfo`: phase, seq, status, turns, parent), every step record (input,
row, guards checked, state after with its usage, next action, events, appends), the
effect events, and the events in the order a reader streams them. The normalisations, each
named where it is applied (`view`), are:

- `CLOCK`: `created_at` and `updated_at` are when each store wrote; two runs never share a
  clock.
- `LEASE`: who holds a run that has not ended (`lease_owner`, `lease_expires_at`): a local
  driver leases it for a few seconds under a name of its own and releases it when it
  suspends; a workflow leases it under `temporal:{run_id}` until the run ends, a
  suspension included (helikon.temporal.writes). A run that ended holds no lease on
  either: that is compared.
- `JOURNAL`: `calls` and `decisions`, the local driver's crash journal (a tool call started
  and finished; an approval decision spent): on Temporal the workflow's history keeps both
  (an activity's result, an update), and the decisions reach the store as the records'
  inputs, which are compared.
- `STREAM`: the events a local run streams are compared with those a reader of the
  Temporal run streams from its store (`helikon.temporal.events`), but the deltas
  (`DELTAS`: text and argument fragments as the model streams them), which a local run
  streams and no store keeps; the Temporal runtime never streams them.
- `REDACT`: a run with `RunConfig.redact` streams its texts as they are and stores them
  redacted (by design: the run itself and its stream see them whole), so its own stream
  is not compared with the Temporal run's, which is read from the store; what a reader of
  each store streams is.
- `CHAIN`: `head_mac`, the signature of the run's chain of rows, signs the rows as each
  store wrote them (their times among them).

A real divergence between the runtimes is marked `xfail(strict=True)` with its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

pytest.importorskip("temporalio")

from store_support import PostgresBackend
from temporal_agents import (
    City,
    budget_manager,
    fatal_agent,
    guarded_agent,
    looping_agent,
    manager_agent,
    payments_agent,
    slow_agent,
    slow_manager,
    slow_triage,
    station_agent,
    structured_agent,
    triage_agent,
    weather_agent,
)
from temporal_support import only_pending
from temporalio.client import Client
from temporalio.service import RPCError

from helikon import (
    Agent,
    EffectContext,
    InputGuardrail,
    OutputGuardrail,
    RunConfig,
    RunContext,
    ScriptedModel,
    ToolCall,
    tool,
)
from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.events import AgentEvent
from helikon.durable import RunNotFound, RunStore, SqliteRunStore
from helikon.durable.records import StoredRun
from helikon.durable.views import events_of
from helikon.models.base import ModelChunk, ModelInput
from helikon.run.chart_effects import Effect
from helikon.run.results import RunResultStreaming
from helikon.temporal import (
    TemporalOptions,
    decide,
    events,
    helikon_worker,
    outcome,
    start_run,
)
from helikon.tools import ToolPolicy

WAIT = 60.0
DELTAS = {"token_delta", "tool_call_delta", "reasoning_delta"}
KEY = b"parity-tests-key-0123456789abcdef"


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


@pytest.fixture
def run_id() -> str:
    """A run id of this test's own: the dev server outlives every test."""
    return f"p-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SqliteRunStore, SqliteRunStore]]:
    """(the local run's store, the Temporal run's store)."""
    with (
        SqliteRunStore(tmp_path / "local.db", key=KEY) as local,
        SqliteRunStore(tmp_path / "temporal.db", key=KEY) as temporal,
    ):
        yield local, temporal


@pytest.fixture
def postgres_stores(postgres_url: str) -> Iterator[tuple[RunStore, RunStore]]:
    """(the local run's store, the Temporal run's store), each on a PostgreSQL schema of
    its own."""
    local, temporal = PostgresBackend(postgres_url), PostgresBackend(postgres_url)
    try:
        yield local.open(KEY), temporal.open(KEY)
    finally:
        local.close()
        temporal.close()


# ---------------------------------------------------------------- what is compared


@dataclass(frozen=True)
class RunView:
    """One stored run, normalised (see the module docstring)."""

    header: Any
    line: tuple[Any, ...]
    records: tuple[Any, ...]
    effects: tuple[Any, ...]
    events: tuple[Any, ...]


def view(stored: StoredRun) -> RunView:
    info = stored.info
    # CLOCK: created_at and updated_at are left out. LEASE: the lease of a run that has not
    # ended is left out.
    finished = info.status in ("completed", "failed")
    line = (
        info.run_id,
        info.agent,
        info.phase,
        info.seq,
        info.status,
        info.turns,
        info.parent_run_id,
        info.forked_from,
        info.forked_at,
        (info.lease_owner, info.lease_expires_at) if finished else "leased by its runtime",
    )
    # JOURNAL: stored.calls and stored.decisions are left out; CHAIN: stored.head_mac too.
    return RunView(
        stored.header,
        line,
        stored.records,
        stored.effects,
        tuple(events_of(stored)),
    )


def held(store: RunStore) -> dict[str, RunView]:
    """Every run in `store`, by id, normalised."""
    return {info.run_id: view(store.get(info.run_id)) for info in store.runs(include_nested=True)}


def assert_same(local: RunStore, temporal: RunStore) -> None:
    """What the two stores hold is the same, run by run and part by part; a failure lists
    each part that differs, the local value first."""
    mine, theirs = held(local), held(temporal)
    assert mine, "the local store holds no run"
    assert sorted(mine) == sorted(theirs), "the stores hold other runs"
    found = [line for run_id in sorted(mine) for line in differences(mine[run_id], theirs[run_id])]
    assert not found, "the runtimes differ:\n" + "\n".join(found)


def assert_streams(mine: Sequence[AgentEvent], theirs: Sequence[AgentEvent]) -> None:
    """The events the local run streamed are those a reader of the Temporal run streams
    (`helikon.temporal.events`: a handoff target's events inline, as a local run streams
    them); a failure lists each that differs, the local one first."""
    found = [
        f"event {n}: {left!r}\n    != {right!r}"
        for n, (left, right) in enumerate(zip_longest(mine, theirs))
        if left != right
    ]
    assert mine, "the local run streamed nothing"
    assert not found, "the streams differ:\n" + "\n".join(found)


def differences(a: RunView, b: RunView) -> list[str]:
    """Each part of run `a` that differs from `b`'s, with both values."""
    run_id = a.line[0]
    found = [
        f"{run_id} {part}: {left!r}\n    != {right!r}"
        for part, left, right in (
            ("header", a.header, b.header),
            ("run line", a.line, b.line),
            ("effect events", a.effects, b.effects),
        )
        if left != right
    ]
    for n, (left, right) in enumerate(zip_longest(a.events, b.events)):
        if left != right:
            found.append(f"{run_id} event {n}: {left!r}\n    != {right!r}")
    for left, right in zip_longest(a.records, b.records):
        if left is None or right is None:
            found.append(f"{run_id} record missing: {left!r}\n    != {right!r}")
            continue
        for name in left.__dataclass_fields__:
            mine, theirs = getattr(left, name), getattr(right, name)
            if mine != theirs:
                found.append(f"{run_id} record {left.seq} {name}: {mine!r}\n    != {theirs!r}")
    return found


def ended(store: RunStore, run_id: str) -> str:
    """How a stored run ended: "Done", or its error's kind (the scenario is the one meant)."""
    state: Any = store.get(run_id).records[-1].state_after
    return "Done" if state.phase == "Done" else state.error.kind


# ---------------------------------------------------------------- the two runtimes


Make = Callable[[], Agent]


async def drained(result: RunResultStreaming) -> list[AgentEvent]:
    """The events a local run streams, but its deltas (STREAM)."""
    return [event async for event in result if event.type not in DELTAS]


async def run_locally(make: Make, text: str, store: RunStore, run_id: str) -> list[AgentEvent]:
    return await drained(make().run(text, store=store, run_id=run_id))


async def run_on_temporal(
    client: Client,
    make: Make,
    text: str,
    store: RunStore,
    run_id: str,
    options: TemporalOptions | None = None,
) -> list[AgentEvent]:
    """Run to the end on a worker of its own; the events a reader of the run streams."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with helikon_worker(client, queue, [make()], store, options=options):
        handle = await start_run(client, make(), text, task_queue=queue, run_id=run_id)
        await asyncio.wait_for(outcome(handle), WAIT)
    return [event async for event in events(store, run_id)]


async def both(
    client: Client,
    stores: tuple[RunStore, RunStore],
    run_id: str,
    make: Make,
    text: str,
) -> None:
    """Run `make`'s agent on `text` in process, then on Temporal; the streams compared:
    the local run's own, and what a reader of each store streams."""
    local, temporal = stores
    mine = await run_locally(make, text, local, run_id)
    theirs = await run_on_temporal(client, make, text, temporal, run_id)
    if make().config.redact is None:  # REDACT
        assert_streams(mine, theirs)
    assert_streams([e async for e in events(local, run_id)], theirs)


# ---------------------------------------------------------------- scenarios


def diverges(reason: str) -> pytest.MarkDecorator:
    """A finding: the runtimes store different runs for this scenario (`reason` says how)."""
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)


def compacting_agent() -> Agent:
    """A tool result over the compaction threshold: the model summarises (Compacting),
    then answers from the summary."""
    script = [
        [ToolCall("c1", "weather", '{"city": "Oslo"}')],
        "Asked for the weather in Oslo: sunny.",
        "Sunny in Oslo.",
    ]
    return replace(weather_agent(compaction_threshold=1), model=ScriptedModel(script))


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
    """Two calls in one turn, both needing approval (a transfer and a weather lookup),
    then an answer."""

    @tool(needs_approval=True)
    def transfer(amount: int) -> str:
        """Move money.

        Args:
            amount: how much.
        """
        return f"moved {amount}"

    script = [
        [
            ToolCall("t1", "transfer", '{"amount": 500}'),
            ToolCall("t2", "transfer", '{"amount": 70}'),
        ],
        "Done.",
    ]
    return Agent(name="payments", model=ScriptedModel(script), tools=[transfer])


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
    queue = f"q-{uuid.uuid4().hex[:8]}"
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
    queue = f"q-{uuid.uuid4().hex[:8]}"
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
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with helikon_worker(client, queue, [guarded_payments(there)], temporal):
        agent = guarded_payments(there)
        handle = await start_run(client, agent, "pay", task_queue=queue, run_id=run_id)
        _ = [e async for e in events(temporal, run_id)]  # to the suspension
        await decide(handle, [r.approve() for r in asked])
        await asyncio.wait_for(outcome(handle), WAIT)
    assert here == there == ["pay"]
    assert_same(local, temporal)


# ---------------------------------------------------------------- stops


Slow = Callable[[Path], Agent]


def timed(make: Slow, timeout: float) -> Slow:
    """`make`'s agent with a run timeout."""
    return lambda marks: replace(make(marks), config=RunConfig(timeout=timeout))


async def finished_quick_call(store: SqliteRunStore, run_id: str) -> None:
    """Wait until the local run `run_id` has the quick call's result (its journal), so a
    stop finds the slow call alone in flight, as on Temporal (`only_pending`)."""
    for _ in range(int(WAIT / 0.05)):
        try:
            calls = store.get(run_id).calls
        except RunNotFound:
            calls = ()
        if any(call.call_id == "q1" and call.finished for call in calls):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the quick call of {run_id} did not finish")


async def wait_for_file(folder: Path, prefix: str) -> None:
    for _ in range(int(WAIT / 0.05)):
        if any(folder.glob(prefix + "*")):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {prefix}* in {folder}")


CANCELLED = [
    pytest.param(slow_agent, "", id="tools"),
    pytest.param(
        slow_triage,
        "/2",
        id="handoff",
        marks=diverges(
            "a cancel during a handoff: locally the parent's last input is the Cancel, and "
            "the parent and its target end Failed(Cancelled(reason)); on Temporal the "
            "target's workflow is cancelled without the reason, ends Cancelled('cancelled'), "
            "and the parent takes that end as a HandoffResult (another row) and ends with "
            "Cancelled('cancelled'): the reason is lost"
        ),
    ),
    pytest.param(
        slow_manager,
        "/2:a1",
        id="agent-as-tool",
        marks=diverges(
            "a cancel during an agent as a tool: locally the nested run is left 'running' "
            "in ExecutingTools with no end stored, and the parent's Cancel keeps no result "
            "(the call is appended 'cancelled'); on Temporal the nested run ends "
            "Failed(Cancelled('cancelled')) and the parent's Cancel keeps it as an executed, "
            "non-error result \"error: slow failed: Cancelled(reason='cancelled')\""
        ),
    ),
]
"""Agents whose slow call never ends by itself: (the agent, the id of the run that makes
the call after the root's run id)."""


TIMED_OUT = [
    pytest.param(slow_agent, id="tools"),
    pytest.param(
        slow_triage,
        id="handoff",
        marks=diverges(
            "the run's timeout during a handoff: locally the parent and its target end "
            "Failed(TimedOut(2.0)); on Temporal the parent's deadline cancels the target's "
            "workflow, which ends Cancelled('cancelled'), and the parent takes that end as a "
            "HandoffResult and ends Failed(Cancelled('cancelled')), not TimedOut (asyncio's "
            "wait_for in HelikonWorkflow._wait re-raises the child's ChildWorkflowError "
            "rather than TimeoutError, and _child reads it as a cancel)"
        ),
    ),
    pytest.param(
        slow_manager,
        id="agent-as-tool",
        marks=diverges(
            "the run's timeout during an agent as a tool: locally the parent ends "
            "Failed(TimedOut(2.0)) and the nested run is left 'running' with no end stored; "
            "on Temporal the parent ends Failed(Cancelled('cancelled')) (the nested _wait "
            "takes the outer deadline's cancellation for a cancel of the workflow) and the "
            "nested run ends Failed(TimedOut(0.0)) (its own agent's timeout, None, as 0.0)"
        ),
    ),
]


@pytest.mark.parametrize("reason", ["cancelled", "the customer hung up"])
@pytest.mark.parametrize(("make", "where"), CANCELLED)
async def test_cancel(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    tmp_path: Path,
    make: Slow,
    where: str,
    reason: str,
) -> None:
    """Cancelled while the slow call runs and the quick one has finished (it keeps its
    result): `result.cancel(reason)`, and the workflow's cancel with that reason."""
    local, temporal = stores
    here, there = tmp_path / "local", tmp_path / "temporal"
    here.mkdir(), there.mkdir()
    result = make(here / "release").run("go", store=local, run_id=run_id)
    running = asyncio.ensure_future(drained(result))
    await wait_for_file(here, "start-b-")
    await finished_quick_call(local, run_id + where)
    result.cancel(reason)
    await asyncio.wait_for(asyncio.shield(running), WAIT)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with helikon_worker(client, queue, [make(there / "release")], temporal):
        agent = make(there / "release")
        handle = await start_run(client, agent, "go", task_queue=queue, run_id=run_id)
        await wait_for_file(there, "start-b-")
        await only_pending(client.get_workflow_handle(run_id + where), "2:s1")
        await handle.cancel(reason=reason)
        await asyncio.wait_for(outcome(handle), WAIT)
    assert ended(local, run_id) == "cancelled"
    assert_streams(await running, [e async for e in events(temporal, run_id)])
    assert_same(local, temporal)


@pytest.mark.parametrize("make", TIMED_OUT)
async def test_timeout(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    tmp_path: Path,
    make: Slow,
) -> None:
    """The run's timeout passes while its slow call runs (the quick one finished)."""
    local, temporal = stores
    here, there = tmp_path / "local", tmp_path / "temporal"
    here.mkdir(), there.mkdir()
    timeout = 2.0
    mine, theirs = await asyncio.gather(  # at once: the timeout is waited for once
        run_locally(lambda: timed(make, timeout)(here / "release"), "go", local, run_id),
        run_on_temporal(
            client, lambda: timed(make, timeout)(there / "release"), "go", temporal, run_id
        ),
    )
    assert ended(local, run_id) == "timed_out"
    assert_streams(mine, theirs)
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
    queue = f"q-{uuid.uuid4().hex[:8]}"
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


async def held_until_released(folder: Path) -> None:
    """Mark that the slow part started ("started" in `folder`), then wait for "release"."""
    (folder / "started").write_text("started")
    while not (folder / "release").exists():
        await asyncio.sleep(0.05)


@dataclass
class HeldModel:
    """`ScriptedModel(turns)` whose first call waits in `held_until_released`."""

    folder: Path
    turns: list[Any]

    async def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        if request.calls_before == 0:
            await held_until_released(self.folder)
        async for chunk in ScriptedModel(self.turns, skipped=request.calls_before).stream(request):
            yield chunk


Held = Callable[[Path, RunConfig], Agent]


def held_output_guardrail(folder: Path, config: RunConfig) -> Agent:
    async def check(output: Any, context: Any) -> bool:
        await held_until_released(folder)
        return False

    guardrail = OutputGuardrail("slow", check)
    return Agent(
        "checked", ScriptedModel(["All clear."]), output_guardrails=[guardrail], config=config
    )


def held_input_guardrail(folder: Path, config: RunConfig) -> Agent:
    async def check(text: str, context: Any) -> bool:
        await held_until_released(folder)
        return False

    guardrail = InputGuardrail("slow", check)
    return Agent(
        "checked", ScriptedModel(["All clear."]), input_guardrails=[guardrail], config=config
    )


def held_model(folder: Path, config: RunConfig) -> Agent:
    return Agent("waiting", HeldModel(folder, ["At last."]), config=config)  # type: ignore[arg-type]


def held_effect(folder: Path, config: RunConfig) -> Agent:
    from charts.retrieve_answer import agent, script

    async def retrieve(context: EffectContext) -> JsonValue:
        await held_until_released(folder)
        return {"passages": []}

    built = agent(ScriptedModel(script()))
    return replace(built, effects=[Effect("retrieve", retrieve)], config=config)


HELD = [
    pytest.param(held_input_guardrail, id="input-guardrail"),
    pytest.param(held_model, id="model-call"),
    pytest.param(held_output_guardrail, id="output-guardrail"),
    pytest.param(held_effect, id="effect"),
]
"""Agents whose run waits in one effect of the loop (an activity on Temporal)."""


@pytest.mark.parametrize(
    "stop",
    [
        "cancel",
        pytest.param(
            "timeout",
            marks=diverges(
                "the run's timeout while the workflow waits on one activity (an input or "
                "output guardrail, the model, an effect): locally the run ends "
                "Failed(TimedOut(2.0)); on Temporal it ends Failed(Cancelled('cancelled')): "
                "asyncio.wait_for in HelikonWorkflow._wait cancels the activity, whose "
                "handle then raises ActivityError(cancelled) rather than TimeoutError, and "
                "_wait takes that for a cancel of the workflow (a batch of tools, awaited "
                "through a coroutine, times out right: test_timeout[tools])"
            ),
        ),
    ],
)
@pytest.mark.parametrize("make", HELD)
async def test_a_stop_while_the_run_waits(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    tmp_path: Path,
    make: Held,
    stop: str,
) -> None:
    """The run waits on a guardrail, the model or an effect, and is cancelled, or its
    timeout passes; what it waited on is released once both runs ended."""
    local, temporal = stores
    here, there = tmp_path / "local", tmp_path / "temporal"
    here.mkdir(), there.mkdir()
    config = RunConfig(timeout=2.0 if stop == "timeout" else None)
    result = make(here, config).run("go", store=local, run_id=run_id)
    running = asyncio.ensure_future(drained(result))
    await wait_for_file(here, "started")
    if stop == "cancel":
        result.cancel("stop waiting")
    mine = await asyncio.wait_for(running, WAIT)
    (here / "release").write_text("go")
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with helikon_worker(client, queue, [make(there, config)], temporal):
        handle = await start_run(client, make(there, config), "go", task_queue=queue, run_id=run_id)
        await wait_for_file(there, "started")
        if stop == "cancel":
            await handle.cancel(reason="stop waiting")
        await asyncio.wait_for(outcome(handle), WAIT)
        (there / "release").write_text("go")
    assert ended(local, run_id) == ("cancelled" if stop == "cancel" else "timed_out")
    assert_streams(mine, [e async for e in events(temporal, run_id)])
    assert_same(local, temporal)


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
