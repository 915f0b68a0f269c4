"""`SqliteRunStore`'s write transactions: a block that raises leaves nothing written, a
database another process holds is a `StoreError` saying so, and either way the store's lock
is let go (another thread writes next)."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from test_store_conformance import CHART, TTL, header, started

from helikon.durable import RunExists, SqliteRunStore, StoreError

KEY = b"k" * 32


def written_from_another_thread(store: SqliteRunStore, digest: str) -> bool:
    """Whether another thread can write (the store's lock is free), and did."""
    done = threading.Event()

    def write() -> None:
        store.put_chart(digest, "{}")
        done.set()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    thread.join(30)  # a hang guard only: a held lock would never let it finish
    return done.is_set() and store.chart(digest) == "{}"


async def test_a_refused_write_rolls_back_and_lets_the_store_go(tmp_path: Path) -> None:
    with SqliteRunStore(tmp_path / "runs.db", key=KEY) as store:
        await store.create(header(), CHART, "a", TTL, started())
        again = replace(header(), chart_digest="another-chart")  # put in the same transaction
        with pytest.raises(RunExists):
            await store.create(again, '{"chart": 2}', "b", TTL, started())
        assert store.chart("another-chart") is None
        assert store.get("r1").info.lease_owner == "a"
        assert written_from_another_thread(store, "after")


def test_a_database_held_elsewhere_is_busy_and_lets_the_store_go(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SqliteRunStore(path, key=KEY, busy_timeout=0.01) as store:
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreError, match=r"runs\.db is busy"):
                store.put_chart("during", "{}")
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert store.chart("during") is None
        assert written_from_another_thread(store, "after")


def test_stores_opened_at_once_on_new_files_are_never_refused(tmp_path: Path) -> None:
    """Connections switching a new file to WAL at once can deadlock, and SQLite answers
    "database is locked" at once for that, without waiting: before the switch was tried
    again, about one file in ten failed here (four stores, each on its own thread)."""
    for trial in range(60):
        path = tmp_path / f"runs{trial}.db"
        errors: list[BaseException] = []

        def open_one(path: Path = path, errors: list[BaseException] = errors) -> None:
            try:
                SqliteRunStore(path, key=KEY).close()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=open_one) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == [], f"trial {trial}"
