"""A SQLite run store written by the previous schema (version 1) opens migrated to this one:
its runs read back whole, every signature checked, and a suspended run resumes from it.

Version 1 is made the way that helikon made it: the store opened with only the first
migration known (the statements that write rows are the same in both versions).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from store_drivers import TRANSFER, resume_approved, teller
from store_support import KEY

from helikon.core.approvals import ApprovalRequest
from helikon.durable import SqliteRunStore, sqlite_sql


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


async def test_a_version_1_store_is_migrated_and_its_suspended_run_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, log = tmp_path / "runs.db", tmp_path / "transfers.log"
    with monkeypatch.context() as old:
        old.setattr(sqlite_sql, "SCHEMA_VERSION", 1)
        old.setattr(sqlite_sql, "MIGRATIONS", sqlite_sql.MIGRATIONS[:1])
        with SqliteRunStore(path, key=KEY) as store:
            result = await teller(log).run("pay ann 10", store=store, run_id="r1").collect()
            assert result.suspended
            written = store.get("r1")
    version, indexes, records = schema_of(path)
    assert (version, "runs_by_status" in indexes, "WITHOUT ROWID" in records) == ("1", True, True)

    with SqliteRunStore(path, key=KEY) as store:
        version, indexes, records = schema_of(path)
        assert version == str(sqlite_sql.SCHEMA_VERSION) == "2"
        assert "runs_by_status" not in indexes and "WITHOUT ROWID" not in records
        migrated = store.get("r1")  # every signature and the record chain checked
        assert (migrated.records, migrated.calls, migrated.effects, migrated.head_mac) == (
            written.records,
            written.calls,
            written.effects,
            written.head_mac,
        )
        assert store.pending("r1") == (ApprovalRequest.for_call(TRANSFER).bound("r1", 2),)
        assert await resume_approved(store, "r1", log) == "completed"
        assert [info.status for info in store.runs(status="completed")] == ["completed"]
    assert log.read_text() == "transfer 10 to ann\n"
