"""`PostgresRunStore`'s schema brought up to date on a connection of its own, in one
transaction (`sql_migrate`, under its advisory lock), psycopg's errors as the store's."""

from __future__ import annotations

from typing import Any

import psycopg

from helikon.durable import postgres_sql
from helikon.durable.postgres_engine import PgDb, named_row, reason
from helikon.durable.records import StoreError
from helikon.durable.sql_migrate import migrate as migrate_schema


async def migrate(connection: psycopg.AsyncConnection[Any], key: bytes | None, where: str) -> bytes:
    """Migrate in one transaction; the store's key (`key`, or with None the one kept in
    `meta`)."""
    try:
        async with connection.transaction(), connection.cursor(row_factory=named_row) as cur:
            return await migrate_schema(PgDb(cur), postgres_sql, where, key)
    except psycopg.Error as exc:
        raise StoreError(f"cannot migrate the run store {where}: {reason(exc)}") from exc
