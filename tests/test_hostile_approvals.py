"""Approvals under attack: every answer that does not bind fails closed, every tampered
snapshot is refused, and an approval is spent once.

Each test plays the attacker or the unlucky user of issue 9: a handler quoting the wrong
hash, truthy strings, an edited snapshot, one approval spent three times or in another run,
approve and reject for one call, a handler or guardrail that raises. The calls needing
approval are a bank transfer; `Bank.ran` says whether money moved.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from driver_support import drain, ends_once
from pydantic import ValidationError

from helikon import (
    Agent,
    ApprovalDecision,
    ApprovalRequest,
    InputGuardrail,
    OutputGuardrail,
    RunConfig,
    RunFailed,
    RunSnapshot,
    ScriptedModel,
    ToolCall,
    tool,
)
from helikon.core import ApprovalDecisions, ExecutingTools
from helikon.core.codec import dumps, loads
from helikon.run import ApprovalMismatch, SnapshotMismatch

ROOT = Path(__file__).resolve().parent.parent


class Bank:
    """`transfer` needs approval, `balance` does not; `ran` records what ran."""

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


def transfer_call(call_id: str = "t1", amount: int = 10) -> ToolCall:
    return ToolCall(call_id, "transfer", json.dumps({"to": "ann", "amount": amount}))


def teller(bank: Bank, *turns: Any, **kwargs: Any) -> Agent:
    return Agent("teller", ScriptedModel(list(turns)), tools=bank.tools, **kwargs)


async def suspended(bank: Bank, **kwargs: Any) -> tuple[Agent, Any]:
    agent = teller(bank, [transfer_call(), ToolCall("b1", "balance", "{}")], "Sent.", **kwargs)
    result = await agent.run("pay ann 10").collect()
    assert result.suspended and result.snapshot is not None
    return agent, result


# ---------------------------------------------------------------- in-process handlers


class Handler:
    """An approval handler with a fixed answer; it refuses to be asked a hundred times (the
    spin issue 9 saw: 548k calls in 5 s), so a loop fails the test instead of hanging it."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked = 0

    def __call__(self, request: ApprovalRequest, context: Any) -> Any:
        self.asked += 1
        if self.asked > 100:
            raise AssertionError("the run keeps asking: a retry loop")
        return self.answer(request) if callable(self.answer) else self.answer


def rehashed(request: ApprovalRequest) -> ApprovalDecision:
    """The easy mistake: hashing re-serialized arguments instead of the model's text."""
    text = json.dumps(json.loads(request.call.arguments), separators=(",", ":"))
    from helikon import arguments_hash

    return ApprovalDecision(request.call.call_id, arguments_hash(text), True)


ANSWERS_THAT_DO_NOT_BIND = {
    "hash of re-serialized arguments": rehashed,
    "the string no": "no",
    "the string yes": "yes",
    "one": 1,
    "none": None,
    "another call's decision": lambda r: ApprovalRequest.for_call(transfer_call("x9")).approve(),
    "an unstamped decision": lambda r: ApprovalRequest(r.call, r.arguments_hash).approve(),
}


@pytest.mark.parametrize("case", sorted(ANSWERS_THAT_DO_NOT_BIND))
async def test_a_handler_answer_that_does_not_bind_fails_the_run_at_once(case: str) -> None:
    bank = Bank()
    handler = Handler(ANSWERS_THAT_DO_NOT_BIND[case])
    agent = teller(bank, [transfer_call()], "Sent.", on_approval=handler)

    events = await asyncio.wait_for(drain(agent.run("pay ann 10")), timeout=10)

    failed = ends_once(events, RunFailed)
    assert failed.error.kind == "approval_not_bound"
    assert (failed.error.call_id, failed.error.tool) == ("t1", "transfer")
    assert handler.asked == 1
    assert bank.ran == [], "an answer that does not bind never approves the call"


async def test_a_bound_handler_answer_runs_the_call() -> None:
    bank = Bank()
    for answer in (True, lambda request: request.approve("fine")):
        agent = teller(bank, [transfer_call()], "Sent.", on_approval=Handler(answer))
        assert (await agent.run("pay").collect()).final_output == "Sent."
    assert bank.ran == ["transfer 10 to ann"] * 2


