"""Real runs through every run store (SQLite and PostgreSQL, `store_support.backend`): what a
run streams is what it stores; a suspended run resumes in a fresh agent, once; and of two
drivers racing for one run, in threads or in processes, exactly one proceeds.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from driver_support import DELTAS
from store_drivers import TRANSFER, resume_approved, teller
from store_support import KEY, Backend, race, run_in_thread

from helikon import Agent, RunConfig, ScriptedModel, ToolCall, tool
from helikon.core.approvals import ApprovalRequest
from helikon.durable import (
    CallRecord,
    DecisionSpent,
    Lease,
    RunLeased,
    RunStore,
    StoreCorrupt,
)
from helikon.run import SnapshotMismatch

ROOT = Path(__file__).resolve().parent.parent
REQUEST = ApprovalRequest.for_call(TRANSFER)


async def test_a_stored_run_keeps_the_events_it_streamed(store: RunStore, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    agent = teller(log, on_approval=lambda request, context: True)
    streamed = [event async for event in agent.run("pay ann 10", store=store, run_id="r1")]
    assert streamed[-1].type == "run_completed"
    assert list(store.events("r1")) == [e for e in streamed if e.type not in DELTAS]
    stored = store.get("r1")
    assert stored.info.status == "completed" and stored.info.lease_owner is None
    assert [(c.call_id, c.result.content if c.result else None) for c in stored.calls] == [
        ("t1", "sent 10 to ann")
    ]
    assert log.read_text() == "transfer 10 to ann\n"


async def test_a_suspended_run_resumes_in_a_fresh_agent_once(
    backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    result = await teller(log).run("pay ann 10", store=backend.open(), run_id="r1").collect()
    assert result.suspended

    store = backend.open()  # another process, as far as the store can tell
    assert store.get("r1").info.status == "suspended"
    assert store.pending("r1") == (REQUEST.bound("r1", 2),)
    assert await resume_approved(store, "r1", log) == "completed"
    assert store.get("r1").info.status == "completed"
    assert log.read_text() == "transfer 10 to ann\n"

    with pytest.raises(SnapshotMismatch, match="already ended"):
        teller(log).resume("r1", [REQUEST.bound("r1", 2).approve()], store=store)
    assert log.read_text() == "transfer 10 to ann\n"


async def test_a_decision_spent_by_one_resume_is_refused_to_the_next(
    backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    await teller(log).run("pay ann 10", store=backend.open(), run_id="r1").collect()
    store = backend.open()
    decisions = [request.approve() for request in store.pending("r1")]
    first = teller(log).resume("r1", decisions, store=store)
    second = teller(log).resume("r1", decisions, store=backend.open())  # read the same head
    await first.collect()
    with pytest.raises((DecisionSpent, SnapshotMismatch)):  # spent, or the run moved on
        await second.collect()
    assert log.read_text() == "transfer 10 to ann\n"


def assert_one_proceeded(outcomes: list[Any]) -> None:
    """One driver completed the run; the other was refused before it wrote or ran anything."""
    assert outcomes.count("completed") == 1, outcomes
    (other,) = (outcome for outcome in outcomes if outcome != "completed")
    assert other in ("RunLeased", "DecisionSpent", "LeaseLost", "SnapshotMismatch"), outcomes


async def suspend(backend: Backend, log: Path) -> None:
    store = backend.open()
    await teller(log).run("pay ann 10", store=store, run_id="r1").collect()
    assert store.get("r1").info.status == "suspended"


async def test_two_drivers_in_threads_exactly_one_proceeds(
    backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    await suspend(backend, log)
    stores = [backend.open(), backend.open()]
    barrier = threading.Barrier(2)
    outcomes = race(2, lambda i: resume_approved(stores[i], "r1", log, barrier.wait))
    assert_one_proceeded(outcomes)
    assert log.read_text() == "transfer 10 to ann\n"
    assert stores[0].get("r1").info.status == "completed"


async def test_two_drivers_in_processes_exactly_one_proceeds(
    backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    await suspend(backend, log)
    ready = tmp_path / "ready"
    ready.mkdir()
    script = str(ROOT / "tests" / "store_drivers.py")
    args = [backend.url, KEY.decode(), "r1", str(log), str(ready)]
    drivers = [
        subprocess.Popen(
            [sys.executable, script, *args, name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "HELIKON_STRICT_VALUES": "1", "PATH": "/usr/bin:/bin"},
        )
        for name in ("d1", "d2")
    ]
    outcomes = []
    for driver in drivers:
        out, err = driver.communicate(timeout=120)
        assert driver.returncode == 0, err
        outcomes.append(json.loads(out)["outcome"])
    assert_one_proceeded(outcomes)
    assert log.read_text() == "transfer 10 to ann\n"
    assert backend.open().get("r1").info.status == "completed"


class Crash(BaseException):
    """The driver's process dies (nothing is released, nothing more is written)."""


