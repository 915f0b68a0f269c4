"""What `PostgresRunStore` reads, in the caller's transaction: a whole run with every
signature checked, its header alone, its revision, and the list of runs (what the rows
mean and whether they check out is `helikon.durable.rows`')."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from helikon.durable import postgres_sql as sql
from helikon.durable import refusals, rows
from helikon.durable.postgres_engine import Cursor, fetch_all
from helikon.durable.records import RunHeader, RunInfo, RunStatus, StoredRun
from helikon.durable.rows import RunHead
from helikon.durable.views import Revision

Reading = Callable[..., AbstractAsyncContextManager[Cursor]]
"""The store's `_transaction`."""

_PARTS = (sql.RECORDS, sql.EFFECTS, sql.CALLS, sql.DECISIONS)


async def stored(read: Reading, key: bytes, where: str, run_id: str) -> StoredRun:
    """Everything the store holds for `run_id`, read in one transaction of `read`, every
    signature checked (once the transaction has given its connection back)."""
    async with read(read_only=True) as cur:
        row, header = await run_row(cur, key, where, run_id)
        info, (head_mac, signature, n, last) = RunInfo(*row[:13]), row[15:19]
        head = RunHead(info.seq, head_mac, n, last)
        rows.check_head(key, run_id, head, signature)
        found = [await fetch_all(cur, query, run_id) for query in _PARTS]
        await cur.execute(sql.CHART, (header.chart_digest,))
        chart = await cur.fetchone()
    records, effects, calls, decisions = rows.read_rows(run_id, head, *found)
    return StoredRun(
        header,
        info,
        records,
        effects,
        calls,
        decisions,
        rows.read_chart(chart[0] if chart else None, header.chart_digest, run_id),
        head_mac,
    )


async def run_row(cur: Cursor, key: bytes, where: str, run_id: str) -> tuple[Any, RunHeader]:
    """The run's row and its header, checked."""
    await cur.execute(sql.RUN_ROW, (run_id,))
    row = await cur.fetchone()
    if row is None:
        raise refusals.run_not_found(run_id, where)
    return row, rows.read_header(key, run_id, row[13], row[14])


async def revision(cur: Cursor, where: str, run_id: str) -> Revision:
    await cur.execute(sql.REVISION, (run_id, run_id))
    row = await cur.fetchone()
    if row is None:
        raise refusals.run_not_found(run_id, where)
    return tuple(row)


async def run_list(cur: Cursor, status: RunStatus | None, include_nested: bool) -> list[RunInfo]:
    """The runs, newest first (with `status` only; with the nested ones when asked)."""
    where, args = rows.run_filter(status, include_nested, "%s")
    found = await fetch_all(cur, sql.RUN_LIST + where + sql.RUN_ORDER, *args)
    return [RunInfo(*row) for row in found]
