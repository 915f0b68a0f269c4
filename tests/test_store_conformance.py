"""One conformance suite for every run store: each operation of `RunStore` tested the same
way on SQLite (a temporary file) and on a real PostgreSQL (`store_support.backend`), as
LangGraph's checkpoint-conformance does for its savers. No test here is about one backend;
where one does not conform yet, its case is a strict xfail saying why.

Runs driven end to end through each store are in tests/test_store_driving.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest
from store_drivers import TRANSFER
from store_support import KEY, Backend, race, run_in_thread

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.codec import dumps
from helikon.core.events import MessageOutput, RunCompleted, RunStarted, RunSuspended, TurnStarted
from helikon.core.items import AssistantMessage, FinalOutput, ToolResult, Usage, UserMessage
from helikon.core.state import (
    AwaitApproval,
    CallingModel,
    CallModel,
    Done,
    ModelRequest,
    ModelResponse,
    NeedsApproval,
    Start,
    Terminate,
)
from helikon.core.tool_spec import ListedTool, ToolSpec
from helikon.durable import (
    CallRecord,
    DecisionSpent,
    EffectRecord,
    Lease,
    LeaseLost,
    RunExists,
    RunHeader,
    RunLeased,
    RunNotFound,
    RunStore,
    StepRecord,
    StoreCorrupt,
    StoreError,
    rows,
)
from helikon.durable.payloads import PayloadNotFound, digest_of
from helikon.durable.signing import sign
from helikon.durable.views import events_of

TTL = 30.0

# ---------------------------------------------------------------- what the tests write

CHART = dumps(DEFAULT_TABLE.data())  # the chart a run names, kept once per digest
DIGEST = DEFAULT_TABLE.digest
REQUEST = ApprovalRequest.for_call(TRANSFER)
RESULT = ToolResult("t1", "sent 10 to ann")
USAGE = Usage(input_tokens=3, output_tokens=2, total_tokens=5, requests=1)


def header(run_id: str = "r1", parent: str | None = None, session: str | None = None) -> RunHeader:
    return RunHeader(run_id, "teller", "default", DIGEST, "toolset-digest", parent, session)


def started(seq: int = 1) -> StepRecord:
    """A record that leaves the run calling the model (turn seq - 1)."""
    return StepRecord(
        seq,
        Start((UserMessage("pay ann 10"),)),
        0,
        (("has_input", True),),
        CallingModel(seq - 1),
        CallModel(ModelRequest("turn")),
        (TurnStarted(seq - 1),),
        (UserMessage("pay ann 10"),),
    )


def suspended(seq: int = 2) -> StepRecord:
    """A record that leaves the run waiting for the transfer's approval."""
    return StepRecord(
        seq,
        ModelResponse((TRANSFER,), USAGE),
        3,
        (("needs_approval", True),),
        NeedsApproval((REQUEST,), (), 0, USAGE, (TRANSFER,)),
        AwaitApproval((REQUEST,)),
        (),
        (TRANSFER,),
    )


def done(seq: int) -> StepRecord:
    output = FinalOutput("Sent.", None, USAGE)
    return StepRecord(
        seq,
        ModelResponse((AssistantMessage("Sent."),), USAGE),
        1,
        (),
        Done(output),
        Terminate(),
        (MessageOutput(AssistantMessage("Sent.")), RunCompleted(output, USAGE)),
        (AssistantMessage("Sent."),),
    )


def call(result: ToolResult | None = None) -> CallRecord:
    return CallRecord(2, "t1", "transfer", REQUEST.arguments_hash, result)


def approve(run_id: str = "r1", seq: int = 2, call_id: str = "t1") -> ApprovalDecision:
    return ApprovalDecision(call_id, REQUEST.arguments_hash, True, "ok", run_id, seq)


class Writer:
    """One driver of one run: its lease and the head it writes after."""

    def __init__(self, store: RunStore, run_id: str, lease: Lease) -> None:
        self.store, self.run_id, self.lease, self.head = store, run_id, lease, ""

    async def append(
        self, record: StepRecord, effects: tuple[EffectRecord, ...] = (), status: Any = "running"
    ) -> str:
        self.head = await self.store.append(
            self.run_id, self.lease, record, self.head, effects, status
        )
        return self.head


async def create(
    store: RunStore,
    run_id: str = "r1",
    owner: str = "a",
    ttl: float = TTL,
    effects: tuple[EffectRecord, ...] = (),
    **kw: Any,
) -> Writer:
    """A run created with its first record, `started()` (a store never holds a run without
    the input it started from)."""
    lease, head = await store.create(header(run_id, **kw), CHART, owner, ttl, started(), effects)
    writer = Writer(store, run_id, lease)
    writer.head = head
    return writer


async def suspended_run(store: RunStore, run_id: str = "r1") -> Writer:
    """A run at its suspension (seq 2), its lease released as the driver leaves it."""
    writer = await create(store, run_id, effects=(EffectRecord(0, RunStarted("teller", run_id)),))
    await writer.append(suspended(), status="suspended")
    await store.add_effects(run_id, writer.lease, (EffectRecord(2, RunSuspended((REQUEST,))),))
    await store.release(run_id, writer.lease, "suspended")
    return writer


# ---------------------------------------------------------------- create and claim