class CrashAtSecondCall:
    """A store whose driver dies as its second tool call starts (with one call at a time,
    the first call's row goes with the record that asks for the batch, the second's on
    its own, as it starts)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def start_call(self, run_id: str, lease: Lease, record: CallRecord) -> None:
        assert record.call_id == "p2"
        raise Crash


def paying(ran: list[str]) -> Callable[[], Agent]:
    """An agent paying ann, then bob, one call at a time (`pay` is not idempotent)."""

    @tool
    async def pay(to: str) -> str:
        """Pay someone."""
        ran.append(to)
        return f"paid {to}"

    def payer() -> Agent:
        calls = [ToolCall("p1", "pay", '{"to": "ann"}'), ToolCall("p2", "pay", '{"to": "bob"}')]
        config = RunConfig(parallel_tool_call_limit=1)
        return Agent("payer", ScriptedModel([calls, "Paid."]), tools=[pay], config=config)

    return payer


def crash_at_second_call(backend: Backend, payer: Callable[[], Agent]) -> None:
    """Run "r1" until its driver dies as bob's call starts: ann's call finished."""

    def crash() -> None:
        with pytest.raises(Crash):
            store = CrashAtSecondCall(backend.open())
            asyncio.run(payer().run("pay", store=store, run_id="r1").collect())

    run_in_thread(crash).join(30)


async def test_a_driver_that_read_a_stale_head_runs_nothing(backend: Backend) -> None:
    ran: list[str] = []
    payer = paying(ran)
    crash_at_second_call(backend, payer)
    assert ran == ["ann"]
    first = payer().resume("r1", store=backend.open(), force=True)  # its owner is dead
    stale = payer().resume("r1", store=backend.open())  # reads the same head
    assert (await first.collect()).final_output == "Paid."
    assert ran == ["ann", "bob"]
    with pytest.raises(SnapshotMismatch, match="moved on"):  # claimed, then refused
        await stale.collect()
    assert ran == ["ann", "bob"]


async def test_a_finished_call_whose_row_was_removed_is_refused_not_paid_again(
    backend: Backend,
) -> None:
    """Removing a finished call's row needs no key: resuming would pay ann twice. The
    run's chain misses a link, so the run is refused before anything runs."""
    ran: list[str] = []
    payer = paying(ran)
    crash_at_second_call(backend, payer)
    backend.sql("DELETE FROM calls WHERE call_id = 'p1'")
    with pytest.raises(StoreCorrupt, match=r"run 'r1': link \d of \d, after record 2, is missing"):
        await payer().resume("r1", store=backend.open(), force=True).collect()
    assert ran == ["ann"]


class Recording:
    """A store that notes which writes carry which call rows (and passes them on)."""

    def __init__(self, store: RunStore) -> None:
        self.store, self.writes = store, list[tuple[str, tuple[str, ...]]]()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def append(self, *args: Any) -> str:
        calls = args[6] if len(args) > 6 else ()
        rows = tuple(f"{c.call_id}:{'result' if c.finished else 'start'}" for c in calls)
        self.writes.append(("record", rows))
        return await self.store.append(*args)

    async def start_call(self, run_id: str, lease: Lease, record: CallRecord) -> None:
        self.writes.append(("start_call", (record.call_id,)))
        await self.store.start_call(run_id, lease, record)

    async def finish_call(self, run_id: str, lease: Lease, *records: CallRecord) -> None:
        self.writes.append(("finish_call", tuple(record.call_id for record in records)))
        await self.store.finish_call(run_id, lease, *records)


async def test_a_batch_starts_with_its_record_and_its_last_result_rides_with_the_next(
    backend: Backend,
) -> None:
    seen: dict[str, Any] = {}

    @tool
    async def look(name: str) -> str:
        """Look at what the store holds while this call runs."""
        stored = backend.open().get("r1")
        seen[name] = sorted((c.call_id, c.finished) for c in stored.calls)
        await asyncio.sleep(0.01 if name == "b" else 0)
        return f"saw {name}"

    calls = [ToolCall("a", "look", '{"name": "a"}'), ToolCall("b", "look", '{"name": "b"}')]
    agent = Agent("looker", ScriptedModel([calls, "Done."]), tools=[look])
    store = Recording(backend.open())
    assert (await agent.run("go", store=store, run_id="r1").collect()).final_output == "Done."
    # Both rows were committed before either call started, with the record asking for them.
    assert seen["a"] == seen["b"] == [("a", False), ("b", False)]
    assert store.writes == [
        # (the first record, Start, made the run: `create`)
        ("record", ("a:start", "b:start")),  # the model's calls: the batch
        ("finish_call", ("a",)),  # written as it finished, b still running
        ("record", ("b:result",)),  # the results, with the batch's last one
        ("record", ()),  # the answer
    ]
    assert [
        (c.call_id, c.result.content if c.result else None) for c in backend.open().get("r1").calls
    ] == [
        ("a", "saw a"),
        ("b", "saw b"),
    ]


