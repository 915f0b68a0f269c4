"""Durable runs: a run store keeps every transition of every run, so a run resumes at any
boundary after a crash, approvals are spent once across processes, and sessions keep a
conversation across runs.

`RunStore` is the protocol (`store.py`); `SqliteRunStore` the embedded default
(`sqlite.py`), `PostgresRunStore` the one for many workers (`postgres.py`, the `postgres`
extra); `open_store(url)` opens either. Both are one design, `SqlRunStore` (`sql_store.py`):
each operation is written once (`sql_writes.py`, `sql_reads.py`, `sql_sessions.py`) over a
dialect, a module of SQL text (`sqlite_sql.py`, `postgres_sql.py`, with each backend's
schema and migrations), and a connection adapter (`sql_dialect.py`: SQLite's in
`sqlite_transactions.py`, PostgreSQL's in `postgres_engine.py`), and runs on a thread of the
store's, never on the caller's event loop (`sql_engine.py`). A schema is migrated by one
routine too (`sql_migrate.py`; PostgreSQL's on a connection of its own,
`postgres_migrate.py`). What a row means is decided once for both (`rows.py`, `chain.py`),
and so is how a refusal is worded (`refusals.py`). The driver writes through
`helikon.run.journal`; `export_trace` writes a stored run as a trace file (`as_trace.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helikon.durable.as_trace import export_trace, stored_trace
from helikon.durable.records import (
    CallRecord,
    DecisionSpent,
    EffectRecord,
    Lease,
    LeaseLost,
    RunExists,
    RunHeader,
    RunInfo,
    RunLeased,
    RunNotFound,
    StepRecord,
    StoreCorrupt,
    StoredRun,
    StoreError,
)
from helikon.durable.store import RunStore, open_store
from helikon.durable.views import EventStream, Session

if TYPE_CHECKING:
    from helikon.durable.sqlite import SqliteRunStore


def __getattr__(name: str) -> object:
    # The stores are imported only when asked for: PostgresRunStore needs the `postgres`
    # extra (psycopg), and a program that runs agents without a store (`import helikon`)
    # does not load SQLite's.
    if name == "PostgresRunStore":
        from helikon.durable.postgres import PostgresRunStore

        return PostgresRunStore
    if name == "SqliteRunStore":
        from helikon.durable.sqlite import SqliteRunStore

        return SqliteRunStore
    raise AttributeError(f"module 'helikon.durable' has no attribute {name!r}")


__all__ = [
    "CallRecord",
    "DecisionSpent",
    "EffectRecord",
    "EventStream",
    "Lease",
    "LeaseLost",
    "PostgresRunStore",
    "RunExists",
    "RunHeader",
    "RunInfo",
    "RunLeased",
    "RunNotFound",
    "RunStore",
    "Session",
    "SqliteRunStore",
    "StepRecord",
    "StoreCorrupt",
    "StoreError",
    "StoredRun",
    "export_trace",
    "open_store",
    "stored_trace",
]
