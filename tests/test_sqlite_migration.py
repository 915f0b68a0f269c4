"""A SQLite run store of an earlier schema (1, 2: records keyed by run id and seq; 3: by
the run's number and seq; all of format 1, every row signed alone) opens migrated to this
one, its rows chained: its runs read back whole, a suspended run resumes, and a new run is
added beside them, numbered after them.

An earlier store is `format1_store.TABLES` loaded into the schema of that version.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from format1_store import load_format1
from store_drivers import resume_approved, teller
from store_support import SqliteBackend

from helikon.durable import sqlite_sql


def schema_of(path: Path) -> tuple[str, list[str], str]:
    """(schema version, index and trigger names, the records table's SQL)."""
    db = sqlite3.connect(path)
    try:
        (version,) = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        names = [
            row[0]
            for row in db.execute(
                "SELECT name FROM sqlite_schema WHERE type IN ('index', 'trigger')"
            )
        ]
        (records,) = db.execute("SELECT sql FROM sqlite_schema WHERE name = 'records'").fetchone()
    finally:
        db.close()
    return version, sorted(names), records


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_an_earlier_store_is_migrated_and_its_suspended_run_resumes(
    tmp_path: Path, version: int
) -> None:
    path, log = tmp_path / "runs.db", tmp_path / "transfers.log"
    backend = SqliteBackend(path)
    load_format1(backend, version)
    store = backend.open()
    try:
        found, names, records = schema_of(path)
        assert found == str(sqlite_sql.SCHEMA_VERSION) == "4"
        assert names == [
            "calls_need_a_link", "decisions_need_a_link", "effects_need_a_link",
            "records_need_a_link", "results_need_a_link", "runs_by_key", "runs_by_parent",
            "runs_need_a_chain", "sqlite_autoindex_meta_1", "sqlite_autoindex_payloads_1",
            "sqlite_autoindex_runs_1",
        ]  # fmt: skip
        assert "id INTEGER PRIMARY KEY" in records and "UNIQUE" not in records
        assert "link INTEGER" in records
        assert store.get("r2").info.status == "completed"  # every link of its chain checked
        assert await resume_approved(store, "r1", log) == "completed"
        result = await teller(log).run("pay bob 20", store=store, run_id="r3").collect()
        assert result.suspended  # a new run, numbered after the migrated ones
        assert {info.run_id: info.status for info in store.runs()} == {
            "r1": "completed",
            "r2": "completed",
            "r3": "suspended",
        }
    finally:
        backend.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT run_id, run_key FROM runs ORDER BY run_key").fetchall() == [
            ("r1", 1),
            ("r2", 2),
            ("r3", 3),
        ]
    finally:
        db.close()
    assert log.read_text() == "transfer 10 to ann\n"
