"""A SQLite run store written by an earlier schema (versions 1 and 2) opens migrated to this
one: its runs read back whole, every signature checked, a suspended run resumes from it, and
a new run is added beside it.

An earlier version is made the way that helikon made it: the store opened with only the
migrations it knew, writing and reading records with the statements it had (`BEFORE_3`:
versions 1 and 2 wrote the same rows).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from store_drivers import TRANSFER, resume_approved, teller
from store_support import KEY

from helikon.core.approvals import ApprovalRequest
from helikon.durable import SqliteRunStore, sqlite_sql

# The statements that differ since schema 3, as helikon wrote them before it (records keyed
# by run id and seq; a run had no number). RUN_ROW ends with the run id where it now ends
# with the run's number, which is what the store passes to RECORDS.
BEFORE_3 = {
    "CREATE_RUN": """
INSERT INTO runs (run_id, header, header_mac, agent, parent_run_id, session_id, status, phase,
                  head_seq, head_mac, turns, lease_owner, lease_epoch, lease_expires,
                  created_at, updated_at, forked_from, forked_at, head_sig)
VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)
""",
    "INSERT_RECORD": "INSERT INTO records (run_id, seq, data, mac) VALUES (?, ?, ?, ?)",
    "RUN_ROW": """
SELECT run_id, header, header_mac, agent, parent_run_id, status, phase, head_seq, head_mac,
       turns, lease_owner, lease_epoch, lease_expires, created_at, updated_at, forked_from,
       forked_at, head_sig, run_id
FROM runs WHERE run_id = ?
""",
    "RECORDS": "SELECT seq, data, mac FROM records WHERE run_id = ? ORDER BY seq",
}


def schema_of(path: Path) -> tuple[str, list[str], str]:
    """(schema version, index names, the records table's SQL)."""
    db = sqlite3.connect(path)
    try:
        (version,) = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        indexes = [
            row[0] for row in db.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")
        ]
        (records,) = db.execute("SELECT sql FROM sqlite_schema WHERE name = 'records'").fetchone()
    finally:
        db.close()
    return version, sorted(indexes), records


@pytest.mark.parametrize("version", [1, 2])
async def test_an_earlier_store_is_migrated_and_its_suspended_run_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    path, log = tmp_path / "runs.db", tmp_path / "transfers.log"
    with monkeypatch.context() as old:
        old.setattr(sqlite_sql, "SCHEMA_VERSION", version)
        old.setattr(sqlite_sql, "MIGRATIONS", sqlite_sql.MIGRATIONS[:version])
        for name, statement in BEFORE_3.items():
            old.setattr(sqlite_sql, name, statement)
        with SqliteRunStore(path, key=KEY) as store:
            result = await teller(log).run("pay ann 10", store=store, run_id="r1").collect()
            assert result.suspended
            written = store.get("r1")
    found, indexes, records = schema_of(path)
    assert (found, "runs_by_status" in indexes) == (str(version), version == 1)
    assert ("WITHOUT ROWID" in records, "UNIQUE" in records) == (version == 1, version == 2)

    with SqliteRunStore(path, key=KEY) as store:
        found, indexes, records = schema_of(path)
        assert found == str(sqlite_sql.SCHEMA_VERSION) == "4"
        assert indexes == ["runs_by_key", "runs_by_parent", "sqlite_autoindex_meta_1",
                           "sqlite_autoindex_payloads_1", "sqlite_autoindex_runs_1"]  # fmt: skip
        assert "id INTEGER PRIMARY KEY" in records and "UNIQUE" not in records
        migrated = store.get("r1")  # every signature and the record chain checked
        assert (migrated.records, migrated.calls, migrated.effects, migrated.head_mac) == (
            written.records,
            written.calls,
            written.effects,
            written.head_mac,
        )
        assert store.pending("r1") == (ApprovalRequest.for_call(TRANSFER).bound("r1", 2),)
        assert await resume_approved(store, "r1", log) == "completed"
        result = await teller(log).run("pay bob 20", store=store, run_id="r2").collect()
        assert result.suspended  # a new run, numbered after the migrated one
        assert len(store.get("r1").records) > len(written.records)
        assert store.get("r2").records[0].input != written.records[0].input  # its own
        assert {info.run_id: info.status for info in store.runs()} == {
            "r1": "completed",
            "r2": "suspended",
        }
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT run_id, run_key FROM runs ORDER BY run_key").fetchall() == [
            ("r1", 1),
            ("r2", 2),
        ]
    finally:
        db.close()
    assert log.read_text() == "transfer 10 to ann\n"
