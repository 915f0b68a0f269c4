"""The store's refusals, worded once for every backend: which run, which lease or call,
and why the write or read was refused."""

from __future__ import annotations

import time
from typing import Any

from helikon.core.quoting import cut, quoted
from helikon.durable.records import (
    DecisionSpent,
    Lease,
    LeaseLost,
    RunExists,
    RunLeased,
    RunNotFound,
    StoreCorrupt,
    StoreError,
)


def run_not_found(run_id: str, where: str) -> RunNotFound:
    return RunNotFound(f"no run {quoted(run_id)} in the store {where}")


def run_exists(run_id: str) -> RunExists:
    return RunExists(f"a run {quoted(run_id)} is already in the store")


def run_leased(run_id: str, owner: str, expires_at: float) -> RunLeased:
    """Another owner holds the run's unexpired lease."""
    return RunLeased(
        f"run {quoted(run_id)} is driven by {cut(owner)} until "
        f"{time.strftime('%H:%M:%S', time.localtime(expires_at))} (its lease); "
        "resume it after that, or with force=True if that owner is known dead",
        owner=owner,
        expires_at=expires_at,
    )


def lease_lost(run_id: str, lease: Lease, holder: Any) -> LeaseLost:
    """A write under `lease` was refused; `holder` is the run's (owner, epoch) row, if any."""
    if holder is not None and (holder[0], holder[1]) == (lease.owner, lease.epoch):
        return LeaseLost(
            f"run {quoted(run_id)}: another write of this step came first (the run's head is "
            "not the one this driver wrote after): stopping without writing"
        )
    held = "nobody" if holder is None or holder[0] is None else f"{holder[0]} (epoch {holder[1]})"
    return LeaseLost(
        f"run {quoted(run_id)}: this driver's lease (epoch {lease.epoch}) is gone; the run is "
        f"held by {held}: stopping without writing"
    )


def not_suspended_at(run_id: str, at: int, seq: int) -> StoreError:
    return StoreError(
        f"run {quoted(run_id)} is at step {at}, not at suspension {seq}: "
        "decisions for that suspension cannot be spent"
    )


def decision_spent(run_id: str, call_id: str, seq: int) -> DecisionSpent:
    return DecisionSpent(
        f"call {quoted(call_id)} of run {quoted(run_id)} was already "
        f"decided at suspension {seq}: a decision is spent once"
    )


def newer_schema(where: str, version: int, known: int) -> StoreCorrupt:
    return StoreCorrupt(
        f"the run store {where} has schema version {version}, newer than this "
        f"helikon knows ({known}): upgrade helikon to open it"
    )
