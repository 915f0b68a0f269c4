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
- `CHAIN`: `head_mac`, the signature of the run's chain of rows, signs the rows as each
  store wrote them (their times among them).

A real divergence between the runtimes is marked `xfail(strict=True)` with its reason.
"""

from __future__ import annotations

import asyncio
import importlib
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

pytest.importorskip("temporalio")

from temporal_agents import (
    budget_manager,
    fatal_agent,
    guarded_agent,
    looping_agent,
    manager_agent,
    slow_agent,
    slow_manager,
    slow_triage,
    structured_agent,
    triage_agent,
    weather_agent,
)
from temporal_support import only_pending
from temporalio.client import Client

from helikon import Agent, EffectContext, RunConfig, RunContext, ScriptedModel, ToolCall, tool
from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.events import AgentEvent
from helikon.durable import RunNotFound, SqliteRunStore
from helikon.durable.records import StoredRun
from helikon.durable.views import events_of
from helikon.run.chart_effects import Effect
from helikon.run.results import RunResultStreaming
from helikon.temporal import decide, events, helikon_worker, outcome, start_run

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


def held(store: SqliteRunStore) -> dict[str, RunView]:
    """Every run in `store`, by id, normalised."""
    return {info.run_id: view(store.get(info.run_id)) for info in store.runs(include_nested=True)}


def assert_same(local: SqliteRunStore, temporal: SqliteRunStore) -> None:
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


def ended(store: SqliteRunStore, run_id: str) -> str:
    """How a stored run ended: "Done", or its error's kind (the scenario is the one meant)."""
    state: Any = store.get(run_id).records[-1].state_after
    return "Done" if state.phase == "Done" else state.error.kind


# ---------------------------------------------------------------- the two runtimes


Make = Callable[[], Agent]


async def drained(result: RunResultStreaming) -> list[AgentEvent]:
    """The events a local run streams, but its deltas (STREAM)."""
    return [event async for event in result if event.type not in DELTAS]


async def run_locally(
    make: Make, text: str, store: SqliteRunStore, run_id: str
) -> list[AgentEvent]:
    return await drained(make().run(text, store=store, run_id=run_id))


async def run_on_temporal(
    client: Client, make: Make, text: str, store: SqliteRunStore, run_id: str
) -> list[AgentEvent]:
    """Run to the end on a worker of its own; the events a reader of the run streams."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with helikon_worker(client, queue, [make()], store):
        handle = await start_run(client, make(), text, task_queue=queue, run_id=run_id)
        await asyncio.wait_for(outcome(handle), WAIT)
    return [event async for event in events(store, run_id)]


async def both(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    make: Make,
    text: str,
) -> None:
    """Run `make`'s agent on `text` in process, then on Temporal; the streams compared."""
    local, temporal = stores
    mine = await run_locally(make, text, local, run_id)
    theirs = await run_on_temporal(client, make, text, temporal, run_id)
    assert_streams(mine, theirs)


# ---------------------------------------------------------------- scenarios


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


def diverges(reason: str) -> pytest.MarkDecorator:
    """A finding: the runtimes store different runs for this scenario (`reason` says how)."""
    return pytest.mark.xfail(strict=True, reason=reason)


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
