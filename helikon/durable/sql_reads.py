"""A SQL store's reads, once for every dialect: a whole run with every signature checked, its
header alone, its revision, the list of runs, a payload, a chart. Each read is one
read-only transaction: one snapshot, so a record appended meanwhile is not half seen. What
the rows mean and whether they check out is `helikon.durable.rows`'.
"""

from __future__ import annotations

from typing import Any

from helikon.durable import refusals, rows
from helikon.durable.payloads import checked
from helikon.durable.records import RunHeader, RunInfo, RunStatus, StoredRun
from helikon.durable.rows import RunHead
from helikon.durable.sql_dialect import Db, Scope
from helikon.durable.views import Revision


async def stored(scope: Scope, run_id: str) -> StoredRun:
    """Everything the store holds for `run_id`, every signature checked (the rows once the
    transaction has ended)."""
    sql = scope.sql
    async with scope.begin(read_only=True) as db:
        row, header = await run_row(scope, db, run_id)
        head = RunHead(row["head_seq"], row["head_mac"], row["chain_n"], row["chain_digest"])
        rows.check_head(scope.key, run_id, head, row["head_sig"])
        found = [await db.all(query, (run_id,)) for query in sql.PARTS]
        chart = await db.one(sql.CHART, (header.chart_digest,))
    records, effects, calls, decisions = rows.read_rows(run_id, head, *found)
    return StoredRun(
        header,
        info(row),
        records,
        effects,
        calls,
        decisions,
        rows.read_chart(chart[0] if chart else None, header.chart_digest, run_id),
        head.mac,
    )


async def header(scope: Scope, run_id: str) -> RunHeader:
    async with scope.begin(read_only=True) as db:
        return (await run_row(scope, db, run_id))[1]


async def run_row(scope: Scope, db: Db, run_id: str) -> tuple[Any, RunHeader]:
    """The run's row and its header, checked."""
    row = await db.one(scope.sql.RUN_ROW, (run_id,))
    if row is None:
        raise refusals.run_not_found(run_id, scope.where)
    return row, rows.read_header(scope.key, run_id, row["header"], row["header_mac"])


async def revision(scope: Scope, run_id: str) -> Revision:
    async with scope.begin(read_only=True) as db:
        row = await db.one(scope.sql.REVISION, (run_id, run_id))
    if row is None:
        raise refusals.run_not_found(run_id, scope.where)
    return tuple(row)


async def run_list(scope: Scope, status: RunStatus | None, include_nested: bool) -> list[RunInfo]:
    """The runs, newest first (with `status` only; with the nested ones when asked)."""
    where, args = rows.run_filter(status, include_nested, scope.sql.MARK)
    async with scope.begin(read_only=True) as db:
        found = await db.all(scope.sql.RUN_LIST + where + scope.sql.RUN_ORDER, args)
    return [info(row) for row in found]


async def payload(scope: Scope, run_id: str, digest: str) -> bytes:
    async with scope.begin(read_only=True) as db:
        found = await db.one(scope.sql.PAYLOAD, (run_id, digest))
    return checked(run_id, digest, bytes(found[0]) if found else None, scope.where)


async def chart(scope: Scope, digest: str) -> str | None:
    async with scope.begin(read_only=True) as db:
        found = await db.one(scope.sql.CHART, (digest,))
    return found[0] if found else None


def info(row: Any) -> RunInfo:
    """A run's line of `runs()`, from its row's columns (`sql.INFO`)."""
    return RunInfo(
        run_id=row["run_id"],
        agent=row["agent"],
        phase=row["phase"],
        seq=row["head_seq"],
        status=row["status"],
        turns=row["turns"],
        updated_at=row["updated_at"],
        created_at=row["created_at"],
        parent_run_id=row["parent_run_id"],
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires"],
        forked_from=row["forked_from"],
        forked_at=row["forked_at"],
    )