async def test_create_leases_the_new_run_to_its_creator(store: RunStore) -> None:
    before = time.time()
    lease, head = await store.create(header(), CHART, "a", TTL, started())
    assert (lease.owner, lease.epoch) == ("a", 1)
    assert before + TTL - 5 <= lease.expires_at <= time.time() + TTL + 5
    stored = store.get("r1")
    assert stored.header == header()
    assert stored.records == (started(),)  # created with its first record, in one write
    assert stored.effects == stored.calls == stored.decisions == ()
    assert stored.chart_data == CHART and stored.head_mac == head
    info = stored.info
    assert (info.run_id, info.agent, info.status, info.phase, info.seq) == (
        "r1", "teller", "running", "CallingModel", 1,
    )  # fmt: skip
    assert (info.lease_owner, info.lease_expires_at) == ("a", pytest.approx(lease.expires_at))


async def test_create_refuses_a_run_id_already_in_the_store(store: RunStore) -> None:
    await create(store, owner="a")
    with pytest.raises(RunExists, match="'r1'"):
        await store.create(header(), CHART, "b", TTL, started())
    assert store.get("r1").info.lease_owner == "a"


async def test_claim_takes_a_released_lease(store: RunStore) -> None:
    writer = await create(store)
    await store.release("r1", writer.lease, "suspended")
    lease = await store.claim("r1", "b", TTL)
    assert (lease.owner, lease.epoch) == ("b", 2)
    assert store.get("r1").info.lease_owner == "b"


async def test_claim_takes_an_expired_lease(store: RunStore) -> None:
    await create(store, ttl=-1.0)  # expired the moment it was made
    lease = await store.claim("r1", "b", TTL)
    assert (lease.owner, lease.epoch) == ("b", 2)


async def test_claim_refuses_a_held_lease_naming_its_owner_and_expiry(store: RunStore) -> None:
    writer = await create(store, owner="host:1:a")
    with pytest.raises(RunLeased, match="host:1:a") as refused:
        await store.claim("r1", "b", TTL)
    assert refused.value.owner == "host:1:a"
    assert refused.value.expires_at == pytest.approx(writer.lease.expires_at)
    assert "force=True" in str(refused.value)


async def test_claim_with_force_takes_a_held_lease_from_its_owner(store: RunStore) -> None:
    writer = await create(store)
    lease = await store.claim("r1", "b", TTL, force=True)
    assert (lease.owner, lease.epoch) == ("b", 2)
    with pytest.raises(LeaseLost, match=r"held by b \(epoch 2\)"):
        await store.renew("r1", writer.lease, TTL)


async def test_claim_of_a_run_not_in_the_store(store: RunStore) -> None:
    with pytest.raises(RunNotFound, match="'nope'"):
        await store.claim("nope", "b", TTL)


async def test_renew_extends_the_lease_and_keeps_its_epoch(store: RunStore) -> None:
    writer = await create(store, ttl=1.0)
    renewed = await store.renew("r1", writer.lease, 100.0)
    assert (renewed.owner, renewed.epoch) == ("a", 1)
    assert renewed.expires_at > writer.lease.expires_at + 50
    assert store.get("r1").info.lease_expires_at == pytest.approx(renewed.expires_at)


# ---------------------------------------------------------------- writing under a lease


async def test_append_moves_the_head_to_the_new_record(store: RunStore) -> None:
    writer = await create(store)
    first = writer.head
    second = await writer.append(suspended(), status="suspended")
    stored = store.get("r1")
    assert stored.records == (started(), suspended())
    assert stored.head_mac == second != first
    info = stored.info
    assert (info.seq, info.status, info.phase, info.turns) == (2, "suspended", "NeedsApproval", 1)


async def test_append_is_a_compare_and_swap_on_the_head(store: RunStore) -> None:
    writer = await create(store)
    head = writer.head
    effect = (EffectRecord(1, RunStarted("teller", "r1")),)
    for seq in (1, 3):  # seq 1 again (another writer was first), or one past the next
        with pytest.raises(LeaseLost):
            await store.append("r1", writer.lease, started(seq), head, effect, "running")
    stored = store.get("r1")
    assert (stored.records, stored.effects, stored.head_mac) == ((started(),), (), head)


async def test_a_stale_driver_is_refused_every_write(store: RunStore) -> None:
    stale = await create(store)
    taken = await store.claim("r1", "b", TTL, force=True)
    effect = (EffectRecord(1, RunStarted("teller", "r1")),)
    writes = [
        stale.append(suspended()),
        store.add_effects("r1", stale.lease, effect),
        store.start_call("r1", stale.lease, call()),
        store.finish_call("r1", stale.lease, call(RESULT)),
        store.renew("r1", stale.lease, TTL),
    ]
    for write in writes:
        with pytest.raises(LeaseLost, match="epoch 1"):
            await write
    await store.release("r1", stale.lease, "failed")  # a stale release changes nothing
    stored = store.get("r1")
    assert (stored.records, stored.effects, stored.calls) == ((started(),), (), ())
    assert (stored.info.status, stored.info.lease_owner) == ("running", "b")
    fresh = Writer(store, "r1", taken)
    fresh.head = stored.head_mac
    await fresh.append(suspended(), status="suspended")
    assert store.get("r1").info.seq == 2


async def test_effects_keep_their_order_and_the_step_they_follow(store: RunStore) -> None:
    writer = await create(store, effects=(EffectRecord(0, RunStarted("teller", "r1")),))
    await store.add_effects("r1", writer.lease, ())
    await store.add_effects("r1", writer.lease, (EffectRecord(0, TurnStarted(9)),))
    suspension = EffectRecord(1, RunSuspended((REQUEST,)))
    await store.add_effects("r1", writer.lease, (suspension,))
    assert store.get("r1").effects == (
        EffectRecord(0, RunStarted("teller", "r1")),
        EffectRecord(0, TurnStarted(9)),
        suspension,
    )


