"""Recorded workflow histories for the replay test (tests/test_temporal_replay.py).

`python tests/temporal_histories.py [CASE ...]` runs each case (every one by default) on a
fresh dev server and writes its history to tests/histories/<case>.json. Record them again
only when a change is meant to break replay (a changed chart: a new task queue; a driver
change: `workflow.patched`), and say so in the commit.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
import sys
import tempfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from temporal_agents import (
    bulky_agent,
    guarded_agent,
    manager_agent,
    payments_agent,
    station_agent,
    triage_agent,
    weather_agent,
)

from helikon import Agent

HISTORIES = Path(__file__).resolve().parent / "histories"

CASES: dict[str, tuple[Callable[[], Agent], str]] = {
    "tools": (weather_agent, "weather?"),
    "approval": (payments_agent, "pay"),
    "cancel": (payments_agent, "pay"),  # cancelled while it waits for approval
    "handoff": (triage_agent, "my bill?"),
    "agent_tool": (manager_agent, "where is Paris?"),
    "mcp": (station_agent, "2+3?"),  # its worker runs tests/mcp_server.py; a replay, none
    "claim": (lambda: bulky_agent(size=300 * 1024), "go"),  # its payloads by reference
    # The default chart 7e19d021…: the answer checked in CheckingOutput (GUARDRAIL_ROWS).
    "output_guardrail": (lambda: guarded_agent("a secret"), "hello"),
    # The default chart ce4ffbf8…: the input checked in CheckingInput (INPUT_GUARDRAIL_ROWS),
    # then the answer in CheckingOutput; both pass.
    "input_guardrail": (lambda: guarded_agent("hello"), "hi"),
}
"""Each case: the agent, and what the user says. Its run id and task queue are its name."""


def task_queue(case: str) -> str:
    return f"replay-{case}"


async def record(address: str, cases: Sequence[str]) -> None:
    from temporalio.client import Client

    from helikon.durable import SqliteRunStore
    from helikon.temporal import decide, events, helikon_worker, outcome, start_run

    client = await Client.connect(address)
    with tempfile.TemporaryDirectory() as folder:
        for case in cases:
            make, text = CASES[case]
            with SqliteRunStore(Path(folder) / f"{case}.db", key=b"r" * 32) as store:
                q = task_queue(case)
                async with helikon_worker(client, q, [make()], store):
                    handle = await start_run(client, make(), text, task_queue=q, run_id=case)
                    if case in ("approval", "cancel"):
                        _ = [e async for e in events(store, case)]
                        (request,) = store.pending(case)
                    if case == "approval":
                        await decide(handle, [request.approve()])
                    if case == "cancel":
                        await handle.cancel()
                    await asyncio.wait_for(outcome(handle), 60)
                    history = await handle.fetch_history()
            HISTORIES.mkdir(exist_ok=True)
            (HISTORIES / f"{case}.json").write_text(history.to_json() + "\n")
            keep_payloads(case, Path(folder) / f"{case}.db")
            print(f"recorded {case}: {len(history.events)} events")


def keep_payloads(case: str, db: Path) -> None:
    """The payloads the run kept by reference (its history holds their keys), beside its
    history as tests/histories/<case>.payloads.json: run id, sha256 and zlib'd bytes."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT run_id, digest, data FROM payloads").fetchall()
    if rows:
        kept = [
            [run, digest, base64.b64encode(zlib.compress(data, 9)).decode()]
            for run, digest, data in rows
        ]
        (HISTORIES / f"{case}.payloads.json").write_text(json.dumps(kept, indent=1) + "\n")


def payloads(case: str) -> list[tuple[str, bytes]]:
    """The payloads `keep_payloads` kept for `case` (none for most): (run id, bytes)."""
    path = HISTORIES / f"{case}.payloads.json"
    if not path.exists():
        return []
    kept = json.loads(path.read_text())
    return [(run, zlib.decompress(base64.b64decode(data))) for run, _, data in kept]


def main() -> None:
    from temporal_support import DevServer, temporal_cli

    cases = sys.argv[1:] or list(CASES)
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        sys.exit(f"no such case: {', '.join(unknown)} (the cases: {', '.join(CASES)})")
    cli = temporal_cli()
    if cli is None:
        sys.exit("the temporal CLI is not installed")
    server = DevServer(cli)
    try:
        server.wait_ready()
        asyncio.run(record(server.address, cases))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
