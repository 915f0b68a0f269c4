"""The parity tests' machinery (tests/test_runtime_parity*.py): a scenario runs in process
(`agent.run` / `agent.resume` with a run store) and on Temporal (a real dev server and a
helikon worker), each runtime writing to a store of its own; `assert_same` compares what the
two stores hold, `assert_streams` the event streams.

Both runs of a scenario take the same run id (the stores are separate), so nested runs'
ids (`{run_id}/{seq}`, `{run_id}/{seq}:{call_id}`) and approval requests (bound to the run
id) match without rewriting. What is compared, for every run each store holds: the header,
the chart it was stored with, the run's line (`RunInfo`: phase, seq, status, turns,
parent), every step record (input, row, guards checked, state after with its usage, next
action, events, appends), the effect events, and the events in the order a reader streams
them. The normalisations, each
named where it is applied (`view`), are:

- `CLOCK`: `created_at` and `updated_at` are when each store wrote, and a record's `time`
  and an event's `at` when each runtime applied or emitted it (a local run's clock, the
  workflow's `workflow.now()`, which times no effect); two runs never share a clock.
- `LEASE`: who holds a run that has not ended (`lease_owner`, `lease_expires_at`): a local
  driver leases it under a name of its own for `RunConfig.lease_seconds` at a time and
  releases it when the run suspends; a workflow leases it under `temporal:{run_id}` until
  the run ends, a suspension included, or until its workflow ends (a nested run that ends
  at its suspension, helikon.temporal.writes). A run that ended holds no lease on either:
  that is compared.
- `JOURNAL`: `calls` and `decisions`, the local driver's crash journal (a tool call started
  and finished; an approval decision spent): on Temporal the workflow's history keeps both
  (an activity's result, an update), and the decisions reach the store as the records'
  inputs, which are compared.
- `STREAM`: the events a local run streams are compared with those a reader of the
  Temporal run streams from its store (`helikon.temporal.events`), but the deltas
  (`DELTAS`: text and argument fragments as the model streams them), which a local run
  streams and no store keeps; the Temporal runtime never streams them.
- `CHAIN`: `head_mac`, the signature of the run's chain of rows, signs the rows as each
  store wrote them (their times among them).

No run with `RunConfig.redact` is compared: the Temporal runtime refuses such an agent
(helikon.temporal.registry, `RedactionUnsupported`), so a redacting run is checked against
its own store (test_runtime_parity).

A real divergence between the runtimes is a finding: its scenario is marked `diverges(...)`
(`xfail(strict=True)`), whose reason says how the runtimes differ.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pytest
from store_support import PostgresBackend
from temporalio.client import Client

from helikon import Agent
from helikon.core.events import AgentEvent
from helikon.core.items import Item
from helikon.durable import RunStore, SqliteRunStore
from helikon.durable.records import StoredRun
from helikon.durable.views import events_of
from helikon.run.results import RunResultStreaming
from helikon.temporal import TemporalOptions, events, helikon_worker, outcome, start_run

WAIT = 60.0
DELTAS = {"token_delta", "tool_call_delta", "reasoning_delta"}
KEY = b"parity-tests-key-0123456789abcdef"

Stores = tuple[RunStore, RunStore]
"""(the local run's store, the Temporal run's store)."""


def new_run_id() -> str:
    """A run id of a test's own: the dev server outlives every test. Both runtimes take it."""
    return f"p-{uuid.uuid4().hex[:12]}"


def new_queue() -> str:
    """A task queue of a worker's own (a worker serves the agents of one scenario)."""
    return f"q-{uuid.uuid4().hex[:8]}"


@contextmanager
def postgres_stores_at(url: str) -> Iterator[Stores]:
    """(the local run's store, the Temporal run's store): each on a schema of its own of
    the PostgreSQL database at `url`."""
    local, temporal = PostgresBackend(url), PostgresBackend(url)
    try:
        yield local.open(KEY), temporal.open(KEY)
    finally:
        local.close()
        temporal.close()


@contextmanager
def sqlite_stores(folder: Path) -> Iterator[tuple[SqliteRunStore, SqliteRunStore]]:
    """(the local run's store, the Temporal run's store): SQLite files in `folder`."""
    with (
        SqliteRunStore(folder / "local.db", key=KEY) as local,
        SqliteRunStore(folder / "temporal.db", key=KEY) as temporal,
    ):
        yield local, temporal


# ---------------------------------------------------------------- fixtures
# Each parity module binds them by name (`client, run_id, stores = parity_support.client, ...`):
# a fixture imported by name is redefined by every test that takes it, to ruff (F811).


@pytest.fixture
async def client(temporal_address: str) -> Client:
    """A client of the Temporal dev server (`temporal_address`, tests/temporal_support.py)."""
    return await Client.connect(temporal_address)


@pytest.fixture
def run_id() -> str:
    """The run id both runtimes take in one test."""
    return new_run_id()


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SqliteRunStore, SqliteRunStore]]:
    """(the local run's store, the Temporal run's store), on SQLite in the test's folder."""
    with sqlite_stores(tmp_path) as opened:
        yield opened


# ---------------------------------------------------------------- what is compared


@dataclass(frozen=True)
class RunView:
    """One stored run, normalised (see the module docstring)."""

    header: Any
    chart: str | None
    line: tuple[Any, ...]
    records: tuple[Any, ...]
    effects: tuple[Any, ...]
    events: tuple[Any, ...]


