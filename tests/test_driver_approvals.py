"""Approvals end to end: suspending for a human, resuming with decisions bound to the exact
call, partial decisions, refusals that fail closed, rejections, in-process handlers, and
snapshots that survive JSON.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
from typing import Any

import pytest
from driver_support import drain, ends_once, settle, types

from helikon import (
    Agent,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalRequested,
    Cancelled,
    PermissionDenied,
    RunCompleted,
    RunContext,
    RunFailed,
    RunSnapshot,
    RunSuspended,
    ScriptedModel,
    ToolCall,
    ToolResult,
    tool,
)
from helikon.core.codec import dumps, loads
from helikon.run import ApprovalMismatch, SnapshotMismatch


class Bank:
    """Two tools: `transfer` needs approval, `balance` does not. Records what ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

        @tool(needs_approval=True)
        async def transfer(to: str, amount: int) -> str:
            """Move money to someone."""
            self.ran.append(f"transfer {amount} to {to}")
            return f"sent {amount} to {to}"

        @tool
        async def balance() -> str:
            """Read the balance."""
            self.ran.append("balance")
            return "100"

        self.tools = [transfer, balance]


def transfer_call(call_id: str = "t1", to: str = "ann", amount: int = 10) -> ToolCall:
    return ToolCall(call_id, "transfer", json.dumps({"to": to, "amount": amount}))


BALANCE = ToolCall("b1", "balance", "{}")


def bank_agent(bank: Bank, *turns: Any, name: str = "teller", **kwargs: Any) -> Agent:
    return Agent(name, ScriptedModel(list(turns)), tools=bank.tools, **kwargs)


def results(items: Any) -> list[ToolResult]:
    return [item for item in items if isinstance(item, ToolResult)]


async def test_a_call_needing_approval_suspends_the_run_with_its_batch() -> None:
    bank = Bank()
    agent = bank_agent(bank, [transfer_call(), BALANCE], "done")
    streaming = agent.run("pay ann 10")

    result = await streaming.collect()

    assert result.suspended
    assert result.final_output is None
    assert result.output is None
    assert result.snapshot is not None
    assert result.snapshot.state.phase == "NeedsApproval"
    # The suspension's requests are stamped with the run and the suspension's seq.
    snapshot = result.snapshot
    assert result.pending == (
        ApprovalRequest.for_call(transfer_call()).bound(snapshot.run_id, snapshot.seq),
    )
    assert snapshot.pending() == result.pending
    suspended = ends_once(result.events, RunSuspended)
    assert suspended.pending == result.pending
    assert types(result.events)[-2:] == ["approval_requested", "run_suspended"]
    requested = [e.request for e in result.events if isinstance(e, ApprovalRequested)]
    assert requested == [ApprovalRequest.for_call(transfer_call())]
    assert bank.ran == [], "calls needing no approval wait with the batch"


async def test_collect_typed_refuses_a_suspended_run() -> None:
    agent = bank_agent(Bank(), [transfer_call()])

    with pytest.raises(ValueError, match="suspended"):
        await agent.run("pay").collect_typed(str)


async def test_resuming_with_an_approval_runs_the_batch_and_completes() -> None:
    bank = Bank()
    agent = bank_agent(bank, [transfer_call(), BALANCE], "Sent.")
    suspended = await agent.run("pay ann 10").collect()
    assert suspended.snapshot is not None

    resumed = agent.resume(suspended.snapshot, decisions=[suspended.pending[0].approve()])
    result = await resumed.collect()

    assert result.final_output == "Sent."
    assert sorted(bank.ran) == ["balance", "transfer 10 to ann"]
    assert "run_started" not in types(result.events)
    ends_once(result.events, RunCompleted)
    run = resumed.run
    assert run is not None
    assert results(run.conversation.items()) == [
        ToolResult("t1", "sent 10 to ann"),
        ToolResult("b1", "100"),
    ]


async def test_a_partial_decision_keeps_the_rest_pending() -> None:
    bank = Bank()
    first, second = transfer_call("t1", "ann", 10), transfer_call("t2", "bob", 20)
    agent = bank_agent(bank, [first, second], "Both sent.")
    suspended = await agent.run("pay both").collect()
    assert suspended.snapshot is not None
    approve_first = next(r for r in suspended.pending if r.call == first).approve()

    again = await agent.resume(suspended.snapshot, decisions=[approve_first]).collect()

    assert again.suspended and again.snapshot is not None
    assert again.pending == (
        ApprovalRequest.for_call(second).bound(again.snapshot.run_id, again.snapshot.seq),
    )
    assert again.snapshot.seq > suspended.snapshot.seq
    assert ends_once(again.events, RunSuspended).pending == again.pending
    assert bank.ran == []
    assert again.snapshot is not None

    done = await agent.resume(again.snapshot, decisions=[again.pending[0].approve()]).collect()

    assert done.final_output == "Both sent."
    assert sorted(bank.ran) == ["transfer 10 to ann", "transfer 20 to bob"]


