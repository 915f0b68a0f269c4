"""Resuming from a run store, driven by real agents on every backend (SQLite, PostgreSQL):
a tampered store or a changed chart is refused before anything runs, naming what is wrong;
sessions carry a conversation across runs and processes; `RunConfig(redact=...)` reaches
everything a store or a trace writes; nested runs (an agent as a tool, a handoff target)
resume where they stopped.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from store_drivers import TRANSFER, remembering, resume_approved, teller
from store_support import KEY, Backend, run_in_thread

from helikon import Agent, RunConfig, ScriptedModel, ToolCall, compile_chart, tool
from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.chart.dsl import AgentLoopChart
from helikon.core.codec import dumps
from helikon.core.items import AssistantMessage, ToolResult, UserMessage
from helikon.durable import StoreCorrupt
from helikon.run import ApprovalMismatch, SnapshotMismatch

ROOT = Path(__file__).resolve().parent.parent
REQUEST = ApprovalRequest.for_call(TRANSFER)


async def suspended(backend: Backend, log: Path) -> None:
    result = await teller(log).run("pay ann 10", store=backend.open(), run_id="r1").collect()
    assert result.suspended


# ---------------------------------------------------------------- refused before anything runs

FORGED = dumps(ApprovalDecision("t1", REQUEST.arguments_hash, True, "", "r1", 2))
TAMPERED = {
    "an edited record": (
        "UPDATE records SET data = replace(data, 'pay ann 10', 'pay eve 99')",
        "(record 1) does not chain",
    ),
    "a forged approval row": (
        "INSERT INTO decisions (run_id, seq, call_id, data, mac, link) "
        f"SELECT 'r1', 2, 't1', '{FORGED}', '{'0' * 64}', chain_n + 1 FROM runs",
        "the decision on call 't1' at step 2 is not in its chain",
    ),
    "the event the run started with removed": (
        "DELETE FROM effects WHERE n = 1",
        "link 1 of 4, after its start, is missing (a row was removed)",
    ),
    "a wrong chart digest in the header": (
        'UPDATE runs SET header = replace(header, \'"chart_digest":"\', \'"chart_digest":"0\')',
        "its header does not match its signature",
    ),
    "an edited chart": (
        "UPDATE charts SET data = replace(data, 'CallingModel', 'CallingMole')",
        "(edited)",
    ),
    "the last record removed": (
        "DELETE FROM records WHERE seq = 2",
        "after record 1, is missing (a row was removed)",
    ),
}


@pytest.mark.parametrize("tampering", TAMPERED, ids=list(TAMPERED))
async def test_a_tampered_store_refuses_to_resume_naming_what_is_wrong(
    backend: Backend, tmp_path: Path, tampering: str
) -> None:
    log = tmp_path / "transfers.log"
    await suspended(backend, log)
    statement, named = TAMPERED[tampering]
    backend.sql(statement)
    store = backend.open()
    decision = REQUEST.bound("r1", 2).approve()
    with pytest.raises(StoreCorrupt, match="run 'r1'") as refused:
        await teller(log).resume("r1", [decision], store=store).collect()
    assert named in str(refused.value)
    assert not log.exists()  # the transfer never ran
    (info,) = store.runs()
    assert (info.status, info.lease_owner) == ("suspended", None)  # nothing was claimed


class TellerV2(AgentLoopChart):
    """The default loop under another name: another chart, another digest."""


async def test_a_suspended_run_whose_chart_changed_is_refused_naming_both_digests(
    backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    await suspended(backend, log)
    store = backend.open()
    old = store.get("r1").header.chart_digest
    changed = teller(log, chart=compile_chart(TellerV2))
    new = changed.chart.digest if changed.chart is not None else ""
    assert new and new != old
    with pytest.raises(SnapshotMismatch) as refused:
        changed.resume("r1", [REQUEST.bound("r1", 2).approve()], store=store)
    assert f"old {old}, new {new}" in str(refused.value)
    assert not log.exists() and store.get("r1").info.status == "suspended"
    assert store.get("r1").decisions == ()  # nothing spent
    assert await resume_approved(store, "r1", log) == "completed"  # the old chart still can


# ---------------------------------------------------------------- sessions


def seen(model: ScriptedModel) -> list[Any]:
    return [getattr(item, "content", None) for item in model.requests[0].items]


async def test_a_session_carries_the_conversation_across_runs(backend: Backend) -> None:
    store = backend.open()
    session = store.session("user-42")
    first, model = remembering()
    await first.run("My name is Ann.", store=store, run_id="a", session=session).collect()
    assert seen(model) == ["My name is Ann."]
    second, model = remembering()
    result = await second.run("And my name?", store=store, run_id="b", session=session).collect()
    assert result.final_output == "Noted."
    assert seen(model) == ["My name is Ann.", "Noted.", "And my name?"]
    assert backend.open().session("user-42").items() == (
        UserMessage("My name is Ann."),
        AssistantMessage("Noted.", "memo"),
        UserMessage("And my name?"),
        AssistantMessage("Noted.", "memo"),
    )
    assert store.session("someone-else").items() == ()
    # a run of the session starts from its items, and the session knows how many they were
    stored = store.get("b")
    assert stored.header.session_items == 2
    assert [i for r in stored.records for i in r.appends][2:] == [
        UserMessage("And my name?"),
        AssistantMessage("Noted.", "memo"),
    ]


def in_a_process(backend: Backend, run_id: str, text: str) -> dict[str, Any]:
    script = str(ROOT / "tests" / "session_driver.py")
    done = subprocess.run(
        [sys.executable, script, backend.url, KEY.decode(), "user-42", run_id, text],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def test_a_session_carries_the_conversation_across_processes(backend: Backend) -> None:
    assert in_a_process(backend, "a", "My name is Ann.")["seen"] == ["My name is Ann."]
    agent, model = remembering()
    session = backend.open().session("user-42")
    await agent.run("Still there?", store=backend.open(), run_id="b", session=session).collect()
    assert seen(model) == ["My name is Ann.", "Noted.", "Still there?"]
    third = in_a_process(backend, "c", "Bye.")
    assert third == {
        "output": "Noted.",
        "seen": ["My name is Ann.", "Noted.", "Still there?", "Noted.", "Bye."],
    }


async def test_a_suspended_run_adds_to_its_session_when_it_ends_after_resuming(
    backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    store = backend.open()
    session = store.session("s1")
    await teller(log).run("pay ann 10", store=store, run_id="r1", session=session).collect()
    assert session.items() == ()  # it has not ended
    assert await resume_approved(backend.open(), "r1", log) == "completed"
    items = session.items()
    assert items[0] == UserMessage("pay ann 10") and items[-1] == AssistantMessage(
        "Sent.", "teller"
    )


# ---------------------------------------------------------------- redaction


def texts(backend: Backend, *tables: str) -> list[str]:
    """Every text column of every row of `tables`, as the database holds it."""
    return [
        text
        for table in tables
        for row in backend.sql(f"SELECT * FROM {table}")
        for text in row
        if isinstance(text, str)
    ]


def hide(text: str) -> str:
    return text.replace("4111", "[card]")


async def test_redaction_reaches_the_store_the_trace_and_the_session(
    backend: Backend, tmp_path: Path
) -> None:
    charged: list[str] = []

    @tool
    async def charge(card: str) -> str:
        """Charge a card."""
        charged.append(card)
        return f"charged {card}"

    call = ToolCall("c1", "charge", '{"card": "4111"}')
    model = ScriptedModel([[call], "Charged 4111."])
    config = RunConfig(redact=hide)
    agent = Agent("shop", model, tools=[charge], config=config)
    store = backend.open()
    trace = tmp_path / "run.jsonl"
    streaming = agent.run(
        "my card is 4111", store=store, run_id="r1", trace=trace, session=store.session("s")
    )
    events = [event async for event in streaming]
    assert events[-1].output.text == "Charged 4111."  # the caller sees the run as it was
    assert charged == ["4111"]  # and the tool got the real arguments
    assert any("4111" in json.dumps(dumps(event)) for event in events)
    rows = texts(backend, "runs", "records", "effects", "calls", "sessions")
    assert rows and not [text for text in rows if "4111" in text]
    assert "[card]" in " ".join(rows)
    written = trace.read_text()
    assert "4111" not in written and "[card]" in written
    stored = store.get("r1")  # what was written checks out and reads back redacted
    assert stored.calls[0].result is not None
    assert stored.calls[0].result.content == "charged [card]"
    assert store.session("s").items()[0] == UserMessage("my card is [card]")


class Card(BaseModel):
    number: str


async def test_redaction_reaches_typed_outputs_reasons_and_a_secret_split_across_deltas(
    backend: Backend, tmp_path: Path
) -> None:
    """A typed output's value, a rejection's reason, and a secret the model streamed in two
    fragments ("4111 " and "1111") are kept redacted: the value's strings go through the
    hook, and a redacted run's trace keeps no fragments, only the message they build."""

    def whole(text: str) -> str:
        return text.replace("4111 1111", "[card]")

    @tool(needs_approval=True)
    async def charge(card: str) -> str:
        """Charge a card."""
        return "charged"

    call = ToolCall("c1", "charge", '{"card": "4111 1111"}')
    answers = [[call], "Refused for 4111 1111.", '{"number": "4111 1111"}']  # the last: Finalizing
    model = ScriptedModel(answers)
    config = RunConfig(redact=whole)
    agent = Agent("shop", model, tools=[charge], config=config, output_type=Card)
    store = backend.open()
    trace = tmp_path / "run.jsonl"
    first = await agent.run("card 4111 1111", store=store, run_id="r1", trace=trace).collect()
    (request,) = first.pending
    decision = request.reject("refused: 4111 1111 is blocked")
    resumed = await agent.resume("r1", store=store, decisions=[decision], trace=trace).collect()
    assert resumed.final_output == '{"number": "4111 1111"}'  # the caller sees it whole
    rows = texts(backend, "runs", "records", "effects", "calls", "decisions")
    assert not [text for text in rows if "1111" in text]
    written = trace.read_text()
    assert "1111" not in written
    assert '"token_delta"' not in written and "[card]" in written
    stored = store.get("r1")  # what was written checks out and reads back redacted
    assert stored.records[-1].state_after.output.value == {"number": "[card]"}
    assert stored.decisions[0][1].reason == "refused: [card] is blocked"


