"""`SqliteRunStore`: the embedded run store, one SQLite file, many processes.

Theory of operation: stdlib `sqlite3` in WAL mode with `synchronous=NORMAL` (a commit
survives a crash of the process; `synchronous="FULL"` also survives the machine losing power,
at the cost the benchmark prints). Every write is one `BEGIN IMMEDIATE` transaction
conditioned on the writer's lease (owner and epoch) and, for a record, on the run's head
(compare and swap), so a second driver is refused and a stale one stops at its next write.
The async methods the driver awaits run inline: a WAL commit takes tens of microseconds,
less than a hop to a worker thread would. SQL text is in `helikon.durable.sqlite_sql`;
the transaction and SQLite's errors in `sqlite_transactions`, the migrations in
`sqlite_migrate`, sessions in `sqlite_sessions`, what a write adds to a run's chain in
`sqlite_links`.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from helikon.core.approvals import ApprovalDecision
from helikon.core.items import Item
from helikon.core.quoting import quoted
from helikon.durable import refusals, rows
from helikon.durable import sqlite_links as links
from helikon.durable import sqlite_sessions as sessions
from helikon.durable import sqlite_sql as sql
from helikon.durable.chain import Chain, genesis
from helikon.durable.payloads import checked, digest_of
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
from helikon.durable.rows import RunHead
from helikon.durable.signing import resolve_key
from helikon.durable.sqlite_migrate import migrate
from helikon.durable.sqlite_transactions import Transaction, failed, to_wal
from helikon.durable.views import EventStream, Revision, Session, pending_of

DEFAULT_PATH = Path(".helikon") / "runs.db"
ENDED = ("completed", "failed")
"""Statuses whose record releases the run's lease in its own transaction."""