def view(stored: StoredRun) -> RunView:
    info = stored.info
    # CLOCK: created_at, updated_at and the times of records and events are left out.
    # LEASE: the lease of a run that has not ended is left out.
    finished = info.status in ("completed", "failed")
    line = (
        info.run_id,
        info.agent,
        info.phase,
        info.seq,
        info.status,
        info.turns,
        info.parent_run_id,
        info.forked_from,
        info.forked_at,
        (info.lease_owner, info.lease_expires_at) if finished else "leased by its runtime",
    )
    # JOURNAL: stored.calls and stored.decisions are left out; CHAIN: stored.head_mac too.
    return RunView(
        stored.header,
        stored.chart_data,
        line,
        tuple(replace(record, time=None) for record in stored.records),
        tuple(replace(effect, at=None) for effect in stored.effects),
        tuple(events_of(stored)),
    )


def held(store: RunStore) -> dict[str, RunView]:
    """Every run in `store`, by id, normalised."""
    return {info.run_id: view(store.get(info.run_id)) for info in store.runs(include_nested=True)}


def assert_same(local: RunStore, temporal: RunStore) -> None:
    """What the two stores hold is the same, run by run and part by part; a failure lists
    each part that differs, the local value first."""
    mine, theirs = held(local), held(temporal)
    assert mine, "the local store holds no run"
    assert sorted(mine) == sorted(theirs), "the stores hold other runs"
    found = [line for run_id in sorted(mine) for line in differences(mine[run_id], theirs[run_id])]
    assert not found, "the runtimes differ:\n" + "\n".join(found)


def assert_streams(mine: Sequence[AgentEvent], theirs: Sequence[AgentEvent]) -> None:
    """The events the local run streamed are those a reader of the Temporal run streams
    (`helikon.temporal.events`: a handoff target's events inline, as a local run streams
    them); a failure lists each that differs, the local one first."""
    found = [
        f"event {n}: {left!r}\n    != {right!r}"
        for n, (left, right) in enumerate(zip_longest(mine, theirs))
        if left != right
    ]
    assert mine, "the local run streamed nothing"
    assert not found, "the streams differ:\n" + "\n".join(found)


def differences(a: RunView, b: RunView) -> list[str]:
    """Each part of run `a` that differs from `b`'s, with both values."""
    run_id = a.line[0]
    found = [
        f"{run_id} {part}: {left!r}\n    != {right!r}"
        for part, left, right in (
            ("header", a.header, b.header),
            ("chart", a.chart, b.chart),
            ("run line", a.line, b.line),
            ("effect events", a.effects, b.effects),
        )
        if left != right
    ]
    for n, (left, right) in enumerate(zip_longest(a.events, b.events)):
        if left != right:
            found.append(f"{run_id} event {n}: {left!r}\n    != {right!r}")
    for left, right in zip_longest(a.records, b.records):
        if left is None or right is None:
            found.append(f"{run_id} record missing: {left!r}\n    != {right!r}")
            continue
        for name in left.__dataclass_fields__:
            mine, theirs = getattr(left, name), getattr(right, name)
            if mine != theirs:
                found.append(f"{run_id} record {left.seq} {name}: {mine!r}\n    != {theirs!r}")
    return found


def ended(store: RunStore, run_id: str) -> str:
    """How a stored run ended: "Done", or its error's kind (the scenario is the one meant)."""
    state: Any = store.get(run_id).records[-1].state_after
    return "Done" if state.phase == "Done" else state.error.kind


# ---------------------------------------------------------------- the two runtimes


Make = Callable[[], Agent]
"""Builds a scenario's agent afresh (a scripted model counts the calls it answered)."""

Input = str | Sequence[Item]
"""A run's input: the user's message, or items."""


async def drained(result: RunResultStreaming) -> list[AgentEvent]:
    """The events a local run streams, but its deltas (STREAM)."""
    return [event async for event in result if event.type not in DELTAS]


async def run_locally(make: Make, text: Input, store: RunStore, run_id: str) -> list[AgentEvent]:
    return await drained(make().run(text, store=store, run_id=run_id))


async def run_on_temporal(
    client: Client,
    make: Make,
    text: Input,
    store: RunStore,
    run_id: str,
    options: TemporalOptions | None = None,
) -> list[AgentEvent]:
    """Run to the end on a worker of its own; the events a reader of the run streams."""
    queue = new_queue()
    async with helikon_worker(client, queue, [make()], store, options=options):
        handle = await start_run(client, make(), text, task_queue=queue, run_id=run_id)
        await asyncio.wait_for(outcome(handle), WAIT)
    return [event async for event in events(store, run_id)]


async def both(
    client: Client,
    stores: Stores,
    run_id: str,
    make: Make,
    text: Input,
) -> None:
    """Run `make`'s agent on `text` in process, then on Temporal; the streams compared:
    the local run's own, and what a reader of each store streams."""
    local, temporal = stores
    mine = await run_locally(make, text, local, run_id)
    theirs = await run_on_temporal(client, make, text, temporal, run_id)
    assert_streams(mine, theirs)
    assert_streams([e async for e in events(local, run_id)], theirs)


async def wait_for_file(folder: Path, prefix: str) -> None:
    for _ in range(int(WAIT / 0.05)):
        if any(folder.glob(prefix + "*")):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {prefix}* in {folder}")


def diverges(reason: str) -> pytest.MarkDecorator:
    """A finding: the runtimes store different runs for this scenario (`reason` says how)."""
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)
