"""A driver for the kill -9 trials: runs (or resumes) one durable run, and is killed.

    python tests/kill9_driver.py STORE.db RUN_ID EFFECTS_DIR [--fresh]

The agent calls three tools in parallel for `ROUNDS` turns, then answers "done":
`note` has side effects and is neither read-only nor idempotent (it appends its
idempotency key to `note.log`), `stamp` is idempotent (it records its key once in
`stamp.log`, deduplicating by it), `peek` is read-only. Each sleeps a little, so a kill lands
in a batch often. With `--fresh` the run starts; without, it resumes (force: the test knows
the last driver is dead). Exits 0 when the run completed.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from helikon import Agent, RunConfig, ScriptedModel, ToolCall, ToolContext, tool
from helikon.durable import RunNotFound, SqliteRunStore

ROUNDS = 8


def turns() -> list[Any]:
    """The model's answers: ROUNDS turns of three calls (call ids reused across turns, as
    scripted charts do), then the final text."""
    scripted: list[Any] = []
    for n in range(ROUNDS):
        scripted.append(
            [
                ToolCall("a", "note", json.dumps({"text": f"round {n}"})),
                ToolCall("b", "stamp", json.dumps({"text": f"round {n}"})),
                ToolCall("c", "peek", json.dumps({"text": f"round {n}"})),
            ]
        )
    scripted.append("done")
    return scripted


def agent(effects: Path) -> Agent:
    def pause() -> None:
        time.sleep(random.uniform(0.01, 0.06))

    @tool
    def note(text: str, context: ToolContext[Any]) -> str:
        """Write a note (a side effect that must not happen twice)."""
        pause()
        with (effects / "note.log").open("a") as log:
            log.write(context.idempotency_key + "\n")
        pause()
        return f"noted {text}"

    @tool(idempotent=True)
    def stamp(text: str, context: ToolContext[Any]) -> str:
        """Stamp a text once per call (deduplicated by the idempotency key)."""
        pause()
        log = effects / "stamp.log"
        seen = set(log.read_text().split()) if log.exists() else set()
        if context.idempotency_key not in seen:
            with log.open("a") as file:
                file.write(context.idempotency_key + "\n")
        pause()
        return f"stamped {text}"

    @tool(read_only=True)
    def peek(text: str) -> str:
        """Look at a text."""
        pause()
        return f"peeked {text}"

    config = RunConfig(max_turns=ROUNDS + 2, lease_seconds=2.0)
    return Agent("trial", ScriptedModel(turns()), tools=[note, stamp, peek], config=config)


async def main(path: str, run_id: str, effects: str, fresh: bool) -> int:
    store = SqliteRunStore(path)
    print("ready", flush=True)  # imports done: the trial's clock starts here
    worker = agent(Path(effects))
    stored = None if fresh else _stored(store, run_id)
    if stored is None:  # a fresh trial, or killed before the run's first record
        stream = worker.run("go", store=store, run_id=run_id)
    elif stored.records[-1].state_after.phase == "Done":
        return 0  # killed after the run completed, before this process exited
    else:
        stream = worker.resume(run_id, store=store, force=True)
    result = await stream.collect()
    return 0 if result.final_output == "done" else 1


def _stored(store: SqliteRunStore, run_id: str) -> Any:
    try:
        return store.get(run_id)
    except RunNotFound:
        return None


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(asyncio.run(main(args[0], args[1], args[2], "--fresh" in args)))