# ---------------------------------------------------------------- nested runs


class Crash(BaseException):
    """The driver's process dies here: nothing more is written, nothing released."""


def crash_once(crashed: list[str], where: str) -> None:
    if where not in crashed:
        crashed.append(where)
        raise Crash


async def crashed_then_resumed(backend: Backend, agent: Any, resume: Any) -> Any:
    def first() -> None:
        with pytest.raises(Crash):
            asyncio.run(agent().run("go", store=backend.open(), run_id="root").collect())

    run_in_thread(first).join(30)
    return await resume().resume("root", store=backend.open(), force=True).collect()


async def test_an_agent_as_tool_call_in_flight_resumes_its_child_run(backend: Backend) -> None:
    ran: list[str] = []
    crashed: list[str] = []

    @tool(idempotent=True)
    async def step(n: int) -> str:
        """Do step n."""
        if n == 2:
            crash_once(crashed, "step 2")
        ran.append(f"step {n}")
        return f"did {n}"

    def root() -> Agent:
        child = Agent(
            "worker",
            ScriptedModel(
                [
                    [ToolCall("s", "step", '{"n": 1}')],
                    [ToolCall("s", "step", '{"n": 2}')],
                    "worked",
                ]
            ),
            tools=[step],
        )
        calls = [ToolCall("w1", "worker", '{"input": "work"}')]
        return Agent("boss", ScriptedModel([calls, "All done."]), tools=[child.as_tool()])

    result = await crashed_then_resumed(backend, root, root)
    assert result.final_output == "All done."
    assert ran == ["step 1", "step 2"]  # the child's finished step did not run again
    store = backend.open()
    (child,) = [info for info in store.runs(include_nested=True) if info.parent_run_id]
    assert (child.parent_run_id, child.agent, child.status) == ("root", "worker", "completed")
    assert [i.run_id for i in store.runs()] == ["root"]
    stored = store.get("root")
    (worker_call,) = [c for c in stored.calls if c.call_id == "w1"]
    assert worker_call.result is not None and worker_call.result.content == "worked"