def tampered(decision: ApprovalDecision, **changes: Any) -> ApprovalDecision:
    return dataclasses.replace(decision, **changes)


@pytest.mark.parametrize(
    "forge",
    [
        lambda request: [tampered(request.approve(), arguments_hash="0" * 64)],
        lambda request: [
            ApprovalRequest.for_call(transfer_call(amount=10_000)).approve(),
        ],
        lambda request: [tampered(request.approve(), call_id="t-unknown")],
        lambda request: [
            request.approve(),
            ApprovalRequest.for_call(transfer_call("t-unknown")).approve(),
        ],
    ],
    ids=["wrong-hash", "other-arguments", "unknown-call", "one-good-one-unknown"],
)
async def test_a_decision_that_does_not_bind_is_refused_before_anything_runs(forge: Any) -> None:
    bank = Bank()
    model = ScriptedModel([[transfer_call()], "Sent."])
    agent = Agent("teller", model, tools=bank.tools)
    suspended = await agent.run("pay ann 10").collect()
    assert suspended.snapshot is not None

    with pytest.raises(ApprovalMismatch):
        agent.resume(suspended.snapshot, decisions=forge(suspended.pending[0]))

    assert bank.ran == []
    assert len(model.requests) == 1


async def test_decisions_for_a_run_that_is_not_waiting_are_refused() -> None:
    bank = Bank()
    agent = bank_agent(bank, "nothing to approve")
    streaming = agent.run("hi")
    await streaming.collect()
    assert streaming.run is not None
    decision = ApprovalRequest.for_call(transfer_call()).approve()

    with pytest.raises(
        SnapshotMismatch, match=r"already ended \(Done\) at step 2: there is nothing"
    ):
        agent.resume(streaming.run.snapshot(), decisions=[decision])


async def test_a_rejected_call_gets_a_denial_result_and_permission_denied() -> None:
    bank = Bank()
    model = ScriptedModel([[transfer_call(), BALANCE], "I could not send it."])
    agent = Agent("teller", model, tools=bank.tools)
    suspended = await agent.run("pay ann 10").collect()
    assert suspended.snapshot is not None

    decision = suspended.pending[0].reject("over the limit")
    result = await agent.resume(suspended.snapshot, decisions=[decision]).collect()

    assert result.final_output == "I could not send it."
    assert bank.ran == ["balance"]
    denied = [e for e in result.events if isinstance(e, PermissionDenied)]
    assert [(d.call_id, d.tool) for d in denied] == [("t1", "transfer")]
    rejection, read = results(model.requests[1].items)
    assert rejection.call_id == "t1"
    assert rejection.status == "rejected"
    assert rejection.is_error
    assert "over the limit" in rejection.content
    assert read == ToolResult("b1", "100")


async def test_resuming_without_decisions_suspends_again() -> None:
    bank = Bank()
    agent = bank_agent(bank, [transfer_call()], "Sent.")
    suspended = await agent.run("pay").collect()
    assert suspended.snapshot is not None

    again = await agent.resume(suspended.snapshot).collect()

    assert again.suspended
    assert again.pending == suspended.pending
    assert bank.ran == []


# -- in-process handlers --------------------------------------------------------------------


async def test_a_sync_on_approval_handler_answers_in_process() -> None:
    bank = Bank()
    seen: list[tuple[ApprovalRequest, Any]] = []

    def approve_small(request: ApprovalRequest, context: RunContext[Any]) -> bool:
        seen.append((request, context.deps))
        return json.loads(request.call.arguments)["amount"] <= context.deps["limit"]

    agent = bank_agent(
        bank,
        [transfer_call("t1", "ann", 10), transfer_call("t2", "bob", 500)],
        "One sent.",
        on_approval=approve_small,
    )

    result = await agent.run("pay", context=RunContext.ephemeral({"limit": 100})).collect()

    assert result.final_output == "One sent."
    assert bank.ran == ["transfer 10 to ann"]
    assert [(r.call.call_id, deps) for r, deps in seen] == [
        ("t1", {"limit": 100}),
        ("t2", {"limit": 100}),
    ]
    assert [e.call_id for e in result.events if isinstance(e, PermissionDenied)] == ["t2"]
    assert "run_suspended" not in types(result.events)
    assert types(result.events).count("approval_requested") == 2


async def test_an_async_on_approval_handler_may_return_decisions() -> None:
    bank = Bank()

    async def decide(request: ApprovalRequest, context: RunContext[Any]) -> ApprovalDecision:
        await asyncio.sleep(0)
        return request.approve("checked")

    agent = bank_agent(bank, [transfer_call()], "Sent.", on_approval=decide)

    result = await agent.run("pay").collect()

    assert result.final_output == "Sent."
    assert bank.ran == ["transfer 10 to ann"]