async def test_a_call_is_started_once_and_its_first_result_wins(store: RunStore) -> None:
    writer = await create(store)
    await store.start_call("r1", writer.lease, call())
    assert store.get("r1").calls == (call(),)
    await store.start_call("r1", writer.lease, CallRecord(2, "t1", "other", "hash"))
    await store.finish_call("r1", writer.lease, call(RESULT))
    await store.finish_call("r1", writer.lease, call(ToolResult("t1", "second", True)))
    await store.finish_call("r1", writer.lease, CallRecord(2, "t9", "transfer", "h", RESULT))
    assert store.get("r1").calls == (call(RESULT),)
    assert store.get("r1").calls[0].finished


async def test_a_call_started_from_a_finished_record_is_started_then_finished(
    store: RunStore,
) -> None:
    """A copy of a finished call (as a fork writes it): `start_call` records the start
    only, whatever result the record carries; `finish_call` then records the result."""
    writer = await create(store)
    await store.start_call("r1", writer.lease, call(RESULT))
    assert store.get("r1").calls == (call(),)
    await store.finish_call("r1", writer.lease, call(RESULT))
    assert store.get("r1").calls == (call(RESULT),)


async def test_a_decision_is_spent_once(store: RunStore) -> None:
    await suspended_run(store)
    await store.decide("r1", 2, [approve()])
    with pytest.raises(DecisionSpent, match="'t1'"):
        await store.decide("r1", 2, [approve()])
    assert store.get("r1").decisions == ((2, approve()),)


async def test_decisions_are_spent_all_or_none(store: RunStore) -> None:
    await suspended_run(store)
    await store.decide("r1", 2, [approve(call_id="t1")])
    with pytest.raises(DecisionSpent):
        await store.decide("r1", 2, [approve(call_id="t2"), approve(call_id="t1")])
    assert store.get("r1").decisions == ((2, approve(call_id="t1")),)
    with pytest.raises(StoreError, match="not at suspension 4"):  # not where the run waits
        await store.decide("r1", 4, [approve(seq=4)])
    with pytest.raises(RunNotFound):
        await store.decide("nope", 2, [approve()])
    assert store.get("r1").decisions == ((2, approve()),)


async def test_release_frees_the_lease_and_leaves_the_status(store: RunStore) -> None:
    writer = await create(store)
    await store.release("r1", writer.lease, "failed")
    info = store.get("r1").info
    assert (info.status, info.lease_owner, info.lease_expires_at) == ("failed", None, None)
    assert (await store.claim("r1", "b", TTL)).epoch == 2


async def test_the_record_of_a_run_that_ended_releases_its_lease(store: RunStore) -> None:
    writer = await create(store)
    await writer.append(done(2), status="completed")
    info = store.get("r1").info
    assert (info.status, info.lease_owner, info.lease_expires_at) == ("completed", None, None)
    with pytest.raises(LeaseLost):  # its driver holds nothing any more
        await store.add_effects("r1", writer.lease, (EffectRecord(2, RunStarted("t", "r1")),))


async def test_the_record_of_a_run_still_going_keeps_its_lease(store: RunStore) -> None:
    writer = await create(store)
    await writer.append(suspended(), status="suspended")
    assert store.get("r1").info.lease_owner == "a"


# ---------------------------------------------------------------- a database that fails

BIG = (EffectRecord(1, MessageOutput(AssistantMessage("word " * 4000))),)
"""Effects that need more space than a store has free (20 kB: pages more on SQLite)."""


def assert_failed_with_its_cause(error: StoreError, code: str) -> None:
    """One line, naming the database's own reason and code, with its error as the cause."""
    assert "\n" not in str(error) and f"({code})" in str(error), str(error)
    assert error.__cause__ is not None


async def test_a_full_disk_fails_a_write_as_a_store_error_and_loses_nothing(
    store: RunStore, backend: Backend
) -> None:
    writer = await create(store)
    head = writer.head
    backend.fill_disk(store)
    with pytest.raises(StoreError, match=r"full|No space") as failed:
        await writer.append(suspended(), BIG, "suspended")
    assert_failed_with_its_cause(failed.value, backend.disk_full)
    stored = store.get("r1")
    assert (stored.records, stored.effects, stored.head_mac) == ((started(),), (), head)
    backend.free_disk(store)
    await writer.append(suspended(), BIG, "suspended")  # the same write, once there is room
    assert store.get("r1").records == (started(), suspended())


async def test_a_commit_that_fails_is_rolled_back_and_the_store_goes_on(
    store: RunStore, backend: Backend
) -> None:
    writer = await create(store)
    head = writer.head
    backend.fail_commits(store)
    with pytest.raises(StoreError) as failed:
        await writer.append(suspended(), BIG, "suspended")
    assert_failed_with_its_cause(failed.value, backend.commit_refused)
    backend.allow_commits(store)
    stored = store.get("r1")
    assert (stored.records, stored.effects, stored.head_mac) == ((started(),), (), head)
    await writer.append(suspended(), BIG, "suspended")
    assert store.get("r1").records == (started(), suspended())


READS = {
    "get": lambda store: store.get("r1"),
    "header": lambda store: store.header("r1"),
    "revision": lambda store: store.revision("r1"),
    "runs": lambda store: store.runs(),
    "pending": lambda store: store.pending("r1"),
    "events": lambda store: list(store.events("r1")),
    "session": lambda store: store.session("s1").items(),
    "chart": lambda store: store.chart("nothing"),
}