async def test_a_handoff_target_resumes_where_it_stopped(backend: Backend) -> None:
    ran: list[str] = []
    crashed: list[str] = []

    @tool(idempotent=True)
    async def refund(order: str) -> str:
        """Refund an order."""
        ran.append(order)
        if len(ran) == 2:
            crash_once(crashed, "second refund")
        return f"refunded {order}"

    def root() -> Agent:
        billing = Agent(
            "billing",
            ScriptedModel(
                [
                    [ToolCall("r", "refund", '{"order": "o1"}')],
                    [ToolCall("r", "refund", '{"order": "o2"}')],
                    "Refunded both.",
                ]
            ),
            tools=[refund],
        )
        front = ScriptedModel([[ToolCall("h1", "transfer_to_billing", "{}")]])
        return Agent("front", front, handoffs=[billing])

    result = await crashed_then_resumed(backend, root, root)
    assert result.final_output == "Refunded both."
    assert ran == ["o1", "o2", "o2"]  # o1 finished before the crash; o2 was in flight
    store = backend.open()
    (target,) = [info for info in store.runs(include_nested=True) if info.parent_run_id]
    assert (target.parent_run_id, target.agent, target.status) == ("root", "billing", "completed")
    assert store.get("root").info.status == "completed"


async def test_a_scripted_model_resumes_at_its_turn_in_a_fresh_process(
    backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    await suspended(backend, log)
    store = backend.open()
    decisions = [request.approve() for request in store.pending("r1")]
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from store_drivers import teller\n"
        "from helikon.core.approvals import ApprovalDecision\n"
        "from helikon.core.codec import loads\n"
        "from helikon.durable import open_store\n"
        "store = open_store(sys.argv[1], key=sys.argv[2])\n"
        "decision = loads(ApprovalDecision, sys.argv[4])\n"
        "run = teller(Path(sys.argv[3])).resume('r1', [decision], store=store)\n"
        "print(asyncio.run(run.collect()).final_output)\n"
        "store.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, backend.url, KEY.decode(), str(log), dumps(decisions[0])],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Sent.\n"  # its model's second turn, not its first again
    assert log.read_text() == "transfer 10 to ann\n"


# ---------------------------------------------------------------- approved, then killed


@pytest.mark.parametrize("decided_by", ["resume", "handler"])
async def test_a_run_killed_while_an_approved_call_ran_resumes_with_it_interrupted(
    backend: Backend, decided_by: str
) -> None:
    """Approved (by `agent.resume(decisions)` or by a handler), the call started, the
    process died: the resumed run neither asks again nor is refused; the call, which may
    have run, is not run again."""
    ran: list[str] = []
    crashed: list[str] = []

    @tool(needs_approval=True)
    async def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(f"pay {amount}")
        crash_once(crashed, "pay")
        return "paid"

    def payer(**options: Any) -> Agent:
        calls = [ToolCall("p1", "pay", '{"amount": 5}')]
        return Agent("payer", ScriptedModel([calls, "Paid."]), tools=[pay], **options)

    def first() -> None:
        async def go() -> None:
            if decided_by == "handler":
                agent = payer(on_approval=lambda request, context: True)
                await agent.run("pay 5", store=backend.open(), run_id="p").collect()
                return
            result = await payer().run("pay 5", store=backend.open(), run_id="p").collect()
            assert result.suspended
            store = backend.open()
            decisions = [request.approve() for request in store.pending("p")]
            await payer().resume("p", decisions, store=store).collect()

        with pytest.raises(Crash):
            asyncio.run(go())

    run_in_thread(first).join(30)
    result = await payer().resume("p", store=backend.open(), force=True).collect()
    assert result.final_output == "Paid."
    assert ran == ["pay 5"]  # not run again
    stored = backend.open().get("p")
    results = [i for r in stored.records for i in r.appends if isinstance(i, ToolResult)]
    assert [(r.call_id, r.content.split(":")[:2]) for r in results] == [
        ("p1", ["error", " interrupted"])
    ]


async def test_decisions_spent_by_a_resume_that_stopped_are_applied_by_the_next(
    backend: Backend, tmp_path: Path
) -> None:
    """A resume spent its decision and died before the step it leads to: the call is no
    longer pending (the decision is spent once), and the next resume goes on with it."""
    log = tmp_path / "transfers.log"
    await suspended(backend, log)
    store = backend.open()
    (request,) = store.pending("r1")
    await store.decide("r1", request.seq, [request.approve()])  # then the process died

    assert store.pending("r1") == ()
    assert await store.apending("r1") == ()
    with pytest.raises(ApprovalMismatch, match=r"already decided.*go on with the recorded"):
        teller(log).resume("r1", [request.reject()], store=store)
    result = await teller(log).resume("r1", store=store).collect()
    assert result.final_output == "Sent."
    assert log.read_text() == "transfer 10 to ann\n"  # approved, as recorded, once


async def test_decisions_spent_after_a_resume_read_the_run_make_it_read_again_not_miss_them(
    backend: Backend, tmp_path: Path
) -> None:
    """Two resumes, interleaved: the first read the run, then the second spent a decision
    (and stopped) before the first claimed the lease. The head did not move, but the first
    must not go on without that decision (it would wait on the call again, or decide it
    twice)."""
    log = tmp_path / "transfers.log"
    await suspended(backend, log)
    store = backend.open()
    first = teller(log).resume("r1", store=store)  # read the run: t1 pending, not claimed
    (request,) = store.pending("r1")
    await backend.open().decide("r1", request.seq, [request.approve()])  # the second's

    with pytest.raises(SnapshotMismatch, match="had decisions spent at step 2 by another resume"):
        await first.collect()
    assert not log.exists()  # the first ran nothing
    result = await teller(log).resume("r1", store=store).collect()  # read again: it goes on
    assert result.final_output == "Sent."
    assert log.read_text() == "transfer 10 to ann\n"  # approved, as spent, once