def test_a_decision_is_approved_by_a_bool_only() -> None:
    request = ApprovalRequest.for_call(transfer_call())
    with pytest.raises(TypeError, match="must be True or False"):
        ApprovalDecision("t1", request.arguments_hash, "false")  # type: ignore[arg-type]
    text = dumps(request.approve()).replace('"approved":true', '"approved":"false"')
    with pytest.raises(ValidationError, match="approved"):
        loads(ApprovalDecision, text)


async def test_a_handler_that_raises_fails_the_run_naming_it() -> None:
    bank = Bank()

    def broken(request: ApprovalRequest, context: Any) -> bool:
        raise RuntimeError("approvals service down")

    agent = teller(bank, [transfer_call()], "Sent.", on_approval=broken)
    failed = ends_once(await drain(agent.run("pay")), RunFailed)
    assert failed.error.kind == "approval_handler_failed"
    assert failed.error.message == "RuntimeError: approvals service down"
    assert bank.ran == []


async def test_a_guardrail_that_raises_fails_the_run_naming_it() -> None:
    def broken(text: str, context: Any) -> bool:
        raise ValueError("classifier unreachable")

    model = ScriptedModel(["hello"])
    inputs = Agent("a", model, input_guardrails=[InputGuardrail("pii", broken)])
    failed = ends_once(await drain(inputs.run("hi")), RunFailed)
    assert (failed.error.kind, failed.error.guardrail, failed.error.stage) == (
        "guardrail_failed",
        "pii",
        "input",
    )
    assert model.requests == [], "no model call is made when the input cannot be checked"

    outputs = Agent(
        "b", ScriptedModel(["hello"]), output_guardrails=[OutputGuardrail("tone", broken)]
    )
    failed = ends_once(await drain(outputs.run("hi")), RunFailed)
    assert (failed.error.kind, failed.error.guardrail, failed.error.stage) == (
        "guardrail_failed",
        "tone",
        "output",
    )


# ---------------------------------------------------------------- snapshots


def with_state(snapshot: RunSnapshot, **changes: Any) -> RunSnapshot:
    return dataclasses.replace(snapshot, state=dataclasses.replace(snapshot.state, **changes))


TAMPERINGS = {
    "a pending call moved into allowed": lambda s: with_state(
        s, pending=(), allowed=(*s.state.allowed, s.state.pending[0].call)
    ),
    "the phase switched to ExecutingTools": lambda s: dataclasses.replace(
        s, state=ExecutingTools(s.state.calls, s.state.turn, s.state.usage)
    ),
    "a forged next input approving the call": lambda s: dataclasses.replace(
        s, next_input=ApprovalDecisions((s.state.pending[0].approve(),))
    ),
    "the amount raised": lambda s: with_state(s, calls=(transfer_call(amount=10_000),)),
}


@pytest.mark.parametrize("case", sorted(TAMPERINGS))
async def test_a_tampered_snapshot_is_refused_and_runs_nothing(case: str) -> None:
    bank = Bank()
    agent, result = await suspended(bank)
    forged = TAMPERINGS[case](result.snapshot)

    with pytest.raises(SnapshotMismatch):
        resumed = agent.resume(forged)
        await drain(resumed)
    assert bank.ran == []


@pytest.mark.parametrize("case", sorted(TAMPERINGS))
async def test_a_trusted_unsigned_snapshot_is_still_derived_not_believed(case: str) -> None:
    """With `trust_unsigned=True` the signature is not asked for, but which calls need
    approval still comes from the policy, not from the file."""
    bank = Bank()
    agent, result = await suspended(bank)
    forged = dataclasses.replace(TAMPERINGS[case](result.snapshot), signature="")

    with pytest.raises(SnapshotMismatch):
        await drain(agent.resume(forged, trust_unsigned=True))
    assert bank.ran == []


async def test_an_unsigned_snapshot_resumes_only_when_trusted() -> None:
    bank = Bank()
    agent, result = await suspended(bank)
    unsigned = dataclasses.replace(result.snapshot, signature="")
    decision = result.pending[0].approve()

    with pytest.raises(SnapshotMismatch, match="not signed"):
        agent.resume(unsigned, [decision])
    done = await agent.resume(unsigned, [decision], trust_unsigned=True).collect()
    assert done.final_output == "Sent."