class SqliteRunStore:
    """Runs kept in one SQLite file (the CLI's default: `.helikon/runs.db`).

    Args:
        path: the database file (made with its folder when missing), or ":memory:".
        key: the key rows are signed with; default $HELIKON_STORE_KEY, else a key file
            beside the database (`<path>.key`, mode 0600).
        synchronous: SQLite's `synchronous` setting: "NORMAL" (a commit survives a process
            crash) or "FULL" (also a power loss).
        busy_timeout: seconds a write waits for another process's write to finish.
    """

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        *,
        key: bytes | str | None = None,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 10.0,
    ) -> None:
        self.path = str(path)
        memory = self.path == ":memory:"
        if not memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._key = resolve_key(key, None if memory else Path(self.path + ".key"))
        self._lock = threading.RLock()
        self._charts: set[str] = set()  # digests this store object has seen committed
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            to_wal(self._db, busy_timeout)
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.execute("PRAGMA foreign_keys=ON")
            with self._write() as db:
                migrate(db, self._key, self.path)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open the run store {self.path}: {exc}") from None

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def __repr__(self) -> str:
        return f"SqliteRunStore({self.path!r})"

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> SqliteRunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ schema

    def _write(self) -> Transaction:
        """One write transaction, taken at once (`BEGIN IMMEDIATE`), committed or rolled back."""
        return Transaction(self._db, self._lock, self.path)

    def _read(self, query: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock, self._reading():
            return self._db.execute(query, args).fetchall()

    # ------------------------------------------------------------ driving a run

    async def create(
        self,
        header: RunHeader,
        chart_data: str,
        owner: str,
        ttl: float,
        record: StepRecord,
        effects: Sequence[EffectRecord] = (),
    ) -> tuple[Lease, str]:
        """Add a new run with its first record, leased to `owner`: one transaction, so a
        run is never stored without the input it started from. (The lease, the first
        record's signature.)

        Raises:
            RunExists: a run of that id is in the store.
        """
        rows.check_run_id(header.run_id)
        _check_seq(header.run_id, record.seq)
        now = time.time()
        data, mac = rows.header_row(self._key, header)
        chain = Chain(0, genesis("run", header.run_id))
        events = rows.effect_rows(header.run_id, chain, 1, effects)
        record_data, record_mac, record_link = rows.record_row(chain, record)
        head = RunHead(record.seq, record_mac, chain.n, chain.digest)
        with self._write() as db:
            if header.chart_digest not in self._charts:  # a chart is kept once per store
                db.execute(sql.PUT_CHART, (header.chart_digest, chart_data))
            try:
                db.execute(
                    sql.CREATE_RUN,
                    (
                        header.run_id,
                        data,
                        mac,
                        header.agent,
                        header.parent_run_id,
                        header.session_id,
                        record.state_after.phase,
                        record.seq,
                        record_mac,
                        rows.turns_of(record),
                        owner,
                        now + ttl,
                        now,
                        now,
                        header.forked_from,
                        header.forked_at,
                        rows.head_sig(self._key, header.run_id, head),
                        head.n,
                        head.digest,
                    ),
                )
            except sqlite3.IntegrityError:
                raise refusals.run_exists(header.run_id) from None
            db.executemany(sql.INSERT_EFFECT, events)
            args = (header.run_id, record.seq, record_data, record_mac, record_link)
            db.execute(sql.INSERT_RECORD, args)
        self._charts.add(header.chart_digest)  # committed (charts are never deleted)
        return Lease(owner, 1, now + ttl), record_mac

    async def claim(self, run_id: str, owner: str, ttl: float, *, force: bool = False) -> Lease:
        """Take the run's lease: free, expired, or (`force`) from an owner known dead.

        Raises:
            RunNotFound: no such run.
            RunLeased: another owner holds an unexpired lease.
        """
        now = time.time()
        with self._write() as db:
            row = db.execute(
                "SELECT lease_owner, lease_epoch, lease_expires FROM runs WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise refusals.run_not_found(run_id, self.path)
            if not db.execute(sql.CLAIM, (owner, now + ttl, now, run_id, now, force)).rowcount:
                raise refusals.run_leased(run_id, row[0], row[2])
            return Lease(owner, int(row[1]) + 1, now + ttl)

    async def renew(self, run_id: str, lease: Lease, ttl: float) -> Lease:
        expires = time.time() + ttl
        with self._write() as db:
            if not db.execute(sql.RENEW, (expires, run_id, lease.owner, lease.epoch)).rowcount:
                raise links.lost(db, run_id, lease)
        return Lease(lease.owner, lease.epoch, expires)

    async def append(
        self,
        run_id: str,
        lease: Lease,
        record: StepRecord,
        previous_mac: str,
        effects: Sequence[EffectRecord],
        status: RunStatus,
        calls: Sequence[CallRecord] = (),
    ) -> str:
        """Write one record (and the effects before it, and `calls`: rows of calls that
        start, results of calls that finished, first write wins), if `lease` still holds
        and the run's head is the record before; the new head's signature.

        Raises:
            LeaseLost: another driver took the run, or wrote this seq first.
        """
        _check_seq(run_id, record.seq)
        phase = record.state_after.phase
        turns = rows.turns_of(record)
        ended = status in ENDED
        with self._write() as db:
            before, chain = links.held(db, run_id, lease)
            if (before.seq, before.mac) != (record.seq - 1, previous_mac):
                raise links.lost(db, run_id, lease)
            links.insert_effects(db, run_id, effects, chain)
            data, mac, link = rows.record_row(chain, record)
            db.execute(sql.INSERT_RECORD, (run_id, record.seq, data, mac, link))
            links.write_calls(db, run_id, calls, chain)
            head = RunHead(record.seq, mac, chain.n, chain.digest)
            advanced = db.execute(
                sql.ADVANCE,
                (
                    record.seq,
                    mac,
                    rows.head_sig(self._key, run_id, head),
                    head.n,
                    head.digest,
                    status,
                    phase,
                    turns,
                    time.time(),
                    ended,  # a run that ended lets go of its lease with its last record
                    ended,
                    run_id,
                    lease.owner,
                    lease.epoch,
                    record.seq - 1,
                    previous_mac,
                ),
            ).rowcount
            if not advanced:
                raise links.lost(db, run_id, lease)
        return mac

    async def add_effects(self, run_id: str, lease: Lease, effects: Sequence[EffectRecord]) -> None:
        if not effects:
            return
        with self._write() as db:
            head, chain = links.held(db, run_id, lease)
            links.insert_effects(db, run_id, effects, chain)
            links.seal(db, self._key, run_id, head, chain)

    async def start_call(self, run_id: str, lease: Lease, call: CallRecord) -> None:
        """Record that a call starts (a call already recorded keeps its row; a result the
        record carries is not written: that is `finish_call`'s)."""
        with self._write() as db:
            head, chain = links.held(db, run_id, lease)
            links.write_calls(db, run_id, (replace(call, result=None),), chain)
            links.seal(db, self._key, run_id, head, chain)

    async def finish_call(self, run_id: str, lease: Lease, *calls: CallRecord) -> None:
        """Record calls' results, in one transaction; the first result written wins."""
        with self._write() as db:
            head, chain = links.held(db, run_id, lease)
            links.write_calls(db, run_id, calls, chain)
            links.seal(db, self._key, run_id, head, chain)

    async def decide(self, run_id: str, seq: int, decisions: Sequence[ApprovalDecision]) -> None:
        """Spend approval decisions for suspension `seq`: each call is decided once.

        Raises:
            StoreError (`DecisionSpent`): a call of these was decided already.
        """
        with self._write() as db:
            row = db.execute(sql.CHAIN, (run_id,)).fetchone()
            if row is None:
                raise refusals.run_not_found(run_id, self.path)
            head, chain = RunHead(*row), Chain(row[2], row[3])
            if head.seq != seq:
                raise refusals.not_suspended_at(run_id, head.seq, seq)
            for decision in decisions:
                data, mac, link = rows.decision_row(chain, seq, decision)
                args = (run_id, seq, decision.call_id, data, mac, link)
                try:
                    db.execute(sql.INSERT_DECISION, args)
                except sqlite3.IntegrityError:
                    raise refusals.decision_spent(run_id, decision.call_id, seq) from None
            links.seal(db, self._key, run_id, head, chain)

    async def release(self, run_id: str, lease: Lease, status: RunStatus) -> None:
        with self._write() as db:
            db.execute(sql.RELEASE, (status, time.time(), run_id, lease.owner, lease.epoch))

    # ------------------------------------------------------------ reading

    async def load(self, run_id: str) -> StoredRun:
        return self.get(run_id)

    def get(self, run_id: str) -> StoredRun:
        """Everything the store holds for `run_id`, read as one snapshot, every signature
        checked.

        Raises:
            RunNotFound: no such run.
            StoreCorrupt: a row does not check out.
        """
        with self._lock, self._reading():
            row, header = self._run_row(run_id)
            head = RunHead(row[7], row[8], row[19], row[20])
            rows.check_head(self._key, run_id, head, row[17])
            found = [
                self._db.execute(query, (row[18] if query is sql.RECORDS else run_id,)).fetchall()
                for query in _PARTS
            ]
            chart = self._db.execute(sql.CHART, (header.chart_digest,)).fetchone()
        records, effects, calls, decisions = rows.read_rows(run_id, head, *found)
        return StoredRun(
            header,
            _info(row),
            records,
            effects,
            calls,
            decisions,
            rows.read_chart(chart[0] if chart else None, header.chart_digest, run_id),
            row[8],
        )

    async def aheader(self, run_id: str) -> RunHeader:
        return self.header(run_id)

    async def arevision(self, run_id: str) -> Revision:
        return self.revision(run_id)

    def revision(self, run_id: str) -> Revision:
        """What changes whenever the run's records, its effects' events or its row do (a
        record appended, an event stored, a lease taken, the run ended): a follower reads
        the run again, checked, only when it changed. It is not checked itself: a forged
        one can only make a follower read again, or later.

        Raises:
            RunNotFound: no such run.
        """
        with self._lock, self._reading():
            row = self._db.execute(sql.REVISION, (run_id, run_id)).fetchone()
        if row is None:
            raise refusals.run_not_found(run_id, self.path)
        return tuple(row)

    def header(self, run_id: str) -> RunHeader:
        """The run's header alone, its signature checked as `get` checks it: a read that
        does not grow with the run (`get` reads and checks every record).

        Raises:
            RunNotFound: no such run.
            StoreCorrupt: the header does not check out.
        """
        with self._lock, self._reading():
            return self._run_row(run_id)[1]

    def _run_row(self, run_id: str) -> tuple[Any, RunHeader]:
        """The run's row and its header, checked (inside a read of the caller's)."""
        row = self._db.execute(sql.RUN_ROW, (run_id,)).fetchone()
        if row is None:
            raise refusals.run_not_found(run_id, self.path)
        return row, rows.read_header(self._key, run_id, row[1], row[2])

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """One read transaction (one snapshot of the file), with SQLite's errors as the
        store's (`failed`): a busy or unreadable file is a `StoreError`, a file SQLite
        finds damaged `StoreCorrupt`, each with SQLite's error as its cause."""
        try:
            self._db.execute("BEGIN")
            try:
                yield
            finally:
                self._db.execute("COMMIT")
        except sqlite3.ProgrammingError as exc:  # a DatabaseError too: caught first
            raise StoreError(f"the run store {self.path} is closed: {exc}") from exc
        except sqlite3.Error as exc:
            raise failed(self.path, exc, "be read") from exc

    def runs(
        self, status: RunStatus | None = None, *, include_nested: bool = False
    ) -> list[RunInfo]:
        """The runs in the store, newest first: id, agent, phase, seq, status, turns, times."""
        where, args = rows.run_filter(status, include_nested, "?")
        query = sql.RUN_LIST + where + " ORDER BY updated_at DESC, run_id"
        return [_info(row) for row in self._read(query, args)]

    async def aruns(
        self, status: RunStatus | None = None, *, include_nested: bool = False
    ) -> list[RunInfo]:
        return await asyncio.to_thread(self.runs, status, include_nested=include_nested)

    def pending(self, run_id: str) -> tuple[Any, ...]:
        """The `ApprovalRequest`s a suspended run waits on (stamped: decide on these)."""
        return pending_of(self.get(run_id))

    async def apending(self, run_id: str) -> tuple[Any, ...]:
        return await asyncio.to_thread(self.pending, run_id)

    def events(self, run_id: str, after: int = 0, *, follow: bool = False) -> EventStream:
        """The run's events after the first `after` (`for` or `async for` them); with
        `follow`, wait for more until the run ends or suspends. Deltas are not stored."""
        return EventStream(self.get, run_id, after, follow, revision=self.revision)

    aevents = events

    def session(self, session_id: str) -> Session:
        """Conversation memory across runs (`agent.run(..., session=...)`)."""
        return Session(self, session_id)

    async def asession(self, session_id: str) -> Session:
        return self.session(session_id)

    # ------------------------------------------------------------ sessions

    def session_items(self, session_id: str) -> tuple[Item, ...]:
        with self._lock, self._reading():
            return sessions.read(self._db, self._key, session_id)

    def add_session_items(self, session_id: str, items: Sequence[Item], run_id: str) -> None:
        if items:
            with self._write() as db:
                sessions.add(db, self._key, session_id, items, run_id)

    def clear_session(self, session_id: str) -> None:
        with self._write() as db:
            sessions.clear(db, session_id)

    # ------------------------------------------------------------ retention

    def delete(self, run_id: str) -> int:
        """Delete a run with the runs nested in it; how many runs went.

        Raises:
            RunNotFound: no such run.
        """
        with self._write() as db:
            if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise refusals.run_not_found(run_id, self.path)
            return self._delete_tree(db, run_id)

    async def adelete(self, run_id: str) -> int:
        return await asyncio.to_thread(self.delete, run_id)

    def _delete_tree(self, db: sqlite3.Connection, run_id: str) -> int:
        todo, seen = [run_id], {run_id}
        while todo:  # a loop, not recursion: a forged parent cycle cannot make it endless
            current = todo.pop()
            for statement in sql.DELETE_RUN:
                db.execute(statement, (current,))
            for (child,) in db.execute(sql.CHILDREN, (current,)).fetchall():
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        return len(seen)

    def prune(self, older_than: float) -> int:
        """Delete runs (with their nested runs) and session items not updated for
        `older_than` seconds, except runs a live driver holds; how many runs went."""
        cutoff = time.time() - older_than
        with self._write() as db:
            now = time.time()
            old = [row[0] for row in db.execute(sql.OLD_RUNS, (cutoff, now)).fetchall()]
            gone = sum(self._delete_tree(db, run_id) for run_id in old)
            for session_id, upto in db.execute(sql.OLD_SESSIONS, (cutoff,)).fetchall():
                sessions.prune(db, self._key, session_id, upto)
        return gone

    async def aprune(self, older_than: float) -> int:
        return await asyncio.to_thread(self.prune, older_than)

    async def aput_payload(self, run_id: str, data: bytes) -> str:
        """Keep `data` for `run_id` (once: a second put of the same bytes is the first); its
        key, the sha256 of the bytes."""
        return await asyncio.to_thread(self.put_payload, run_id, data)

    def put_payload(self, run_id: str, data: bytes) -> str:
        digest = digest_of(data)
        with self._write() as db:
            db.execute(sql.PUT_PAYLOAD, (run_id, digest, data))
        return digest

    async def apayload(self, run_id: str, digest: str) -> bytes:
        """The payload of `run_id` kept under `digest`, verified (`payloads.checked`)."""
        return await asyncio.to_thread(self.payload, run_id, digest)

    def payload(self, run_id: str, digest: str) -> bytes:
        found = self._read(sql.PAYLOAD, (run_id, digest))
        return checked(run_id, digest, found[0][0] if found else None, str(self.path))

    def put_chart(self, digest: str, data: str) -> None:
        with self._write() as db:
            db.execute(sql.PUT_CHART, (digest, data))

    def chart(self, digest: str) -> str | None:
        found = self._read(sql.CHART, (digest,))
        return found[0][0] if found else None


_PARTS = (sql.RECORDS, sql.EFFECTS, sql.CALLS, sql.DECISIONS)


def _check_seq(run_id: str, seq: int) -> None:
    """A record's key is its run's number and its seq: the seq must fit its part."""
    if not 0 < seq < sql.RUN_SPAN:
        raise StoreError(
            f"run {quoted(run_id)}: record {seq} cannot be stored (seqs are below 2**32)"
        )


def _info(row: Any) -> RunInfo:
    (run_id, _, _, agent, parent, status, phase, seq, _, turns, owner, _, expires) = row[:13]
    return RunInfo(
        run_id,
        agent,
        phase,
        seq,
        status,
        turns,
        row[14],
        row[13],
        parent,
        owner,
        expires,
        row[15],
        row[16],
    )
