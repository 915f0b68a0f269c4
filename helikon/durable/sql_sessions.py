"""A SQL store's sessions and retention, once for every dialect: a session's items chained
and read, added, cleared and pruned; a run deleted with the runs nested in it; old runs and
session items pruned. A dialect that locks a session for its writes names the statement
(`SESSION_LOCK_TAKE`: PostgreSQL's advisory lock; SQLite's write locks the file). What the
rows mean is `helikon.durable.rows`'.
"""

from __future__ import annotations

from collections.abc import Sequence

from helikon.core.items import Item
from helikon.durable import refusals, rows
from helikon.durable.sql_dialect import Db, Scope


async def items(scope: Scope, session_id: str) -> tuple[Item, ...]:
    """The session's items, every link checked."""
    async with scope.begin(read_only=True) as db:
        kept = await _head(scope, db, session_id)
        found = await db.all(scope.sql.SESSION_ITEMS, (session_id,))
    return rows.read_session(scope.key, session_id, kept, [tuple(row) for row in found])


async def add(scope: Scope, session_id: str, added: Sequence[Item], run_id: str) -> None:
    """Chain `added` after the session's last item, and sign its new head."""
    async with scope.begin() as db:
        await _lock(scope, db, session_id)
        chained, new = rows.session_rows(session_id, await _head(scope, db, session_id), added)
        args = [
            {"session_id": session_id, "n": n, "item": item, "mac": mac, "run_id": run_id}
            for n, item, mac in chained
        ]
        await db.many(scope.sql.SESSION_ADD, args)
        await _set_head(scope, db, session_id, new)


async def clear(scope: Scope, session_id: str) -> None:
    async with scope.begin() as db:
        await _lock(scope, db, session_id)
        for statement in scope.sql.SESSION_CLEAR:
            await db.run(statement, (session_id,))


async def delete(scope: Scope, run_id: str) -> int:
    """Delete a run with the runs nested in it; how many runs went."""
    async with scope.begin() as db:
        gone = await _delete_trees(scope, db, scope.sql.TREE, (run_id,))
        if not gone:
            raise refusals.run_not_found(run_id, scope.where)
    return gone


async def prune(scope: Scope, older_than: float) -> int:
    """Delete runs (with their nested runs) and session items not updated for `older_than`
    seconds, except runs a live driver holds; how many runs went."""
    async with scope.begin() as db:
        gone = await _delete_trees(scope, db, scope.sql.OLD_TREES, (older_than,))
        for session_id, upto in await db.all(scope.sql.OLD_SESSIONS, (older_than,)):
            await _prune_session(scope, db, session_id, upto)
    return gone


async def _delete_trees(scope: Scope, db: Db, tree: str, args: tuple[object, ...]) -> int:
    """Delete the runs `tree` lists (a recursive query: a forged parent cycle still ends)."""
    gone = [row[0] for row in await db.all(tree, args)]
    for run_id in gone:
        for statement in scope.sql.DELETE_RUN:
            await db.run(statement, (run_id,))
    return len(gone)


async def _prune_session(scope: Scope, db: Db, session_id: str, upto: int) -> None:
    """Delete a session's items up to `upto`; its chain then starts after them."""
    await _lock(scope, db, session_id)
    kept = await _head(scope, db, session_id)
    base = await db.one(scope.sql.SESSION_ITEM, (session_id, upto))
    await db.run(scope.sql.SESSION_PRUNE, (session_id, upto))
    new = rows.pruned_session(scope.key, session_id, kept, upto, base[0] if base else "")
    if new is None:
        await db.run(scope.sql.SESSION_CLEAR[1], (session_id,))
    elif kept is not None and new != kept[0]:
        await _set_head(scope, db, session_id, new)


async def _lock(scope: Scope, db: Db, session_id: str) -> None:
    if scope.sql.SESSION_LOCK_TAKE is not None:
        await db.run(scope.sql.SESSION_LOCK_TAKE, (scope.sql.SESSION_LOCK, session_id))


async def _head(scope: Scope, db: Db, session_id: str) -> tuple[rows.SessionHead, str] | None:
    return rows.session_head(await db.one(scope.sql.SESSION_HEAD, (session_id,)))


async def _set_head(scope: Scope, db: Db, session_id: str, new: rows.SessionHead) -> None:
    signature = rows.session_sig(scope.key, session_id, new)
    fields = (session_id, new.first, new.base, new.n, new.digest, signature)
    await db.run(scope.sql.SESSION_SET_HEAD, fields)
