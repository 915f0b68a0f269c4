"""Stores written in format 1 (schema 3 on SQLite, 1 on PostgreSQL), where every row was
signed alone, chained into the format of `helikon.durable.chain` as their schema migrates.

A run (or session) is chained only if every row of it checks out as format 1 checked it:
a migration never launders a row edited before it. One that does not is left unchained,
and reading it is refused as any broken chain is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from helikon.core.approvals import ApprovalDecision
from helikon.core.items import Item, ToolResult
from helikon.core.quoting import quoted
from helikon.durable.chain import Chain, genesis
from helikon.durable.records import CallRecord, EffectRecord, StepRecord, StoreCorrupt
from helikon.durable.rows import RunHead, SessionHead, _load, head_sig, session_sig
from helikon.durable.signing import matches


@dataclass
class Rechained:
    """What a run's rows become: (link, digest, *key) for each, and its signed head."""

    records: list[tuple[Any, ...]] = field(default_factory=list)
    effects: list[tuple[Any, ...]] = field(default_factory=list)
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    decisions: list[tuple[Any, ...]] = field(default_factory=list)
    head: tuple[Any, ...] = ()

    def parts(self) -> tuple[list[tuple[Any, ...]], ...]:
        return self.records, self.effects, self.calls, self.decisions


def rechain_run(
    key: bytes,
    run_id: str,
    head: tuple[int, str, str],
    found: Sequence[list[Any]],
) -> Rechained | None:
    """A run's rows of format 1 (`found`: its records, effects, calls, decisions, as
    format 1 read them) as links of one chain, or None when they do not check out."""
    records, effects, calls, decisions = found
    try:
        _check_head(key, run_id, *head)
        read_records(key, run_id, records, head[0], head[1])
        read_effects(key, run_id, effects)
        read_calls(key, run_id, calls)
        read_decisions(key, run_id, decisions)
    except StoreCorrupt:
        return None
    chain, out = Chain(0, genesis("run", run_id)), Rechained()
    placed = [(row[0], 0, 0, row) for row in records]
    placed += [(row[1], 1, row[0], row) for row in effects]
    for seq, kind, _, row in sorted(placed, key=lambda item: item[:3]):
        if kind == 0:
            out.records.append((*chain.add("record", seq, row[1]), seq))
        else:
            out.effects.append((*chain.add("event", row[0], row[1], row[2]), row[0]))
    record_mac = chain.digest if not out.records else out.records[-1][1]
    for seq, call_id, tool, arguments_hash, result, _ in calls:
        link, mac = chain.add("call", seq, call_id, tool, arguments_hash)
        result_link = None
        if result is not None:
            result_link, mac = chain.add("result", seq, call_id, result)
        out.calls.append((link, result_link, mac, seq, call_id))
    for seq, call_id, data, _ in decisions:
        out.decisions.append((*chain.add("decision", seq, call_id, data), seq, call_id))
    new = RunHead(head[0], record_mac, chain.n, chain.digest)
    out.head = (new.mac, new.n, new.digest, head_sig(key, run_id, new))
    return out


def rechain_session(
    key: bytes, session_id: str, found: list[tuple[int, str, str]]
) -> tuple[list[tuple[str, int]], tuple[Any, ...]] | None:
    """A session's items of format 1 as links of one chain: ((digest, n) for each, its
    head row), or None when they do not check out (or a prune left a gap)."""
    try:
        read_session(key, session_id, found)
    except StoreCorrupt:
        return None
    numbers = [n for n, _, _ in found]
    if not numbers or numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return None
    start = genesis("session", session_id)
    chain, digests = Chain(numbers[0] - 1, start), []
    for n, data, _ in found:
        digests.append((chain.add("item", n, data)[1], n))
    head = SessionHead(numbers[0], start, chain.n, chain.digest)
    return digests, (
        session_id,
        head.first,
        head.base,
        head.n,
        head.digest,
        session_sig(key, session_id, head),
    )


def _check_head(key: bytes, run_id: str, seq: int, mac: str, signature: str) -> None:
    if not matches(signature, key, "head", run_id, seq, mac):
        raise StoreCorrupt(f"run {quoted(run_id)}: its head does not match its signature")


