"""`RunStore`: what the driver, the CLI and the debugger need of a run store, and
`open_store(url)`, which opens one from a URL.

Theory of operation: a store is a protocol with small, named operations (create a run, claim
its lease, append a record, record a call's start and result, spend decisions, release),
each one transaction, each conditioned on the caller's lease (a record carries the call rows
written with it: the starts of the calls it asks for, the last result of the batch before
it; the record of a run that ended releases the lease); reads (`get`, `header`,
`runs`, `pending`, `events`) and a session's items (read, added, cleared), each with an
async twin that runs off the caller's event loop, so async applications never block.
Both backends are one design (`sql_store.SqlRunStore`): each operation is written once
over a dialect of SQL text and a connection adapter. `get` reads a whole run, checking
every record; `header` reads its header alone, checked alike, for a caller that needs no
more (a read that does not grow with the run); `revision` tells a follower whether
anything changed since it last read the run.
The same conformance suite runs against every backend (`tests/test_store_conformance.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.durable.records import (
    CallRecord,
    EffectRecord,
    Lease,
    RunHeader,
    RunInfo,
    RunStatus,
    StepRecord,
    StoredRun,
    StoreError,
)
from helikon.durable.views import EventStream, Revision, Session, SessionStore


@runtime_checkable
class RunStore(SessionStore, Protocol):
    """A run store (`SqliteRunStore`, `PostgresRunStore`); its sessions' operations are
    `SessionStore`'s."""

    @property
    def url(self) -> str: ...

    async def create(
        self,
        header: RunHeader,
        chart_data: str,
        owner: str,
        ttl: float,
        record: StepRecord,
        effects: Sequence[EffectRecord] = (),
    ) -> tuple[Lease, str]: ...
    async def claim(self, run_id: str, owner: str, ttl: float, *, force: bool = False) -> Lease: ...
    async def renew(self, run_id: str, lease: Lease, ttl: float) -> Lease: ...
    async def append(
        self,
        run_id: str,
        lease: Lease,
        record: StepRecord,
        previous_mac: str,
        effects: Sequence[EffectRecord],
        status: RunStatus,
        calls: Sequence[CallRecord] = (),
    ) -> str: ...
    async def add_effects(
        self, run_id: str, lease: Lease, effects: Sequence[EffectRecord]
    ) -> None: ...
    async def start_call(self, run_id: str, lease: Lease, call: CallRecord) -> None: ...
    async def finish_call(self, run_id: str, lease: Lease, *calls: CallRecord) -> None: ...
    async def decide(
        self, run_id: str, seq: int, decisions: Sequence[ApprovalDecision]
    ) -> None: ...
    async def release(self, run_id: str, lease: Lease, status: RunStatus) -> None: ...
    async def load(self, run_id: str) -> StoredRun: ...

    async def aput_payload(self, run_id: str, data: bytes) -> str: ...
    async def apayload(self, run_id: str, digest: str) -> bytes: ...

    def get(self, run_id: str) -> StoredRun: ...
    def header(self, run_id: str) -> RunHeader: ...
    async def aheader(self, run_id: str) -> RunHeader: ...
    def revision(self, run_id: str) -> Revision: ...
    async def arevision(self, run_id: str) -> Revision: ...
    def runs(
        self, status: RunStatus | None = None, *, include_nested: bool = False
    ) -> list[RunInfo]: ...
    async def aruns(
        self, status: RunStatus | None = None, *, include_nested: bool = False
    ) -> list[RunInfo]: ...
    def pending(self, run_id: str) -> tuple[ApprovalRequest, ...]: ...
    async def apending(self, run_id: str) -> tuple[ApprovalRequest, ...]: ...
    def events(self, run_id: str, after: int = 0, *, follow: bool = False) -> EventStream: ...
    def session(self, session_id: str) -> Session: ...
    def delete(self, run_id: str) -> int: ...
    def prune(self, older_than: float) -> int: ...
    def close(self) -> None: ...


def open_store(url: str, **options: Any) -> RunStore:
    """The store a URL names: `sqlite:///path/to/runs.db` (`sqlite:///:memory:`), or
    `postgresql://user@host/db` (also `postgres://`; the `postgres` extra).

    Raises:
        StoreError: an unknown scheme, a PostgreSQL URL without the `postgres` extra
            installed, or the store cannot be opened.
    """
    parsed = urlparse(url)
    if parsed.scheme in ("postgresql", "postgres"):
        try:
            from helikon.durable.postgres import PostgresRunStore
        except ModuleNotFoundError as exc:
            if exc.name not in ("psycopg", "psycopg_pool"):
                raise
            raise StoreError(str(exc)) from None
        return PostgresRunStore(url, **options)
    if parsed.scheme == "sqlite":
        # Imported here, not at the top: `import helikon` (which imports this module) must
        # not load the SQLite store (tests/test_exports.py).
        from helikon.durable.sqlite import SqliteRunStore

        path = url[len("sqlite://") :]
        path = path[1:] if path.startswith("/") else path
        if path.startswith("/") or path == ":memory:":
            return SqliteRunStore(path, **options)
        return SqliteRunStore(Path(path) if path else Path(".helikon") / "runs.db", **options)
    raise StoreError(
        f"unknown run store URL {url!r}: use sqlite:///path/runs.db or postgresql://..."
    )