@pytest.mark.parametrize("read", list(READS))
async def test_a_read_the_database_refuses_is_a_store_error_with_its_cause_not_corrupt(
    store: RunStore, backend: Backend, read: str
) -> None:
    await suspended_run(store)
    with backend.refusing_reads(store) as refusing, pytest.raises(StoreError) as failed:
        READS[read](refusing)
    assert not isinstance(failed.value, StoreCorrupt), str(failed.value)
    assert_failed_with_its_cause(failed.value, backend.read_refused)
    assert [r.call for r in store.pending("r1")] == [REQUEST.call]  # and the store reads on


# ---------------------------------------------------------------- reading, checked


async def test_get_gives_back_everything_written(store: RunStore) -> None:
    writer = await suspended_run(store)
    await store.decide("r1", 2, [approve()])
    lease = await store.claim("r1", "b", TTL)
    await store.start_call("r1", lease, call())
    await store.finish_call("r1", lease, call(RESULT))
    stored = store.get("r1")
    assert stored.header == header()
    assert stored.chart_data == CHART
    assert stored.records == (started(), suspended())
    assert stored.effects == (
        EffectRecord(0, RunStarted("teller", "r1")),
        EffectRecord(2, RunSuspended((REQUEST,))),
    )
    assert stored.calls == (call(RESULT),)
    assert stored.decisions == ((2, approve()),)
    assert stored.head_mac == writer.head
    assert await store.load("r1") == stored


async def test_get_of_a_run_not_in_the_store(store: RunStore) -> None:
    with pytest.raises(RunNotFound, match="'nope'"):
        store.get("nope")
    with pytest.raises(RunNotFound):
        await store.load("nope")


async def test_header_reads_the_header_get_reads(store: RunStore) -> None:
    listed = ListedTool("station", ToolSpec("add", "Add.", {"type": "object"}), False)
    with_tools = replace(header("r2"), tools=(listed,))
    lease, _ = await store.create(with_tools, CHART, "a", TTL, started())
    await store.release("r2", lease, "running")
    await suspended_run(store)
    for run_id in ("r1", "r2"):
        stored = store.get(run_id)
        assert store.header(run_id) == stored.header
        assert await store.aheader(run_id) == stored.header
    assert store.header("r2").tools == (listed,)


async def test_header_of_a_run_not_in_the_store_is_refused_as_get_refuses_it(
    store: RunStore,
) -> None:
    with pytest.raises(RunNotFound) as by_get:
        store.get("nope")
    with pytest.raises(RunNotFound) as by_header:
        store.header("nope")
    assert str(by_header.value) == str(by_get.value)
    with pytest.raises(RunNotFound, match="'nope'"):
        await store.aheader("nope")


def hostile_header(data: str, run_id: str = "r1") -> tuple[str, str]:
    """A header row signed with the suite's key for `run_id`: the signature checks out."""
    return data, sign(KEY, "header", run_id, data)


HOSTILE_HEADERS = {
    "an edited header": ("UPDATE runs SET header = replace(header, 'teller', 'robber')",),
    "another run's header and signature": (
        "UPDATE runs SET header = ?, header_mac = ?",
        *rows.header_row(KEY, header("r2")),
    ),
    "another run's header, signed for this run": (
        "UPDATE runs SET header = ?, header_mac = ?",
        *hostile_header(dumps(header("r2"))),
    ),
    "a signed header that is not a header": (
        "UPDATE runs SET header = ?, header_mac = ?",
        *hostile_header('{"run_id": "r1", "agent": ["not", "a", "name"]}'),
    ),
    "a signed header that is not JSON": (
        "UPDATE runs SET header = ?, header_mac = ?",
        *hostile_header("{" * 100_000),
    ),
}


@pytest.mark.parametrize("hostile", HOSTILE_HEADERS, ids=list(HOSTILE_HEADERS))
async def test_a_hostile_header_row_is_refused_by_header_as_by_get(
    store: RunStore, backend: Backend, hostile: str
) -> None:
    await suspended_run(store)
    store.header("r1")  # checks out before
    backend.sql(*HOSTILE_HEADERS[hostile])
    with pytest.raises(StoreCorrupt) as by_get:
        store.get("r1")
    with pytest.raises(StoreCorrupt, match="'r1'") as by_header:
        store.header("r1")
    assert str(by_header.value) == str(by_get.value)
    with pytest.raises(StoreCorrupt) as by_aheader:
        await store.aheader("r1")
    assert str(by_aheader.value) == str(by_get.value)