def read_records(
    key: bytes, run_id: str, rows: Iterable[tuple[int, str, str]], head_seq: int, head_mac: str
) -> tuple[StepRecord, ...]:
    """The run's records, each signature and each link of the chain checked, ending at the
    run's head.

    Raises:
        StoreCorrupt: a record was edited, removed, reordered or added, naming the seq.
    """
    records: list[StepRecord] = []
    previous = ""
    for expected, (seq, data, mac) in enumerate(rows, start=1):
        if seq != expected:
            raise StoreCorrupt(f"run {quoted(run_id)}: record {expected} is missing (found {seq})")
        if not matches(mac, key, "record", run_id, seq, previous, data):
            raise StoreCorrupt(
                f"run {quoted(run_id)}: record {seq} does not match its signature: the record was "
                "edited, or one before it"
            )
        record: StepRecord = _load(StepRecord, data, f"run {quoted(run_id)}: record {seq}")
        if record.seq != seq:
            raise StoreCorrupt(f"run {quoted(run_id)}: record {seq} says it is record {record.seq}")
        records.append(record)
        previous = mac
    if len(records) != head_seq or previous != head_mac:
        raise StoreCorrupt(
            f"run {quoted(run_id)}: its head is record {head_seq}, but the store holds "
            f"{len(records)} records that chain to another head"
        )
    return tuple(records)


def read_effects(
    key: bytes, run_id: str, rows: Iterable[tuple[int, int, str, str]]
) -> tuple[EffectRecord, ...]:
    effects: list[EffectRecord] = []
    for n, after_seq, data, mac in rows:
        if not matches(mac, key, "effect", run_id, n, after_seq, data):
            raise StoreCorrupt(f"run {quoted(run_id)}: event {n} does not match its signature")
        effects.append(_load(EffectRecord, data, f"run {quoted(run_id)}: event {n}"))
    return tuple(effects)


def read_calls(
    key: bytes, run_id: str, rows: Iterable[tuple[int, str, str, str, str | None, str]]
) -> tuple[CallRecord, ...]:
    calls: list[CallRecord] = []
    for seq, call_id, tool, arguments_hash, result, mac in rows:
        parts = ("call", run_id, seq, call_id, tool, arguments_hash, result or "")
        if not matches(mac, key, *parts):
            raise StoreCorrupt(
                f"run {quoted(run_id)}: call {quoted(call_id)} of step {seq} does not match "
                "its signature"
            )
        value = None if result is None else _load(ToolResult, result, f"call {quoted(call_id)}")
        calls.append(CallRecord(seq, call_id, tool, arguments_hash, value))
    return tuple(calls)


def read_decisions(
    key: bytes, run_id: str, rows: Iterable[tuple[int, str, str, str]]
) -> tuple[tuple[int, ApprovalDecision], ...]:
    decisions: list[tuple[int, ApprovalDecision]] = []
    for seq, call_id, data, mac in rows:
        if not matches(mac, key, "decision", run_id, seq, call_id, data):
            raise StoreCorrupt(
                f"run {quoted(run_id)}: the decision for call {quoted(call_id)} at step {seq} "
                "does not match its signature (a forged approval)"
            )
        decision: ApprovalDecision = _load(ApprovalDecision, data, f"decision {quoted(call_id)}")
        if (decision.call_id, decision.run_id, decision.seq) != (call_id, run_id, seq):
            raise StoreCorrupt(
                f"run {quoted(run_id)}: the decision for call {quoted(call_id)} is misfiled"
            )
        decisions.append((seq, decision))
    return tuple(decisions)


def read_session(
    key: bytes, session_id: str, rows: Iterable[tuple[int, str, str]]
) -> tuple[Item, ...]:
    items: list[Item] = []
    for n, data, mac in rows:
        if not matches(mac, key, "session", session_id, n, data):
            raise StoreCorrupt(
                f"session {quoted(session_id)}: item {n} does not match its signature (edited)"
            )
        items.append(_load(Item, data, f"session {quoted(session_id)}: item {n}"))
    return tuple(items)