async def test_a_snapshot_signed_with_another_key_is_refused() -> None:
    bank = Bank()
    agent, result = await suspended(bank, config=RunConfig(snapshot_key=b"first key"))
    other = RunConfig(snapshot_key=b"second key")
    with pytest.raises(SnapshotMismatch, match="does not match its signature"):
        agent.resume(result.snapshot, [result.pending[0].approve()], config=other)
    assert "first key" not in repr(RunConfig(snapshot_key=b"first key"))


def test_a_snapshot_resumes_in_another_process_with_the_same_key(tmp_path: Path) -> None:
    """The documented flow: suspend and dump in one process, resume in another, both
    given the key through HELIKON_SNAPSHOT_KEY."""
    script = tmp_path / "flow.py"
    script.write_text(
        f"""
import asyncio, json, sys
sys.path.insert(0, {str(ROOT / "tests")!r})
from test_hostile_approvals import Bank, transfer_call, teller
from helikon import ApprovalDecision, RunSnapshot, ToolCall
from helikon.core.codec import dumps, loads

async def main(step):
    bank = Bank()
    # A fresh process's scripted model starts at its first turn: give it what is left.
    turns = [[transfer_call()], "Sent."] if step == "suspend" else ["Sent."]
    agent = teller(bank, *turns)
    if step == "suspend":
        result = await agent.run("pay").collect()
        print(dumps(result.snapshot))
    else:
        snapshot = loads(RunSnapshot, sys.stdin.read())
        decision = snapshot.pending()[0].approve()
        result = await agent.resume(snapshot, [decision]).collect()
        print(result.final_output, bank.ran)

asyncio.run(main(sys.argv[1]))
"""
    )

    def step(name: str, key: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HELIKON_SNAPSHOT_KEY": key}
        return subprocess.run(
            [sys.executable, str(script), name],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    dumped = step("suspend", "shared secret")
    assert dumped.returncode == 0, dumped.stderr
    resumed = step("resume", "shared secret", dumped.stdout)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "Sent. ['transfer 10 to ann']"
    refused = step("resume", "another secret", dumped.stdout)
    assert refused.returncode != 0 and "does not match its signature" in refused.stderr


# ---------------------------------------------------------------- single use, binding


async def test_one_approval_is_spent_once() -> None:
    bank = Bank()
    agent, result = await suspended(bank)
    approval = result.pending[0].approve()

    first = await agent.resume(result.snapshot, [approval]).collect()
    assert first.final_output == "Sent."
    for _ in range(2):
        with pytest.raises(SnapshotMismatch, match="already resumed"):
            await drain(agent.resume(result.snapshot, [approval]))
    assert bank.ran.count("transfer 10 to ann") == 1


async def test_an_approval_binds_to_its_own_run_only() -> None:
    bank = Bank()
    agent, run_a = await suspended(bank)
    _, run_b = await suspended(bank)
    assert run_a.pending[0].call == run_b.pending[0].call  # same call id and arguments

    with pytest.raises(ApprovalMismatch, match="is for run"):
        agent.resume(run_b.snapshot, [run_a.pending[0].approve()])
    assert bank.ran == []


async def test_approve_and_reject_for_one_call_are_refused() -> None:
    bank = Bank()
    agent, result = await suspended(bank)
    request = result.pending[0]

    with pytest.raises(ApprovalMismatch, match="two decisions for call 't1'"):
        agent.resume(result.snapshot, [request.approve(), request.reject()])
    assert bank.ran == []


# ---------------------------------------------------------------- odd inputs


async def test_resuming_a_finished_run_is_a_clear_error() -> None:
    agent = teller(Bank(), "Nothing to do.")
    streaming = agent.run("hi")
    await streaming.collect()
    assert streaming.run is not None
    with pytest.raises(SnapshotMismatch, match=r"already ended \(Done\)"):
        agent.resume(streaming.run.snapshot())


@pytest.mark.parametrize("field", ["max_turns", "max_agent_depth", "token_budget"])
def test_a_bool_is_not_a_count(field: str) -> None:
    with pytest.raises(ValueError, match=f"RunConfig.{field} must be an integer"):
        RunConfig(**{field: True})