FORGED_DECISION = dumps(approve())
NEXT_LINK = "(SELECT chain_n + 1 FROM runs WHERE run_id = 'r1')"
SWAP_EVENTS = "UPDATE effects SET {0} = -1 WHERE n = 1; UPDATE effects SET {0} = 1 WHERE n = 2; "
SWAP_EVENTS += "UPDATE effects SET {0} = 2 WHERE {0} = -1"
# The rows of the run, in the order they were written (its chain): record 1 and event 1
# (create), record 2 (append), event 2 (add_effects), the call's start, its result, the
# decision: links 1 to 7.
TAMPERING = {
    "an edited record": (
        "UPDATE records SET data = replace(data, 'pay ann 10', 'pay eve 99')",
        "link 2 of 7 (record 1) does not chain",
    ),
    "an edited record, its digest made the head's": (
        "UPDATE records SET mac = (SELECT head_mac FROM runs) WHERE seq = 1",
        "link 2 of 7 (record 1) does not chain",
    ),
    "a removed record": (
        "DELETE FROM records WHERE seq = 1",
        "link 2 of 7, after event 1, is missing",
    ),
    "the last record removed": (
        "DELETE FROM records WHERE seq = 2",
        "link 3 of 7, after record 1, is missing",
    ),
    "a record added": (
        "INSERT INTO records (run_id, seq, data, mac, link) "
        f"SELECT run_id, 3, data, mac, {NEXT_LINK} FROM records WHERE seq = 2",
        "record 3 is not in its chain (link 8, head at link 7): an added row",
    ),
    "an edited header": (
        "UPDATE runs SET header = replace(header, 'teller', 'robber')",
        "its header does not match its signature",
    ),
    "a moved head": ("UPDATE runs SET head_seq = 1", "its head (record 1, link 7) does not match"),
    "the chain's head moved back": (
        "UPDATE runs SET chain_n = chain_n - 1",
        "its head (record 2, link 6) does not match",
    ),
    "an edited event": (
        "UPDATE effects SET data = replace(data, 'teller', 'robber')",
        "link 1 of 7 (event 1) does not chain",
    ),
    "the event the run started with removed": (
        "DELETE FROM effects WHERE n = 1",
        "link 1 of 7, after its start, is missing (a row was removed)",
    ),
    "an event added at a link taken": (
        "INSERT INTO effects (run_id, n, after_seq, data, mac, link) "
        "SELECT run_id, 3, after_seq, data, mac, link FROM effects WHERE n = 2",
        "two rows claim link 4 (event 3): an added row",
    ),
    "two events reordered": (SWAP_EVENTS.format("n"), "link 1 of 7 (event 2) does not chain"),
    "two events' links swapped": (
        SWAP_EVENTS.format("link"),
        "link 1 of 7 (event 2) does not chain",
    ),
    "an edited call result": (
        "UPDATE calls SET result = replace(result, 'sent', 'kept')",
        "link 6 of 7 (the result of call 't1' of step 2) does not chain",
    ),
    "a finished call removed": (
        "DELETE FROM calls",
        "link 5 of 7, after event 2, is missing (a row was removed)",
    ),
    "a call's result removed": (
        "UPDATE calls SET result = NULL, result_link = NULL",
        "link 5 of 7 (call 't1' of step 2) does not chain",
    ),
    "a forged decision": (
        "INSERT INTO decisions (run_id, seq, call_id, data, mac, link) "
        f"VALUES ('r1', 2, 't1', '{FORGED_DECISION}', '{'0' * 64}', {NEXT_LINK})",
        "the decision on call 't1' at step 2 is not in its chain (link 7, head at link 6)",
    ),
    "a decision removed": (
        "DELETE FROM decisions",
        "link 7 of 7, after the result of call 't1' of step 2, is missing",
    ),
    "a decision moved to another suspension": (
        "UPDATE decisions SET seq = 4",
        "link 7 of 7 (the decision on call 't1' at step 4) does not chain",
    ),
    "the last record removed and the head moved back to the one before": (
        "DELETE FROM records WHERE seq = 2; "
        "UPDATE runs SET head_seq = 1, head_mac = (SELECT mac FROM records WHERE seq = 1)",
        "its head (record 1, link 7) does not match its signature",
    ),
    "an edited chart": (
        "UPDATE charts SET data = replace(data, 'CallingModel', 'CallingMole')",
        "(edited)",
    ),
}


@pytest.mark.parametrize("tampering", TAMPERING, ids=list(TAMPERING))
async def test_a_tampered_row_is_refused(store: RunStore, backend: Backend, tampering: str) -> None:
    await suspended_run(store)
    lease = await store.claim("r1", "b", TTL)
    await store.start_call("r1", lease, call())
    await store.finish_call("r1", lease, call(RESULT))
    if "forged" not in tampering:
        await store.decide("r1", 2, [approve()])
    store.get("r1")  # checks out before
    statement, named = TAMPERING[tampering]
    backend.sql(statement)
    with pytest.raises(StoreCorrupt, match="'r1'") as refused:
        store.get("r1")
    assert named in str(refused.value)
    with pytest.raises(StoreCorrupt):
        await store.load("r1")
    with pytest.raises(StoreCorrupt):
        store.pending("r1")
    with pytest.raises(StoreCorrupt):
        list(store.events("r1"))


async def test_a_store_opened_with_another_key_refuses_every_run(
    store: RunStore, backend: Backend
) -> None:
    await suspended_run(store)
    other = backend.open(key=b"another-key")
    with pytest.raises(StoreCorrupt, match="signature"):
        other.get("r1")
    with pytest.raises(StoreCorrupt, match="signature"):
        other.header("r1")


async def test_stores_opened_without_a_key_share_one(backend: Backend) -> None:
    first = backend.open(key=None)
    await suspended_run(first)
    assert backend.open(key=None).get("r1").records == (started(), suspended())
    with pytest.raises(StoreCorrupt):
        backend.open(key=KEY).get("r1")


