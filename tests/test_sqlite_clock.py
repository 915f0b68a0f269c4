"""A SQLite store times leases and rows by its database's clock, as PostgreSQL's does by
its server's: the statements read `helikon_now()` (registered on the store's connection),
never a time the caller computed."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_store_conformance import CHART, TTL, header, started

from helikon.durable import RunLeased, SqliteRunStore


async def test_leases_expire_by_the_database_clock(tmp_path: Path) -> None:
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        store._db.create_function("helikon_now", 0, lambda: 1000.0)
        lease, _ = await store.create(header(), CHART, "a", TTL, started())
        assert lease.expires_at == 1000.0 + TTL
        info = store.get("r1").info
        times = (info.created_at, info.updated_at, info.lease_expires_at)
        assert times == (1000.0, 1000.0, 1000.0 + TTL)
        with pytest.raises(RunLeased):
            await store.claim("r1", "b", TTL)
        store._db.create_function("helikon_now", 0, lambda: 1000.0 + TTL + 1)
        taken = await store.claim("r1", "b", TTL)
        assert (taken.owner, taken.epoch, taken.expires_at) == ("b", 2, 1000.0 + 2 * TTL + 1)
        renewed = await store.renew("r1", taken, 5.0)
        assert renewed.expires_at == 1000.0 + TTL + 1 + 5.0
