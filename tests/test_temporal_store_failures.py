"""A Temporal run whose store fills up, on a real Temporal dev server and every store
backend: the write activity fails with the store's own error (a `StoreError` naming the
database's reason, not "cannot rollback"), Temporal retries it, and once there is room the
run goes on where it was, its tool run once.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from store_drivers import filling_payer
from store_support import Backend

pytest.importorskip("temporalio")

from temporalio.client import Client

from helikon import Agent
from helikon.temporal import helikon_worker, outcome, start_run

WAIT = 60.0


async def first_failure(handle: Any) -> Any:
    """The last failure of the workflow's pending activity, once one failed."""
    for _ in range(int(WAIT / 0.05)):
        described = await handle.describe()
        for activity in described.raw_description.pending_activities:
            if activity.HasField("last_failure"):
                return activity.last_failure
        await asyncio.sleep(0.05)
    raise AssertionError("no activity of the workflow failed")


async def test_a_full_disk_fails_the_write_activity_as_a_store_error_until_there_is_room(
    temporal_address: str, backend: Backend, tmp_path: Path
) -> None:
    client = await Client.connect(temporal_address)
    store = backend.open()
    paid = tmp_path / "paid.log"

    def payer() -> Agent:
        return filling_payer(paid, lambda: backend.fill_disk(store))

    run_id, queue = f"r-{uuid.uuid4().hex[:12]}", f"q-{uuid.uuid4().hex[:8]}"
    async with helikon_worker(client, queue, [payer()], store):
        handle = await start_run(client, payer(), "pay ann", task_queue=queue, run_id=run_id)
        failure = await first_failure(handle)
        backend.free_disk(store)
        ended = await asyncio.wait_for(outcome(handle), WAIT)

    assert failure.application_failure_info.type == "StoreError"
    assert f"({backend.disk_full})" in failure.message and "\n" not in failure.message
    assert "rollback" not in failure.message
    assert ended.output is not None and ended.output.text == "Paid."
    assert paid.read_text() == "paid ann\n"
    assert store.get(run_id).info.status == "completed"
