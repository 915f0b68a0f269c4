"""Runs whose store fails under them, on every backend (`store_support.backend`): a full
disk, a lease lost inside a tool batch. The stream ends with one `RunFailed(StoreFailed)`,
never an exception; the store keeps the run at its last committed step, and once the store
takes writes again the run resumes with nothing lost and no tool run twice.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from store_drivers import filling_payer
from store_support import Backend

from helikon import Agent, RunConfig, ScriptedModel, ToolCall, tool
from helikon.core.events import TERMINAL_EVENTS
from helikon.durable import CallRecord, Lease, RunStore, StoreError
from helikon.run.effects import INTERRUPTED

PAY = ToolCall("p1", "pay", '{"to": "ann"}')


def ended_once(events: list[Any], reason: str) -> Any:
    """The one terminal event of `events`, last, a `RunFailed(StoreFailed)` for `reason`."""
    assert [e for e in events if e.type in TERMINAL_EVENTS] == events[-1:]
    error = events[-1].error
    assert (events[-1].type, error.kind, error.reason) == ("run_failed", "store_failed", reason)
    return error


async def test_a_full_disk_fails_the_run_once_and_it_resumes_when_there_is_room(
    backend: Backend, tmp_path: Path
) -> None:
    store = backend.open()
    paid = tmp_path / "paid.log"

    def payer() -> Agent:
        return filling_payer(paid, lambda: backend.fill_disk(store))

    events = [event async for event in payer().run("pay ann", store=store, run_id="r1")]
    error = ended_once(events, "StoreError")
    assert "full" in error.message or "No space" in error.message
    kept = store.get("r1")
    assert kept.info.status == "running" and kept.records[-1].state_after.phase == "ExecutingTools"

    backend.free_disk(store)
    result = await payer().resume("r1", store=store, force=True).collect()  # its driver is gone
    assert result.final_output == "Paid."
    assert paid.read_text() == "paid ann\n"  # in flight at the failure: not run again
    stored = store.get("r1")
    assert stored.records[: len(kept.records)] == kept.records
    (result_in,) = stored.records[len(kept.records)].input.results  # what the model got
    assert (result_in.call_id, result_in.content) == ("p1", INTERRUPTED)
    assert stored.info.status == "completed"


async def test_a_lease_lost_inside_a_batch_fails_the_run_once_not_with_an_exception_group(
    backend: Backend,
) -> None:
    store = backend.open()
    ran: list[int] = []

    @tool
    async def echo(n: int) -> str:
        """Echo a number; the first takes the run's lease away from its driver."""
        ran.append(n)
        if n == 0:
            await backend.open().claim("r1", "intruder", 30.0, force=True)
        return str(n)

    calls = [ToolCall(f"c{n}", "echo", f'{{"n": {n}}}') for n in range(3)]
    config = RunConfig(parallel_tool_call_limit=1)
    agent = Agent("echo", ScriptedModel([calls, "Done."]), tools=[echo], config=config)
    events = [event async for event in agent.run("go", store=store, run_id="r1")]
    assert "held by intruder" in ended_once(events, "LeaseLost").message
    assert ran == [0]
    stored = store.get("r1")
    assert stored.info.lease_owner == "intruder"
    assert [(c.call_id, c.finished) for c in stored.calls] == [("c0", False)]


class FreedAfterItFails:
    """A store whose disk is freed as soon as a call's result failed to be written: the
    run's next write would find room."""

    def __init__(self, store: RunStore, backend: Backend) -> None:
        self.store, self.backend = store, backend

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def finish_call(self, run_id: str, lease: Lease, *calls: CallRecord) -> None:
        try:
            await self.store.finish_call(run_id, lease, *calls)
        except StoreError:
            self.backend.free_disk(self.store)
            raise


async def test_a_run_whose_store_failed_writes_nothing_more_and_stays_resumable(
    backend: Backend, tmp_path: Path
) -> None:
    store = backend.open()
    paid = tmp_path / "paid.log"
    never = asyncio.Event()

    @tool
    async def pay(to: str) -> str:
        """Pay someone; ann's receipt finds the disk full, bob's never comes."""
        with paid.open("a") as file:
            file.write(f"paid {to}\n")
        if to == "bob":
            await never.wait()  # cancelled when the batch fails
        backend.fill_disk(store)
        return "receipt " * 2500

    def payer() -> Agent:
        calls = [PAY, ToolCall("p2", "pay", '{"to": "bob"}')]
        return Agent("payer", ScriptedModel([calls, "Paid."]), tools=[pay])

    failing: Any = FreedAfterItFails(store, backend)
    events = [event async for event in payer().run("pay", store=failing, run_id="r1")]
    ended_once(events, "StoreError")
    kept = store.get("r1")  # the failed run was not written as failed (there was room)
    assert kept.info.status == "running" and kept.records[-1].state_after.phase == "ExecutingTools"

    result = await payer().resume("r1", store=store, force=True).collect()
    assert result.final_output == "Paid."
    assert paid.read_text() == "paid ann\npaid bob\n"  # both in flight: neither runs again


async def test_a_session_that_cannot_be_written_fails_the_run_once_before_it_completes(
    backend: Backend,
) -> None:
    store, memory = backend.open(), backend.open()  # SQLite: the page limit is per connection
    backend.fill_disk(memory, ("sessions",))

    def noter() -> Agent:
        return Agent("noter", ScriptedModel(["Noted."]))

    note = "note this " * 2000  # a page more than the session has
    run = noter().run(note, store=store, session=memory.session("s1"), run_id="r1")
    events = [event async for event in run]
    ended_once(events, "StoreError")  # not RunCompleted, then an exception
    assert memory.session("s1").items() == ()
    kept = store.get("r1")  # its last record waits for the session: it resumes there
    assert kept.info.status == "running" and kept.records[-1].state_after.phase == "CallingModel"

    backend.free_disk(memory, ("sessions",))
    result = await noter().resume("r1", store=store, force=True).collect()
    assert result.final_output == "Noted."
    assert [item.content for item in store.session("s1").items()] == [note, "Noted."]
    assert store.get("r1").info.status == "completed"