async def test_the_key_may_come_from_the_environment(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELIKON_STORE_KEY", KEY.decode())
    await suspended_run(backend.open(key=None))
    monkeypatch.delenv("HELIKON_STORE_KEY")
    assert backend.open(key=KEY).get("r1").records == (started(), suspended())


async def test_a_run_read_while_a_record_is_appended_is_read_whole(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    writer = await create(backend.open())
    reader = backend.open()
    read_header = rows.read_header

    def append_meanwhile(*args: Any) -> Any:  # after the run's row, before its records
        monkeypatch.setattr(rows, "read_header", read_header)
        run_in_thread(lambda: asyncio.run(writer.append(suspended(), status="suspended"))).join()
        return read_header(*args)

    monkeypatch.setattr(rows, "read_header", append_meanwhile)
    assert reader.get("r1").records == (started(),)  # as it was when the read began
    assert reader.get("r1").records == (started(), suspended())


async def test_runs_lists_newest_first_and_filters(store: RunStore) -> None:
    await suspended_run(store, "r1")
    await create(store, "r1/2:t1", parent="r1")
    last = await create(store, "r2")
    await last.append(done(2), status="completed")
    await store.release("r2", last.lease, "completed")

    assert [info.run_id for info in store.runs()] == ["r2", "r1"]
    assert [info.run_id for info in store.runs(include_nested=True)] == ["r2", "r1/2:t1", "r1"]
    assert [info.run_id for info in store.runs("suspended")] == ["r1"]
    assert [info.run_id for info in store.runs("running", include_nested=True)] == ["r1/2:t1"]
    assert store.runs("failed") == []
    listed = {info.run_id: info for info in store.runs(include_nested=True)}
    assert listed["r1/2:t1"].parent_run_id == "r1"
    assert (listed["r2"].status, listed["r2"].phase, listed["r2"].seq) == ("completed", "Done", 2)
    assert listed["r2"] == store.get("r2").info
    assert await store.aruns("suspended") == store.runs("suspended")
    assert await store.aruns(include_nested=True) == store.runs(include_nested=True)


async def test_pending_gives_the_requests_a_suspended_run_waits_on(store: RunStore) -> None:
    await suspended_run(store)
    await create(store, "r2")
    assert store.pending("r1") == (REQUEST.bound("r1", 2),)
    assert await store.apending("r1") == store.pending("r1")
    assert store.pending("r2") == ()
    with pytest.raises(RunNotFound):
        store.pending("nope")


async def test_events_are_the_runs_events_in_stream_order(store: RunStore) -> None:
    await suspended_run(store)
    expected = [
        RunStarted("teller", "r1"),
        TurnStarted(0),
        RunSuspended((REQUEST,)),
    ]
    assert list(store.events("r1")) == expected
    assert list(store.events("r1", after=1)) == expected[1:]
    assert [event async for event in store.events("r1")] == expected
    assert [event async for event in store.events("r1", after=2)] == expected[2:]
    assert events_of(store.get("r1")) == expected


async def test_following_a_run_sees_the_events_written_later(store: RunStore) -> None:
    writer = await create(store, effects=(EffectRecord(0, RunStarted("teller", "r1")),))
    seen_sync: list[Any] = []
    follower = run_in_thread(lambda: seen_sync.extend(store.events("r1", follow=True)))

    async def follow() -> list[Any]:
        return [event async for event in store.events("r1", after=1, follow=True)]

    seen_async = asyncio.create_task(follow())
    await asyncio.sleep(0.2)  # both followers are waiting now
    assert follower.is_alive() and not seen_async.done()
    await writer.append(done(2), status="completed")
    follower.join(10)
    end = [
        MessageOutput(AssistantMessage("Sent.")),
        RunCompleted(FinalOutput("Sent.", None, USAGE), USAGE),
    ]
    assert seen_sync == [RunStarted("teller", "r1"), TurnStarted(0), *end]
    assert await asyncio.wait_for(seen_async, 10) == [TurnStarted(0), *end]


async def test_revision_changes_with_every_write_a_follower_sees(store: RunStore) -> None:
    writer = await create(store)
    marks = [store.revision("r1")]
    assert store.revision("r1") == marks[-1] == await store.arevision("r1")  # nothing written
    await store.add_effects("r1", writer.lease, (EffectRecord(1, TurnStarted(0)),))
    marks.append(store.revision("r1"))  # an event stored after a record already there
    await writer.append(suspended(), status="suspended")
    marks.append(store.revision("r1"))
    await store.release("r1", writer.lease, "suspended")
    marks.append(store.revision("r1"))
    assert len(set(marks)) == len(marks), marks
    with pytest.raises(RunNotFound, match="no run 'r9'"):
        store.revision("r9")
    with pytest.raises(RunNotFound, match="no run 'r9'"):
        await store.arevision("r9")


async def test_following_reads_the_run_again_only_when_its_revision_changed(
    store: RunStore,
) -> None:
    writer = await create(store, effects=(EffectRecord(0, RunStarted("teller", "r1")),))
    reads: list[str] = []
    events = store.events("r1", follow=True)
    get = events._get
    events._get = lambda run_id: (reads.append(run_id), get(run_id))[1]  # type: ignore[method-assign]
    events._aget = None  # the sync read, counted, for `async for` too
    seen: list[Any] = []

    async def follow() -> None:
        async for event in events:
            seen.append(event)

    following = asyncio.create_task(follow())
    for _ in range(100):  # until the follower has read the run and waits for more
        await asyncio.sleep(0.02)
        if len(seen) == 2:
            break
    await asyncio.sleep(0.5)  # ten polls and more, with nothing written: no read
    assert (len(reads), seen) == (1, [RunStarted("teller", "r1"), TurnStarted(0)])
    await writer.append(done(2), status="completed")
    await asyncio.wait_for(following, 10)
    assert len(reads) == 2
    assert seen[-1] == RunCompleted(FinalOutput("Sent.", None, USAGE), USAGE)


def test_a_session_keeps_items_across_runs(store: RunStore) -> None:
    session = store.session("s1")
    assert session.items() == ()
    session.add([UserMessage("hi"), AssistantMessage("hello")], "r1")
    session.add([], "r2")
    session.add([UserMessage("again")], "r2")
    store.session("s2").add([UserMessage("elsewhere")], "r3")
    assert session.items() == (UserMessage("hi"), AssistantMessage("hello"), UserMessage("again"))
    assert store.session_items("s2") == (UserMessage("elsewhere"),)
    session.clear()
    assert session.items() == ()
    assert store.session("s2").items() == (UserMessage("elsewhere"),)


async def test_delete_takes_the_runs_nested_in_it(store: RunStore) -> None:
    await suspended_run(store, "r1")
    await create(store, "r1/2:t1", parent="r1")
    await create(store, "r1/2:t1/1", parent="r1/2:t1")
    await create(store, "r2")
    assert store.delete("r1") == 3
    for gone in ("r1", "r1/2:t1", "r1/2:t1/1"):
        with pytest.raises(RunNotFound):
            store.get(gone)
    assert [info.run_id for info in store.runs(include_nested=True)] == ["r2"]
    with pytest.raises(RunNotFound, match="'r1'"):
        store.delete("r1")
    await store.create(header("r1"), CHART, "a", TTL, started())  # the id is free again
    assert store.get("r1").records == (started(),)  # nothing of the deleted run came back


async def test_prune_deletes_runs_and_session_items_not_updated_for_a_while(
    store: RunStore, backend: Backend
) -> None:
    await suspended_run(store, "old")
    await create(store, "old/2:t1", parent="old")
    await suspended_run(store, "new")
    store.session("s").add([UserMessage("old")], "old")
    backend.sql("UPDATE runs SET updated_at = updated_at - 1000")
    backend.sql("UPDATE sessions SET created_at = created_at - 1000")
    await store.claim("new", "b", TTL)  # touched now
    store.session("s").add([UserMessage("new")], "new")
    assert store.prune(3600) == 0
    assert store.prune(500) == 2
    assert [info.run_id for info in store.runs(include_nested=True)] == ["new"]
    assert store.session("s").items() == (UserMessage("new"),)


async def test_charts_are_kept_by_digest(store: RunStore) -> None:
    assert store.chart(DIGEST) is None
    await create(store)
    assert store.chart(DIGEST) == CHART
    store.put_chart("other", "{}")
    store.put_chart("other", '{"ignored": true}')  # a digest names one chart: first wins
    assert store.chart("other") == "{}"


async def test_a_payload_is_kept_by_its_run_and_the_sha256_of_its_bytes(store: RunStore) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    key = await store.aput_payload("r1", data)
    assert key == digest_of(data)
    assert await store.aput_payload("r1", data) == key  # the same bytes: the same row
    assert await store.apayload("r1", key) == data
    with pytest.raises(PayloadNotFound, match="'r2'"):
        await store.apayload("r2", key)  # a payload belongs to its run


async def test_a_payload_whose_bytes_were_changed_is_refused(
    store: RunStore, backend: Backend
) -> None:
    key = await store.aput_payload("r1", b"the whole answer")
    backend.sql("UPDATE payloads SET data = ?", b"another answer")
    with pytest.raises(StoreCorrupt, match=r"'r1'.*changed"):
        await store.apayload("r1", key)


async def test_delete_takes_the_payloads_of_the_runs_it_deletes(store: RunStore) -> None:
    await create(store, "r1")
    await create(store, "r1/2:t1", parent="r1")
    await create(store, "r2")
    for run_id in ("r1", "r1/2:t1", "r2"):
        key = await store.aput_payload(run_id, b"the same bytes")
    assert store.delete("r1") == 2
    for run_id in ("r1", "r1/2:t1"):
        with pytest.raises(PayloadNotFound):
            await store.apayload(run_id, key)
    assert await store.apayload("r2", key) == b"the same bytes"  # another run's, kept


async def test_open_store_of_the_url_opens_the_same_runs(store: RunStore, backend: Backend) -> None:
    await suspended_run(store)
    again = backend.open()
    assert again.url == store.url
    assert again.get("r1") == store.get("r1")


def test_a_store_serves_many_event_loops_and_sync_calls_inside_one(store: RunStore) -> None:
    """`Runner.run_sync` and `asyncio.run` open a loop per call; a store outlives them."""
    writer = asyncio.run(create(store))
    asyncio.run(store.release("r1", writer.lease, "suspended"))

    async def read_inside_a_loop() -> Any:
        return store.get("r1").info, store.runs(), await store.aruns()

    info, listed, alisted = asyncio.run(read_inside_a_loop())
    assert (info.seq, info.status) == (1, "suspended")
    assert listed == alisted == [info]
    outcomes = race(3, lambda i: store.claim("r1", f"d{i}", TTL))
    assert sum(isinstance(outcome, Lease) for outcome in outcomes) == 1


# ---------------------------------------------------------------- the schema


async def test_a_database_at_schema_version_0_is_migrated(backend: Backend) -> None:
    backend.sql("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    backend.sql("INSERT INTO meta (key, value) VALUES ('schema', '0')")
    store = backend.open()
    assert backend.sql("SELECT value FROM meta WHERE key = 'schema'") == [(backend.schema_version,)]
    await suspended_run(store)
    assert store.get("r1").records == (started(), suspended())
    backend.open()  # opening a migrated database again changes nothing
    assert backend.sql("SELECT value FROM meta WHERE key = 'schema'") == [(backend.schema_version,)]


async def test_a_database_of_a_newer_schema_is_refused(backend: Backend) -> None:
    await suspended_run(backend.open())
    backend.sql("UPDATE meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(StoreCorrupt) as refused:
        backend.open()
    assert (
        f"has schema version 99, newer than this helikon knows ({backend.schema_version}): "
        "upgrade helikon to open it"
    ) in str(refused.value)  # both versions named (helikon of format 1 says it alike)


def test_stores_opened_at_once_on_a_new_database_migrate_it_once(backend: Backend) -> None:
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            backend.open()
        except BaseException as exc:
            errors.append(exc)

    threads = [run_in_thread(open_one) for _ in range(4)]
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert backend.sql("SELECT value FROM meta WHERE key = 'schema'") == [(backend.schema_version,)]


# ---------------------------------------------------------------- racing writers


async def test_of_many_claims_at_once_exactly_one_wins(backend: Backend) -> None:
    await create(backend.open(), ttl=-1.0)
    stores = [backend.open() for _ in range(4)]
    outcomes = race(4, lambda i: stores[i].claim("r1", f"d{i}", TTL))
    won = [outcome for outcome in outcomes if isinstance(outcome, Lease)]
    assert len(won) == 1 and won[0].epoch == 2
    assert all(isinstance(outcome, (Lease, RunLeased)) for outcome in outcomes)
    assert stores[0].get("r1").info.lease_owner == won[0].owner


async def test_of_many_appends_of_one_seq_exactly_one_is_written(backend: Backend) -> None:
    writer = await create(backend.open())
    stores = [backend.open() for _ in range(4)]

    async def append(i: int) -> str:
        record = started(2) if i else suspended(2)
        return await stores[i].append("r1", writer.lease, record, writer.head, (), "running")

    outcomes = race(4, append)
    written = [outcome for outcome in outcomes if isinstance(outcome, str)]
    assert len(written) == 1
    assert all(isinstance(outcome, (str, LeaseLost)) for outcome in outcomes)
    assert stores[0].get("r1").head_mac == written[0]


async def test_of_many_spends_of_one_decision_exactly_one_succeeds(backend: Backend) -> None:
    await suspended_run(backend.open())
    stores = [backend.open() for _ in range(4)]
    outcomes = race(4, lambda i: stores[i].decide("r1", 2, [approve()]))
    assert sorted(type(outcome).__name__ for outcome in outcomes) == [
        "DecisionSpent", "DecisionSpent", "DecisionSpent", "NoneType",
    ]  # fmt: skip


SWAP_ITEMS = "UPDATE sessions SET n = -1 WHERE n = 1 AND session_id = 's'; "
SWAP_ITEMS += "UPDATE sessions SET n = 1 WHERE n = 2 AND session_id = 's'; "
SWAP_ITEMS += "UPDATE sessions SET n = 2 WHERE n = -1"
SESSION_TAMPERING = {
    "an edited item": (
        "UPDATE sessions SET item = replace(item, 'milk', 'gold')",
        "link 2 of 3 (item 2) does not chain",
    ),
    "an item removed (a question without its answer)": (
        "DELETE FROM sessions WHERE n = 3",
        "link 3 of 3, after item 2, is missing (a row was removed)",
    ),
    "the first item removed": (
        "DELETE FROM sessions WHERE n = 1 AND session_id = 's'",
        "link 1 of 3, after its start, is missing",
    ),
    "an item added": (
        "INSERT INTO sessions (session_id, n, item, mac, run_id, created_at) "
        "SELECT session_id, 4, item, mac, run_id, created_at FROM sessions WHERE n = 3",
        "item 4 is not in its chain (link 4, head at link 3): an added row",
    ),
    "two items swapped": (SWAP_ITEMS, "link 1 of 3 (item 1) does not chain"),
    "the head moved back": (
        "UPDATE session_heads SET n = 2 WHERE session_id = 's'",
        "its head (item 2) does not match its signature",
    ),
    "the items and the head of another session": (
        "UPDATE sessions SET session_id = 's' WHERE session_id = 'other'; "
        "DELETE FROM session_heads WHERE session_id = 's'; "
        "UPDATE session_heads SET session_id = 's' WHERE session_id = 'other'",
        "does not match its signature",
    ),
}


@pytest.mark.parametrize("tampering", SESSION_TAMPERING, ids=list(SESSION_TAMPERING))
def test_a_tampered_session_is_refused(store: RunStore, backend: Backend, tampering: str) -> None:
    store.session("s").add([UserMessage("what do I need?")], "r1")
    store.session("s").add([AssistantMessage("remember the milk"), UserMessage("and?")], "r2")
    store.session("other").add([UserMessage("elsewhere")], "r3")
    if "another session" in tampering:
        backend.sql("DELETE FROM sessions WHERE session_id = 's'")
    statement, named = SESSION_TAMPERING[tampering]
    backend.sql(statement)
    with pytest.raises(StoreCorrupt, match="session 's'") as refused:
        store.session("s").items()
    assert named in str(refused.value)


async def test_prune_keeps_a_run_a_live_driver_holds(store: RunStore, backend: Backend) -> None:
    """A run in a long tool call is not updated for a while, but its lease is live."""
    await create(store, "busy")
    await suspended_run(store, "idle")
    backend.sql("UPDATE runs SET updated_at = updated_at - 1000")
    assert store.prune(500) == 1
    assert [info.run_id for info in store.runs()] == ["busy"]


async def test_a_lost_compare_and_swap_says_another_write_came_first(store: RunStore) -> None:
    writer = await create(store)
    await writer.append(suspended(), status="suspended")
    with pytest.raises(LeaseLost, match="another write of this step came first"):
        await store.append("r1", writer.lease, suspended(), "", (), "suspended")


async def test_a_run_id_no_store_can_keep_is_refused(store: RunStore) -> None:
    for bad in ("", "a\x00b", "x" * 513):
        with pytest.raises(StoreError, match="cannot be stored"):
            await store.create(header(bad), CHART, "a", TTL, started())
