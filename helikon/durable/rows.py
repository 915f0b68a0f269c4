"""Rows as every backend stores them: values encoded to JSON with their signatures, and
decoded back with every signature and every link of the record chain checked.

The backends (SQLite, PostgreSQL) only move these strings in and out of their tables; what
a row means, and whether it can be believed, is decided here, once for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from helikon.core.approvals import ApprovalDecision
from helikon.core.codec import dumps, encoded, loads
from helikon.core.items import Item, ToolResult
from helikon.core.quoting import cut, quoted
from helikon.core.table import ChartData
from helikon.durable.records import (
    CallRecord,
    EffectRecord,
    RunHeader,
    StepRecord,
    StoreCorrupt,
    StoreError,
)
from helikon.durable.signing import matches, sign


def header_row(key: bytes, header: RunHeader) -> tuple[str, str]:
    data = dumps(header)
    return data, sign(key, "header", header.run_id, data)


def record_row(key: bytes, run_id: str, record: StepRecord, previous: str) -> tuple[str, str]:
    """(the record's JSON, its signature), chained to the `previous` record's signature."""
    data = record_json(record)
    return data, sign(key, "record", run_id, record.seq, previous, data)


_CHECKED = tuple[tuple[str, bool], ...]


def record_json(record: StepRecord) -> str:
    """`dumps(record)`, byte for byte, written part by part: every part of a record but its
    numbers is typed as a union (an input, a state, an action, events, items), which
    pydantic writes at about three times the cost of the same value as its own type
    (`helikon.core.codec.encoded`), and a record is written before every effect."""
    try:
        parts = (
            b'{"seq":%d,"input":' % record.seq,
            encoded(record.input),
            b',"row":%d,"checked":' % record.row,
            encoded(record.checked, _CHECKED),
            b',"state_after":',
            encoded(record.state_after),
            b',"next_action":',
            encoded(record.next_action),
            b',"events":[',
            b",".join([encoded(event) for event in record.events]),
            b'],"appends":[',
            b",".join([encoded(item) for item in record.appends]),
            b"]}",
        )
    except PydanticSerializationError:  # a lone surrogate: `dumps` writes it another way
        return dumps(record)
    return b"".join(parts).decode()


def effect_row(key: bytes, run_id: str, n: int, effect: EffectRecord) -> tuple[str, str]:
    data = dumps(effect)
    return data, sign(key, "effect", run_id, n, effect.after_seq, data)


def call_row(key: bytes, run_id: str, call: CallRecord) -> tuple[str | None, str]:
    result = None if call.result is None else dumps(call.result)
    mac = sign(
        key, "call", run_id, call.seq, call.call_id, call.tool, call.arguments_hash, result or ""
    )
    return result, mac


def decision_row(key: bytes, run_id: str, seq: int, decision: ApprovalDecision) -> tuple[str, str]:
    data = dumps(decision)
    return data, sign(key, "decision", run_id, seq, decision.call_id, data)


def _load(kind: Any, data: str, what: str) -> Any:
    try:
        return loads(kind, data)
    except (ValidationError, ValueError, RecursionError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StoreCorrupt(f"{what}: not a valid {kind.__name__}: {cut(first)}") from None


def read_header(key: bytes, run_id: str, data: str, mac: str) -> RunHeader:
    if not matches(mac, key, "header", run_id, data):
        raise StoreCorrupt(
            f"run {quoted(run_id)}: its header does not match its signature (edited, or the "
            "store's key is not the one it was written with)"
        )
    header: RunHeader = _load(RunHeader, data, f"run {quoted(run_id)}: header")
    if header.run_id != run_id:
        raise StoreCorrupt(f"run {quoted(run_id)}: its header names run {quoted(header.run_id)}")
    return header


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
                f"run {quoted(run_id)}: call {quoted(call_id)} of step {seq} does not match its "
                "signature"
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
                f"run {quoted(run_id)}: the decision for call {quoted(call_id)} at step {seq} does "
                "not match its signature (a forged approval)"
            )
        decision: ApprovalDecision = _load(ApprovalDecision, data, f"decision {quoted(call_id)}")
        if (decision.call_id, decision.run_id, decision.seq) != (call_id, run_id, seq):
            raise StoreCorrupt(
                f"run {quoted(run_id)}: the decision for call {quoted(call_id)} is misfiled"
            )
        decisions.append((seq, decision))
    return tuple(decisions)


def turns_of(record: StepRecord) -> int:
    """Model turns a run has opened, as `runs()` lists it."""
    turn = getattr(record.state_after, "turn", None)
    return 0 if turn is None else int(turn) + 1


def dumps_json(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def head_sig(key: bytes, run_id: str, seq: int, mac: str) -> str:
    """The signature of a run's head: which record is its last, so removing the last
    records and moving the head back to an earlier one is refused too."""
    return sign(key, "head", run_id, seq, mac)


def check_head(key: bytes, run_id: str, seq: int, mac: str, signature: str) -> None:
    if not matches(signature, key, "head", run_id, seq, mac):
        raise StoreCorrupt(
            f"run {quoted(run_id)}: its head (record {seq}) does not match its signature: records "
            "were removed, or the head was moved"
        )


def session_row(key: bytes, session_id: str, n: int, item: Item) -> tuple[str, str]:
    data = dumps(item, Item)
    return data, sign(key, "session", session_id, n, data)


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


def read_chart(data: str | None, digest: str, run_id: str) -> str | None:
    """The chart a run names, checked against its digest (the charts table is shared and
    unsigned: a chart is its digest)."""
    if data is None:
        return None
    chart: ChartData = _load(ChartData, data, f"run {quoted(run_id)}: chart {digest[:12]}")
    if chart.digest != digest:
        raise StoreCorrupt(
            f"run {quoted(run_id)}: the stored chart {digest[:12]} hashes to "
            f"{chart.digest[:12]} (edited)"
        )
    return data


MAX_RUN_ID = 512


def check_run_id(run_id: str) -> None:
    """Refuse a run id no store can keep alike: empty, too long, or holding NUL."""
    if not run_id or len(run_id) > MAX_RUN_ID or "\x00" in run_id:
        raise StoreError(
            f"run id {quoted(run_id)} cannot be stored: it must be 1 to {MAX_RUN_ID} "
            "characters, without NUL"
        )