async def test_results_of_calls_that_finish_together_are_written_in_one_transaction(
    backend: Backend,
) -> None:
    @tool
    async def echo(n: int) -> str:
        """Echo a number; the last one takes a moment."""
        await asyncio.sleep(0.01 if n == 2 else 0)
        return str(n)

    calls = [ToolCall(f"c{n}", "echo", f'{{"n": {n}}}') for n in range(3)]
    agent = Agent("echo", ScriptedModel([calls, "Done."]), tools=[echo])
    store = Recording(backend.open())
    assert (await agent.run("go", store=store, run_id="r1").collect()).final_output == "Done."
    assert store.writes == [
        ("record", ("c0:start", "c1:start", "c2:start")),
        ("finish_call", ("c0", "c1")),  # they finished in one pass, c2 still running
        ("record", ("c2:result",)),  # the batch's last, with the record consuming it
        ("record", ()),
    ]


async def test_a_batch_that_finishes_in_one_pass_rides_with_the_next_record(
    backend: Backend,
) -> None:
    @tool
    async def echo(n: int) -> str:
        """Echo a number."""
        return str(n)

    calls = [ToolCall(f"c{n}", "echo", f'{{"n": {n}}}') for n in range(4)]
    agent = Agent("echo", ScriptedModel([calls, "Done."]), tools=[echo])
    store = Recording(backend.open())
    assert (await agent.run("go", store=store, run_id="r1").collect()).final_output == "Done."
    assert store.writes == [
        ("record", ("c0:start", "c1:start", "c2:start", "c3:start")),
        # They finished in one pass with the batch's last: all ride with the record
        # consuming them.
        ("record", ("c0:result", "c1:result", "c2:result", "c3:result")),
        ("record", ()),
    ]
    stored = backend.open().get("r1")
    assert [(c.call_id, c.result.content if c.result else None) for c in stored.calls] == [
        (f"c{n}", str(n)) for n in range(4)
    ]


async def test_calls_past_the_parallel_limit_get_their_rows_as_they_start(
    backend: Backend,
) -> None:
    @tool
    async def echo(n: int) -> str:
        """Echo a number."""
        return str(n)

    calls = [ToolCall(f"c{n}", "echo", f'{{"n": {n}}}') for n in range(3)]
    config = RunConfig(parallel_tool_call_limit=1)
    agent = Agent("echo", ScriptedModel([calls, "Done."]), tools=[echo], config=config)
    store = Recording(backend.open())
    await agent.run("go", store=store, run_id="r1").collect()
    writes = store.writes
    assert writes[0] == ("record", ("c0:start",))
    assert [w for w in writes if w[0] == "start_call"] == [
        ("start_call", ("c1",)),
        ("start_call", ("c2",)),
    ]
    # A result waits out the pass of the event loop it finished in, joined by any that
    # finish in that pass (how the passes fall depends on the backend's awaits); the last
    # rides with the record that consumes it.
    finished = [
        (i, call_id)
        for i, (kind, ids) in enumerate(writes)
        if kind == "finish_call"
        for call_id in ids
    ]
    assert [call_id for _, call_id in finished] == ["c0", "c1"]
    assert writes.index(("start_call", ("c1",))) < dict((c, i) for i, c in finished)["c1"]
    assert writes[-2:] == [("record", ("c2:result",)), ("record", ())]
    stored = backend.open().get("r1")
    assert [(c.call_id, c.result.content if c.result else None) for c in stored.calls] == [
        ("c0", "0"),
        ("c1", "1"),
        ("c2", "2"),
    ]


async def test_a_run_renews_its_lease_while_a_call_outlasts_it(backend: Backend) -> None:
    store = backend.open()
    seen: dict[str, Any] = {}

    @tool
    async def wait() -> str:
        """Outlast the run's lease."""
        seen["before"] = store.get("r1").info.lease_expires_at
        await asyncio.sleep(1.0)  # the lease lasts 0.3 s: renewed every 0.1 s meanwhile
        seen["after"] = store.get("r1").info.lease_expires_at
        with pytest.raises(RunLeased):  # still held: another driver is refused
            await backend.open().claim("r1", "intruder", 10.0)
        return "waited"

    config = RunConfig(lease_seconds=0.3)
    agent = Agent("waiter", ScriptedModel([[ToolCall("w", "wait", "{}")], "Done."]), tools=[wait])
    result = await agent.run("go", store=store, run_id="r1", config=config).collect()
    assert result.final_output == "Done."
    assert seen["after"] > seen["before"]
    stored = store.get("r1")
    assert stored.info.status == "completed" and stored.info.lease_owner is None
