"""Writing a Temporal run's records to the run store: first write wins by (run_id, seq).

On Temporal the workflow owns the run; an activity may run twice (a retry, a worker that
died after writing), so every write is idempotent: records at or below the stored head are
checked equal to what is stored and skipped, and events already stored after a step are not
stored again. The store's lease is held by the workflow's name (`owner_of`) with a lease that
does not run out, so a local driver never resumes a run a workflow owns; it is released when
the run ends. Writes of one run never race: the workflow sends its records with one
activity at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from helikon.core.state import TERMINAL_PHASES
from helikon.durable.records import (
    EffectRecord,
    RunNotFound,
    RunStatus,
    StepRecord,
    StoredRun,
    StoreError,
)
from helikon.durable.store import RunStore
from helikon.run.journal import status_of
from helikon.temporal.messages import Writes

LEASE_TTL = 1e8
"""Seconds: a workflow's lease on its run outlives any run (it is released at the end)."""


class RunDiverged(StoreError):
    """The store holds another record at a seq this workflow writes: not this workflow's run
    (a local run of the same id), or a workflow whose code changed without versioning."""


def owner_of(run_id: str) -> str:
    return f"temporal:{run_id}"


async def write(store: RunStore, writes: Writes) -> StoredRun | None:
    """Write `writes` (see the module docstring); the stored run after them, or None when
    there was nothing to write.

    Raises:
        RunDiverged: a record at a seq already stored differs from the one written.
        StoreError: the store failed (the activity retries).
    """
    if not writes.records and not writes.effects:
        return None
    run_id = writes.run_id
    try:
        stored: StoredRun | None = await store.load(run_id)
    except RunNotFound:
        stored = None
    records = list(writes.records)
    effects = list(writes.effects)
    if stored is None:
        if writes.header is None or writes.chart_data is None or not records:
            raise StoreError(
                f"run {run_id!r} is not in the store {store.url} and these writes cannot "
                "create it (no header or first record): was the store emptied under a "
                "running workflow?"
            )
        first = records.pop(0)
        before = [e for e in effects if e.after_seq < first.seq]
        effects = [e for e in effects if e.after_seq >= first.seq]
        await store.create(
            writes.header, writes.chart_data, owner_of(run_id), LEASE_TTL, first, before
        )
        stored = await store.load(run_id)
    records, effects = _new_only(stored, records, effects)
    if not records and not effects:
        return stored
    lease = await store.claim(run_id, owner_of(run_id), LEASE_TTL, force=True)
    head_mac = stored.head_mac
    status: RunStatus = stored.info.status
    for record in records:
        before = [e for e in effects if e.after_seq < record.seq]
        effects = [e for e in effects if e.after_seq >= record.seq]
        status = status_of(record.state_after.phase, writes.suspended)
        head_mac = await store.append(run_id, lease, record, head_mac, before, status)
    if effects:
        await store.add_effects(run_id, lease, effects)
    if records and records[-1].state_after.phase in TERMINAL_PHASES:
        await store.release(run_id, lease, status)
    return await store.load(run_id)


def _new_only(
    stored: StoredRun, records: Sequence[StepRecord], effects: Sequence[EffectRecord]
) -> tuple[list[StepRecord], list[EffectRecord]]:
    """The records above the stored head, after checking the others equal what is stored,
    and the effects not stored yet (by how many the store holds after each step)."""
    by_seq = {record.seq: record for record in stored.records}
    head = stored.records[-1].seq if stored.records else 0
    fresh: list[StepRecord] = []
    for record in records:
        seq = record.seq
        if seq <= head:
            if by_seq.get(seq) != record:
                raise RunDiverged(
                    f"run {stored.header.run_id!r} holds another record at step {seq} than "
                    "the workflow writes: it is not this workflow's run, or the workflow's "
                    "code changed without versioning"
                )
            continue
        fresh.append(record)
    have = Counter(effect.after_seq for effect in stored.effects)
    kept: list[EffectRecord] = []
    for effect in effects:
        if have[effect.after_seq] > 0:
            have[effect.after_seq] -= 1
            continue
        kept.append(effect)
    return fresh, kept
