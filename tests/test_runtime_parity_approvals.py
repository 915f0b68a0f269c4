"""Parity of the two runtimes around approvals (tests/parity_support.py says how the runs
are compared): a run suspends for approval, is decided (`agent.resume` from the store; the
workflow's `decide` update or `decisions` signal) and goes on; an `on_approval` handler; a
nested run that needs approval; a timeout that passes during a suspension; input
guardrails across one. A scenario whose runtimes diverge is marked `diverges(...)`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

import parity_support
from parity_support import (
    WAIT,
    Make,
    Stores,
    assert_same,
    assert_streams,
    diverges,
    drained,
    ended,
    new_queue,
    postgres_stores_at,
    run_locally,
    sqlite_stores,
)
from temporal_agents import payments_agent
from temporalio.client import Client
from temporalio.service import RPCError

from helikon import Agent, InputGuardrail, RunConfig, ScriptedModel, ToolCall, tool
from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.durable import RunStore, SqliteRunStore
from helikon.temporal import decide, events, helikon_worker, outcome, start_run
from helikon.temporal.messages import to_payload

# The fixtures every parity module takes, written once in parity_support.
client, run_id, stores = parity_support.client, parity_support.run_id, parity_support.stores


@pytest.fixture(params=["sqlite", "postgres"])
def backend_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """The stores on SQLite, then on PostgreSQL."""
    if request.param == "sqlite":
        with sqlite_stores(tmp_path) as opened:
            yield opened
    else:
        with postgres_stores_at(request.getfixturevalue("postgres_url")) as opened:
            yield opened


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


@pytest.mark.parametrize("by", ["update", "signal"])
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
    backend_stores: Stores,
    run_id: str,
    decide_: Decide,
    by: str,
) -> None:
    """The run suspends on the calls that need approval (compared there), the decisions are
    taken (`agent.resume` from the store; the workflow's `decide` update or its
    `decisions` signal), and the run goes on to its end (compared again)."""
    local, temporal = backend_stores
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
        if by == "update":
            await decide(handle, decide_(asked))
        else:
            await handle.signal("decisions", [to_payload(d) for d in decide_(asked)])
        await asyncio.wait_for(outcome(handle), WAIT)
    mine = await drained(approval_agent().resume(run_id, decide_(asked), store=local))
    theirs = [e async for e in events(temporal, run_id, after=len(theirs))]
    assert ended(local, run_id) == "Done"
    assert_streams(mine, theirs)
    assert_same(local, temporal)


@diverges(
    "an on_approval handler: locally it decides the calls in process and the run completes; "
    "on Temporal it is not called (documented in docs/semantics.md, 'On Temporal') and the "
    "run suspends for the decide update"
)
async def test_an_approval_handler(
    client: Client, stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """The calls that need approval are decided by the agent's `on_approval` handler."""

    def make() -> Agent:
        return replace(approval_agent(), on_approval=lambda request, context: True)

    local, temporal = stores
    mine = await run_locally(make, "pay", local, run_id)
    queue = new_queue()
    async with helikon_worker(client, queue, [make()], temporal):
        handle = await start_run(client, make(), "pay", task_queue=queue, run_id=run_id)
        theirs = [e async for e in events(temporal, run_id)]  # to its end or suspension
        if theirs[-1].type != "run_suspended":
            await asyncio.wait_for(outcome(handle), WAIT)
        else:
            await handle.terminate("the parity test is done with it")
    assert ended(local, run_id) == "Done"
    assert_streams(mine, theirs)
    assert_same(local, temporal)


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


SETTLE = 1.5
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


@diverges(
    "RunConfig.timeout across a suspension: locally it bounds a stream (the suspended run "
    "has none; agent.resume counts it afresh), so the decided run completes; on Temporal "
    "the workflow's deadline keeps running while it waits for the decision, and the run "
    "ends Failed(TimedOut(1.0)) at the suspension"
)
async def test_a_timeout_that_passes_while_the_run_waits_for_approval(
    client: Client, stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """A run with a timeout suspends for approval and is decided after its timeout passed
    (locally the stream ends at the suspension and `agent.resume` counts the timeout
    afresh)."""

    def make() -> Agent:
        return replace(approval_agent(), config=RunConfig(timeout=1.0))

    local, temporal = stores
    await run_locally(make, "pay", local, run_id)
    asked = local.pending(run_id)
    queue = new_queue()
    async with helikon_worker(client, queue, [make()], temporal):
        handle = await start_run(client, make(), "pay", task_queue=queue, run_id=run_id)
        _ = [e async for e in events(temporal, run_id)]  # to the suspension
        await asyncio.sleep(1.5)
        with contextlib.suppress(RPCError):  # a run that ended takes no decision
            await decide(handle, [r.approve() for r in asked])
        await asyncio.wait_for(outcome(handle), WAIT)
    await asyncio.sleep(1.5)
    await drained(make().resume(run_id, [r.approve() for r in asked], store=local))
    assert ended(local, run_id) == "Done"
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
