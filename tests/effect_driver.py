"""A driver for the effect kill trials: runs (or resumes) one durable run of a chart whose
effect phase runs `lookup`, and may be killed while the effect is in flight.

    python tests/effect_driver.py STORE.db RUN_ID LOG [--fresh] [--idempotent] [--block]
        [--block-model]

`lookup` appends its idempotency key to LOG; with `--block` it then prints "in effect" and
waits forever (the test kills the process there); with `--block-model` the model call after
it prints "in model" and hangs. Without `--fresh` the run is resumed
(force: the test knows the last driver is dead). Prints the run's final phase and error.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from helikon import (
    AGENT_LOOP,
    Agent,
    EffectContext,
    ScriptedModel,
    compile_chart,
    effect,
    extend,
    to,
)
from helikon.core.codec import to_data
from helikon.durable import SqliteRunStore

TABLE = compile_chart(
    extend(AGENT_LOOP, "Lookup")
    .phase("Retrieving", effect="lookup")
    .retarget(
        "CallingModel", "start", "start_turn -> CallingModel", to="Retrieving", on="enter_effect"
    )
    .rows("Retrieving", "effect_result", to("CallingModel", on="keep_effect_result"))
    .build()
)


def model(block: bool) -> ScriptedModel:
    """Answers "answered"; with `block`, prints "in model" and hangs instead (until killed)."""
    if not block:
        return ScriptedModel(["answered"])

    def hang(request: Any) -> str:
        print("in model", flush=True)
        time.sleep(3600)
        return "never"

    return ScriptedModel([hang])


def agent(log: Path, *, idempotent: bool, block: bool, block_model: bool = False) -> Agent:
    async def lookup(context: EffectContext) -> JsonValue:
        with log.open("a") as file:
            file.write(context.idempotency_key + "\n")
        if block:
            print("in effect", flush=True)
            await asyncio.Event().wait()
        return {"passages": ["found"]}

    found = effect(name="lookup", idempotent=idempotent)(lookup)
    return Agent("looker", model(block_model), chart=TABLE, effects=[found])


async def main(args: list[str]) -> None:
    path, run_id, log = args[0], args[1], Path(args[2])
    store = SqliteRunStore(path)
    worker = agent(
        log,
        idempotent="--idempotent" in args,
        block="--block" in args,
        block_model="--block-model" in args,
    )
    if "--fresh" in args:
        stream = worker.run("look it up", store=store, run_id=run_id)
    else:
        stream = worker.resume(run_id, store=store, force=True)
    events = [event async for event in stream]
    store.close()
    last = events[-1]
    error = getattr(last, "error", None)
    print(json.dumps({"last": last.type, "error": None if error is None else to_data(error)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
