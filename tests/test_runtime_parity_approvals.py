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
    both,
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
from helikon.durable import SqliteRunStore
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


def refusing(request: ApprovalRequest, context: Any) -> bool:
    raise RuntimeError("the approver is away")


async def approving_later(request: ApprovalRequest, context: Any) -> ApprovalDecision:
    await asyncio.sleep(0.01)
    return request.approve("checked")


@pytest.mark.parametrize(
    ("handler", "ends"),
    [
        pytest.param(lambda request, context: True, "Done", id="approves"),
        pytest.param(lambda request, context: request.call.call_id == "t1", "Done", id="one-each"),
        pytest.param(approving_later, "Done", id="async-decision"),
        pytest.param(lambda request, context: "no", "approval_not_bound", id="not-a-bool"),
        pytest.param(refusing, "approval_handler_failed", id="raises"),
    ],
)
async def test_an_approval_handler(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    handler: Any,
    ends: str,
) -> None:
    """The calls that need approval are decided by the agent's `on_approval` handler (on
    Temporal in the `helikon_approval` activity); an answer that does not bind, or a handler
    that raises, fails the run closed."""
    await both(
        client, stores, run_id, lambda: replace(approval_agent(), on_approval=handler), "pay"
    )
    assert ended(stores[0], run_id) == ends
    assert_same(*stores)


def approving_triage() -> Agent:
    """Hands off to payments_agent, whose transfer needs approval."""
    script = [[ToolCall("h1", "transfer_to_payments", "{}")]]
    return Agent(name="triage", model=ScriptedModel(script), handoffs=[payments_agent()])


def approving_manager() -> Agent:
    """Asks payments_agent as a tool (its transfer needs approval), then answers."""
    script = [[ToolCall("a1", "payments", '{"input": "pay 500"}')], "Asked."]
    return Agent(name="manager", model=ScriptedModel(script), tools=[payments_agent().as_tool()])


@pytest.mark.parametrize(
    ("make", "where", "ends"),
    [
        pytest.param(approving_triage, "/2", "cancelled", id="handoff"),
        pytest.param(approving_manager, "/2:a1", "Done", id="agent-as-tool"),
    ],
)
async def test_approval_in_a_nested_run(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    make: Make,
    where: str,
    ends: str,
) -> None:
    """A nested run whose call needs approval (no `on_approval` handler) cannot suspend its
    caller: it is left suspended, and its handoff ends cancelled (the run fails), or its
    call gets an error result saying so (the run goes on)."""
    await both(client, stores, run_id, make, "pay")
    local, _ = stores
    assert local.get(run_id + where).info.status == "suspended"
    assert ended(local, run_id) == ends
    assert_same(*stores)


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
