"""A run store written in format 1 (every row signed alone: SQLite schema 3, PostgreSQL
schema 1) opens migrated to one chain per run and per session, on every backend: its runs
read back whole, a suspended run resumes, a row removed after the migration is refused;
a run that did not check out is left refused, never laundered; and a helikon of format 1
still running meets the migrated store refused, naming both versions.

The store of format 1 is `format1_store.TABLES`, written by that helikon (commit bd221bc),
loaded table by table into the schema that helikon made (`format1_store.load_format1`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from format1_store import OLD, load_format1
from store_drivers import TRANSFER, resume_approved, teller
from store_support import Backend

from helikon.core.approvals import ApprovalRequest
from helikon.core.items import AssistantMessage, UserMessage
from helikon.durable import StoreCorrupt

SESSION = (UserMessage("what do I need?"), AssistantMessage("milk"), UserMessage("and?"))


async def test_a_store_of_format_1_is_chained_and_its_suspended_run_resumes(
    backend: Backend, tmp_path: Path
) -> None:
    load_format1(backend)
    store = backend.open()
    assert backend.sql("SELECT value FROM meta WHERE key = 'schema'") == [(backend.schema_version,)]
    done = store.get("r2")
    assert (done.info.status, len(done.records), len(done.calls)) == ("completed", 5, 1)
    assert store.pending("r1") == (ApprovalRequest.for_call(TRANSFER).bound("r1", 2),)
    assert store.session("s").items() == SESSION
    assert [record.time for record in done.records] == [None] * 5  # stored before times
    assert all(effect.at is None for effect in done.effects)
    log = tmp_path / "transfers.log"
    assert await resume_approved(store, "r1", log) == "completed"
    assert log.read_text() == "transfer 10 to ann\n"
    resumed = store.get("r1").records  # its old records keep no time; its new ones do
    assert [record.time is None for record in resumed] == [True, True, False, False, False]
    assert [record.time.resumed for record in resumed[2:] if record.time] == [True, False, False]
    result = await teller(log).run("pay bob 20", store=store, run_id="r3").collect()
    assert result.suspended  # a new run beside the migrated ones
    store.session("s").add([AssistantMessage("eggs")], "r3")
    assert store.session("s").items() == (*SESSION, AssistantMessage("eggs"))
    backend.sql("DELETE FROM calls WHERE run_id = 'r2'")  # the migrated rows are chained
    with pytest.raises(StoreCorrupt, match=r"run 'r2': link .* is missing"):
        store.get("r2")


async def test_a_run_that_did_not_check_out_before_is_left_refused(backend: Backend) -> None:
    """A migration checks every row as format 1 did before it chains a run: an edited row
    is not laundered into a chain that checks out."""
    load_format1(backend)
    backend.sql("UPDATE effects SET data = replace(data, 'teller', 'robber') WHERE run_id = 'r1'")
    backend.sql("UPDATE sessions SET item = replace(item, 'milk', 'gold')")
    store = backend.open()
    with pytest.raises(StoreCorrupt, match=r"run 'r1': its head .* does not match its signature"):
        store.get("r1")
    with pytest.raises(StoreCorrupt, match="session 's': item 1 is not in its chain"):
        store.session("s").items()
    assert store.get("r2").info.status == "completed"  # the runs that checked out are kept


FORMAT_1_WRITES = {
    "a record": "INSERT INTO records (run_id, seq, data, mac) SELECT run_id, 9, data, mac "
    "FROM records WHERE run_id = 'r1' AND seq = 2",
    "an event": "INSERT INTO effects (run_id, n, after_seq, data, mac) "
    "VALUES ('r1', 9, 2, '{}', 'mac')",
    "a call's start": "INSERT INTO calls (run_id, seq, call_id, tool, arguments_hash, result, "
    "mac) VALUES ('r1', 2, 't9', 'transfer', 'hash', NULL, 'mac')",
    "a call's result": "UPDATE calls SET result = NULL, result_link = NULL; "  # started only
    "UPDATE calls SET result = '{}', mac = 'mac' WHERE run_id = 'r2' AND result IS NULL",
    "a decision": "INSERT INTO decisions (run_id, seq, call_id, data, mac) "
    "VALUES ('r1', 2, 't9', '{}', 'mac')",
    "a run": "INSERT INTO runs (run_id, header, header_mac, agent, status, phase, head_seq, "
    "head_mac, turns, lease_epoch, created_at, updated_at, head_sig) "
    "VALUES ('r9', '{}', 'mac', 'teller', 'running', 'CallingModel', 1, 'mac', 0, 1, 0, 0, '')",
}


@pytest.mark.parametrize("write", FORMAT_1_WRITES, ids=list(FORMAT_1_WRITES))
async def test_a_worker_of_format_1_still_running_is_refused_naming_both_versions(
    backend: Backend, write: str
) -> None:
    """It checked the schema when it opened the store, before another worker migrated it:
    its next write (as format 1 wrote it, without a link) is refused."""
    load_format1(backend)
    backend.open()
    old, new = OLD[backend.name], backend.schema_version
    with pytest.raises(Exception, match=f"helikon_schema_{new}_refuses_writers_of_schema_{old}"):
        backend.sql(FORMAT_1_WRITES[write])