async def test_cancel_reaches_an_async_approval_handler_in_flight() -> None:
    bank = Bank()
    asked = asyncio.Event()
    cancelled: list[str] = []

    async def wait_for_human(request: ApprovalRequest, context: RunContext[Any]) -> bool:
        asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(request.call.call_id)
            raise
        return True

    agent = bank_agent(bank, [transfer_call()], on_approval=wait_for_human)
    before = asyncio.all_tasks()
    streaming = agent.run("pay")
    events_task = asyncio.create_task(drain(streaming))

    await asked.wait()
    streaming.cancel()
    events = await events_task

    assert cancelled == ["t1"]
    assert ends_once(events, RunFailed).error == Cancelled("cancelled")
    assert bank.ran == []
    assert asyncio.all_tasks() == before


async def test_cancel_before_an_async_approval_handler_starts_leaves_no_stray_coroutine() -> None:
    bank = Bank()
    asked: list[str] = []

    async def decide(request: ApprovalRequest, context: RunContext[Any]) -> bool:
        asked.append(request.call.call_id)
        return True

    agent = bank_agent(bank, [transfer_call()], on_approval=decide)
    streaming = agent.run("pay")
    events = []
    async for event in streaming:
        events.append(event)
        if event.type == "approval_requested":
            streaming.cancel()
    gc.collect()
    await settle()

    assert ends_once(events, RunFailed).error == Cancelled("cancelled")
    assert asked == []
    assert bank.ran == []


async def test_a_call_with_a_lone_surrogate_in_its_arguments_suspends_and_resumes() -> None:
    bank = Bank()
    lone = json.loads('"\\ud800"')  # a JSON wire can deliver a lone surrogate
    call = ToolCall("t1", "transfer", json.dumps({"to": lone, "amount": 1}, ensure_ascii=False))
    agent = bank_agent(bank, [call], "Done.")

    suspended = await agent.run("pay").collect()
    assert suspended.snapshot is not None
    (request,) = suspended.pending
    assert request.call == call
    result = await agent.resume(suspended.snapshot, [request.approve()]).collect()

    assert result.final_output == "Done."


# -- snapshots ------------------------------------------------------------------------------


async def test_a_suspended_snapshot_round_trips_through_json_and_resumes() -> None:
    bank = Bank()
    agent = bank_agent(bank, [transfer_call(), BALANCE], "Sent.")
    suspended = await agent.run("pay ann 10").collect()
    assert suspended.snapshot is not None

    text = dumps(suspended.snapshot)
    loaded = loads(RunSnapshot, text)

    assert loaded == suspended.snapshot
    assert json.loads(text)["agent"] == "teller"
    request = loaded.pending()[0]  # stamped with the run and the suspension
    result = await agent.resume(loaded, decisions=[request.approve()]).collect()
    assert result.final_output == "Sent."
    assert sorted(bank.ran) == ["balance", "transfer 10 to ann"]


async def test_a_snapshot_with_a_lone_surrogate_round_trips_through_json() -> None:
    bank = Bank()
    lone = json.loads('"\\ud800"')
    call = ToolCall("t1", "transfer", json.dumps({"to": lone, "amount": 1}, ensure_ascii=False))
    suspended = await bank_agent(bank, [call], "Done.").run("pay").collect()
    assert suspended.snapshot is not None

    text = dumps(suspended.snapshot)

    text.encode("utf-8")  # writable to any UTF-8 file or store
    assert loads(RunSnapshot, text) == suspended.snapshot


async def test_a_snapshot_does_not_resume_on_another_agent() -> None:
    bank = Bank()
    agent = bank_agent(bank, [transfer_call()], "Sent.")
    suspended = await agent.run("pay").collect()
    assert suspended.snapshot is not None
    impostor = bank_agent(bank, "Sent.", name="other-teller")

    with pytest.raises(SnapshotMismatch):
        impostor.resume(suspended.snapshot, decisions=[suspended.pending[0].approve()])
    with pytest.raises(SnapshotMismatch):
        impostor.resume(suspended.snapshot)
    assert bank.ran == []


async def test_a_snapshot_whose_batch_was_edited_never_runs_unapproved_arguments() -> None:
    bank = Bank()
    agent = bank_agent(bank, [transfer_call(amount=10)], "Sent.")
    suspended = await agent.run("pay").collect()
    snapshot = suspended.snapshot
    assert snapshot is not None
    state = snapshot.state
    edited = dataclasses.replace(
        snapshot,
        state=dataclasses.replace(state, calls=(transfer_call(amount=10_000),)),
    )
    approval = suspended.pending[0].approve()  # the human approved 10, as shown

    try:
        resumed = agent.resume(edited, decisions=[approval])
    except (ApprovalMismatch, SnapshotMismatch):
        return
    await drain(resumed)
    assert "transfer 10000 to ann" not in bank.ran
