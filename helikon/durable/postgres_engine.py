"""What `PostgresRunStore` runs on: its own event loop in a daemon thread, its pool, and
psycopg's errors and URLs as its messages name them."""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import AsyncConnectionPool

from helikon.durable.records import StoreError

Cursor = psycopg.AsyncCursor[Any]
Pool = AsyncConnectionPool[psycopg.AsyncConnection[Any]]


CONNECT_TIMEOUT = 10.0
"""Seconds opening the store waits for the database before it gives up."""


async def connect(url: str, where: str) -> psycopg.AsyncConnection[Any]:
    """One connection of its own (the migration's): a wrong URL fails here, with libpq's
    reason."""
    try:
        return await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT)
        )
    except psycopg.Error as exc:
        raise StoreError(f"cannot open the run store {where}: {reason(exc)}") from exc


async def open_pool(url: str, where: str, min_size: int, max_size: int) -> Pool:
    """The store's pool, open, with `min_size` connections made."""
    pool: Pool = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        kwargs={"autocommit": True},
        open=False,
        name="helikon-runs",
    )
    try:
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT)
    except psycopg.Error as exc:
        await pool.close()
        raise StoreError(f"cannot open the run store {where}: {reason(exc)}") from exc
    return pool


async def fetch_all(cur: Cursor, query: str, *args: Any) -> list[Any]:
    await cur.execute(query, args)
    return await cur.fetchall()


def serve(loop: asyncio.AbstractEventLoop) -> None:
    """The store's thread: its loop, until the store shuts it down."""
    try:
        loop.run_forever()
    finally:
        loop.close()


def shut_down(loop: asyncio.AbstractEventLoop, thread: threading.Thread, pools: list[Pool]) -> None:
    """Close the pools on the store's loop, then stop the loop and its thread."""

    async def close_pools() -> None:
        for pool in pools:
            await pool.close()

    if threading.current_thread() is thread:  # collected on its own loop: cannot wait there
        loop.create_task(close_pools()).add_done_callback(lambda _: loop.stop())
        return
    try:
        asyncio.run_coroutine_threadsafe(close_pools(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()


def reason(exc: psycopg.Error) -> str:
    """psycopg's error in one line: the server's message and its kind (`DiskFull`), without
    the lines of detail and context that follow it."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{first} ({type(exc).__name__})"


def without_password(url: str) -> str:
    """`url` as messages name it: the password left out."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=user + host))
