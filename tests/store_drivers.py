"""The agent the driver-level store tests run, and a driver to run in a process of its own.

`teller(log)` is an agent whose `transfer` tool needs approval and appends a line to `log`
each time it runs, so a test counts the runs of a side effect across threads and processes.

    python tests/store_drivers.py URL KEY RUN_ID LOG READY_DIR NAME

resumes the suspended run RUN_ID with every pending call approved, as driver NAME: it writes
`READY_DIR/NAME` once it has read the run, waits until every driver has (so all of them read
the same head before any claims it), then prints one line of JSON: how it ended.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from helikon import Agent, ScriptedModel, ToolCall, tool
from helikon.core.errors import RunError
from helikon.durable import RunStore, StoreError, open_store
from helikon.run.snapshot import SnapshotMismatch

TRANSFER = ToolCall("t1", "transfer", '{"to": "ann", "amount": 10}')
HOLD = 0.3
"""Seconds the tool takes: long enough that a second driver tries while the lease is held."""


def teller(log: Path, **options: Any) -> Agent:
    """Asks for one transfer, then says "Sent." (a fresh model: what a new process has)."""

    @tool(needs_approval=True)
    async def transfer(to: str, amount: int) -> str:
        """Move money to someone."""
        with log.open("a") as file:
            file.write(f"transfer {amount} to {to}\n")
        await asyncio.sleep(HOLD)
        return f"sent {amount} to {to}"

    return Agent("teller", ScriptedModel([[TRANSFER], "Sent."]), tools=[transfer], **options)


def filling_payer(paid: Path, fill: Any) -> Agent:
    """An agent whose one tool, `pay` (not idempotent: each run of it pays again), logs the
    payment to `paid`, then calls `fill()` (a full disk: the record that takes its result
    finds no room) and returns a large receipt."""

    @tool
    async def pay(to: str) -> str:
        """Pay someone (not idempotent)."""
        with paid.open("a") as file:
            file.write(f"paid {to}\n")
        fill()
        return "receipt " * 2500

    script = [[ToolCall("p1", "pay", '{"to": "ann"}')], "Paid."]
    return Agent("payer", ScriptedModel(script), tools=[pay])


def remembering() -> tuple[Agent, ScriptedModel]:
    """An agent that answers "Noted." once (a fresh model per run), and its model, whose
    requests show what the run gave it."""
    model = ScriptedModel(["Noted."])
    return Agent("memo", model), model


async def resume_approved(store: RunStore, run_id: str, log: Path, ready: Any = None) -> str:
    """Resume `run_id` approving what it waits on; "completed", or the refusal's name.

    `ready` is called once the run was read (before its lease is claimed) and returns when
    the test lets the drivers go on."""
    decisions = [request.approve() for request in store.pending(run_id)]
    try:
        streaming = teller(log).resume(run_id, decisions, store=store)
    except (StoreError, SnapshotMismatch) as exc:
        return type(exc).__name__
    if ready is not None:
        await asyncio.to_thread(ready)
    try:
        await streaming.collect()
    except StoreError as exc:
        return type(exc).__name__
    except RunError as exc:  # refused at a write: the run fails with StoreFailed(reason)
        return str(getattr(exc.error, "reason", exc.error.kind))
    return "completed"


def main(argv: list[str]) -> int:
    url, key, run_id, log, ready_dir, name = argv
    folder = Path(ready_dir)

    def ready() -> None:
        (folder / name).touch()
        deadline = time.monotonic() + 30
        while len(list(folder.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)

    store = open_store(url, key=key)
    try:
        outcome = asyncio.run(resume_approved(store, run_id, Path(log), ready))
    finally:
        store.close()
    print(json.dumps({"driver": name, "outcome": outcome}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
