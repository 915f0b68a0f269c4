"""What a SQL store's operations are written over: `Db`, a transaction's four calls, and
`Scope`, what every operation needs (the dialect's statements, the key, the store's name).

A dialect is a module of SQL text (`sqlite_sql`, `postgres_sql`) holding the same names
with the same parameters: a statement with more than two passes them by name (`:name` in
SQLite, `%(name)s` in PostgreSQL), and a row is read by its columns' names. The clock is the
database's: every time a statement stores is `NOW` of its dialect, taken in SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

Args = Sequence[Any] | Mapping[str, Any]


class Db(Protocol):
    """One transaction's statements (rows read by column name or index)."""

    async def run(self, query: str, args: Args = ()) -> int:
        """Execute `query`; how many rows it changed."""
        ...

    async def one(self, query: str, args: Args = ()) -> Any: ...
    async def all(self, query: str, args: Args = ()) -> list[Any]: ...
    async def many(self, query: str, args: Iterable[Args]) -> None: ...


Begin = Callable[..., AbstractAsyncContextManager[Db]]
"""`begin(read_only=False)`: one transaction, committed, or rolled back when its block
raises; the backend's errors come out as `StoreError`."""


@dataclass(frozen=True, slots=True)
class Scope:
    """What every operation of a SQL store needs."""

    sql: Any
    """The dialect: the module of its statements."""
    key: bytes
    where: str
    """The store as messages name it (a path, a URL without its password)."""
    begin: Begin
