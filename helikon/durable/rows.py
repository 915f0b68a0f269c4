"""Rows as every backend stores them: values encoded to JSON with their signatures, and
decoded back with every signature and every link of the record chain checked.

The backends (SQLite, PostgreSQL) only move these strings in and out of their tables; what
a row means, and whether it can be believed, is decided here, once for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from hmac import compare_digest
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from helikon.core.approvals import ApprovalDecision
from helikon.core.codec import dumps, encoded, loads
from helikon.core.items import Item, ToolResult
from helikon.core.quoting import cut, quoted
from helikon.core.table import ChartData
from helikon.core.values import value
from helikon.durable.chain import Chain, Link, genesis, verify
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


_Text = TypeVar("_Text", str, str | None)


def record_row(chain: Chain, record: StepRecord) -> tuple[str, str, int]:
    """(the record's JSON, its digest, its link), chained after `chain`'s head."""
    data = record_json(record)
    return _linked(data, chain.add("record", record.seq, data))


def _linked(data: _Text, link: tuple[int, str]) -> tuple[_Text, str, int]:
    """(a row's text, its digest, its link number): the order of their columns."""
    return data, link[1], link[0]


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
            b'],"time":',
            b"null" if record.time is None else encoded(record.time),
            b"}",
        )
    except PydanticSerializationError:  # a lone surrogate: `dumps` writes it another way
        return dumps(record)
    return b"".join(parts).decode()


def effect_row(chain: Chain, n: int, effect: EffectRecord) -> tuple[str, str, int]:
    data = dumps(effect)
    return _linked(data, chain.add("event", n, effect.after_seq, data))


def effect_rows(
    run_id: str, chain: Chain, first: int, effects: Sequence[EffectRecord]
) -> list[tuple[Any, ...]]:
    """`effects` numbered from `first`, each a link of `chain`: (run, n, after, JSON,
    digest, link), the columns of an effect's row."""
    return [
        (run_id, first + i, effect.after_seq, *effect_row(chain, first + i, effect))
        for i, effect in enumerate(effects)
    ]


def call_row(chain: Chain, call: CallRecord) -> tuple[str | None, str, int]:
    """A call's start (no result) or its result, as the next link of `chain`."""
    if call.result is None:
        parts = ("call", call.seq, call.call_id, call.tool, call.arguments_hash)
        return _linked(None, chain.add(*parts))
    result = dumps(call.result)
    return _linked(result, chain.add("result", call.seq, call.call_id, result))


def decision_row(chain: Chain, seq: int, decision: ApprovalDecision) -> tuple[str, str, int]:
    data = dumps(decision)
    return _linked(data, chain.add("decision", seq, decision.call_id, data))


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


RecordRow = tuple[int, str, str, int | None]
"""seq, data, digest, link"""
EffectRow = tuple[int, int, str, str, int | None]
"""n, after_seq, data, digest, link"""
CallRow = tuple[int, str, str, str, str | None, str, int | None, int | None]
"""seq, call_id, tool, arguments_hash, result, digest (of its last link), link, result_link"""
DecisionRow = tuple[int, str, str, str, int | None]
"""seq, call_id, data, digest, link"""


@value
class RunHead:
    """A run's head as its row keeps it: its last record (seq, digest), and its chain's
    last link (number, digest)."""

    seq: int
    mac: str
    n: int
    digest: str


def read_rows(
    run_id: str,
    head: RunHead,
    records: list[RecordRow],
    effects: list[EffectRow],
    calls: list[CallRow],
    decisions: list[DecisionRow],
) -> tuple[
    tuple[StepRecord, ...],
    tuple[EffectRecord, ...],
    tuple[CallRecord, ...],
    tuple[tuple[int, ApprovalDecision], ...],
]:
    """(records, effects, calls, decisions) of a run, each row checked as a link of the
    run's chain, the chain checked to end at the run's head (whose signature the caller
    checked).

    Raises:
        StoreCorrupt: a row was edited, removed, added, reordered or swapped, naming it.
    """
    links = [*_record_links(records), *_effect_links(effects), *_call_links(calls)]
    links += _decision_links(decisions)
    verify(f"run {quoted(run_id)}", genesis("run", run_id), 1, links, head.n, head.digest)
    where = f"run {quoted(run_id)}"
    return (
        _records(run_id, records, head),
        tuple(_load(EffectRecord, row[2], f"{where}: event {row[0]}") for row in effects),
        tuple(_call(row) for row in calls),
        _decisions(run_id, decisions),
    )


def _record_links(rows: list[RecordRow]) -> list[Link]:
    return [Link(at, f"record {seq}", ("record", seq, data), mac) for seq, data, mac, at in rows]


def _effect_links(rows: list[EffectRow]) -> list[Link]:
    return [
        Link(at, f"event {n}", ("event", n, after, data), mac) for n, after, data, mac, at in rows
    ]


def _call_links(rows: list[CallRow]) -> list[Link]:
    """A call is two links, its start and its result; its row keeps the last one's digest."""
    links: list[Link] = []
    for seq, call_id, tool, arguments_hash, result, mac, at, result_at in rows:
        what = f"call {quoted(call_id)} of step {seq}"
        started = None if result is not None else mac
        links.append(Link(at, what, ("call", seq, call_id, tool, arguments_hash), started))
        if result is not None or result_at is not None:
            parts = ("result", seq, call_id, result or "")
            links.append(Link(result_at, f"the result of {what}", parts, mac))
    return links


def _decision_links(rows: list[DecisionRow]) -> list[Link]:
    return [
        Link(
            at,
            f"the decision on call {quoted(call_id)} at step {seq}",
            ("decision", seq, call_id, data),
            mac,
        )
        for seq, call_id, data, mac, at in rows
    ]


def _call(row: CallRow) -> CallRecord:
    seq, call_id, tool, arguments_hash, result = row[:5]
    found = None if result is None else _load(ToolResult, result, f"call {quoted(call_id)}")
    return CallRecord(seq, call_id, tool, arguments_hash, found)


def _records(run_id: str, rows: list[RecordRow], head: RunHead) -> tuple[StepRecord, ...]:
    """The records of a run whose chain checked out, one per seq, ending at its head."""
    records: list[StepRecord] = []
    for expected, (seq, data, _, _) in enumerate(rows, start=1):
        if seq != expected:
            raise StoreCorrupt(f"run {quoted(run_id)}: record {expected} is missing (found {seq})")
        record: StepRecord = _load(StepRecord, data, f"run {quoted(run_id)}: record {seq}")
        if record.seq != seq:
            raise StoreCorrupt(f"run {quoted(run_id)}: record {seq} says it is record {record.seq}")
        records.append(record)
    if len(records) != head.seq or (rows and rows[-1][2] != head.mac):
        raise StoreCorrupt(
            f"run {quoted(run_id)}: its head is record {head.seq}, but the store holds "
            f"{len(records)} records that end at another one"
        )
    return tuple(records)


def _decisions(run_id: str, rows: list[DecisionRow]) -> tuple[tuple[int, ApprovalDecision], ...]:
    decisions: list[tuple[int, ApprovalDecision]] = []
    for seq, call_id, data, _, _ in rows:
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


def head_sig(key: bytes, run_id: str, head: RunHead) -> str:
    """The signature of a run's head, made once a transaction: its last record and its
    chain's last link, so a row removed or added anywhere, or the head moved back, is
    refused."""
    return sign(key, "head", run_id, head.seq, head.mac, head.n, head.digest)


def check_head(key: bytes, run_id: str, head: RunHead, signature: str) -> None:
    if not matches(signature, key, "head", run_id, head.seq, head.mac, head.n, head.digest):
        raise StoreCorrupt(
            f"run {quoted(run_id)}: its head (record {head.seq}, link {head.n}) does not match its "
            "signature: the head was moved or edited, or the store's key is not the one it "
            "was written with"
        )


@value
class SessionHead:
    """A session's chain: items `first` to `n`, chained from `base` (the digest of the last
    item a prune took, or the session's genesis), ending at `digest`."""

    first: int
    base: str
    n: int
    digest: str

    @classmethod
    def empty(cls, session_id: str) -> SessionHead:
        start = genesis("session", session_id)
        return cls(1, start, 0, start)


def session_head(row: Any) -> tuple[SessionHead, str] | None:
    """A session's head and its signature, from its row (first, base, n, digest, mac)."""
    return None if row is None else (SessionHead(*row[:4]), row[4])


def session_sig(key: bytes, session_id: str, head: SessionHead) -> str:
    return sign(key, "session", session_id, head.first, head.base, head.n, head.digest)


def session_row(chain: Chain, item: Item) -> tuple[str, str, int]:
    """(the item's JSON, its digest, its number), chained after `chain`'s head."""
    data = dumps(item, Item)
    return _linked(data, chain.add("item", chain.n + 1, data))


def session_rows(
    session_id: str, kept: tuple[SessionHead, str] | None, items: Sequence[Item]
) -> tuple[list[tuple[int, str, str]], SessionHead]:
    """`items` chained after the session's head (`kept`, None for a new session): each
    item's (number, JSON, digest), and the head after them (to sign)."""
    head = kept[0] if kept else SessionHead.empty(session_id)
    chain = Chain(head.n, head.digest)
    added = []
    for item in items:
        data, mac, n = session_row(chain, item)
        added.append((n, data, mac))
    return added, replace(head, n=chain.n, digest=chain.digest)


def read_session(
    key: bytes,
    session_id: str,
    kept: tuple[SessionHead, str] | None,
    rows: list[tuple[int, str, str]],
) -> tuple[Item, ...]:
    """A session's items, each a link of its chain, ending at its signed head (`kept`:
    the head and its signature; none for a session never written or cleared).

    Raises:
        StoreCorrupt: an item was edited, removed, added, reordered or swapped.
    """
    owner = f"session {quoted(session_id)}"
    head, signature = kept or (SessionHead.empty(session_id), "")
    if kept is not None and not compare_digest(signature, session_sig(key, session_id, head)):
        raise StoreCorrupt(f"{owner}: its head (item {head.n}) does not match its signature")
    links = [Link(n, f"item {n}", ("item", n, data), mac) for n, data, mac in rows]
    verify(owner, head.base, head.first, links, head.n, head.digest)
    return tuple(_load(Item, data, f"{owner}: item {n}") for n, data, _ in rows)


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


def run_filter(status: str | None, include_nested: bool, mark: str) -> tuple[str, list[Any]]:
    """The WHERE clause listing runs takes (`mark`: the driver's placeholder), and its
    arguments: runs of `status` only, top-level runs only unless `include_nested`."""
    clauses: list[str] = []
    args: list[Any] = []
    if status is not None:
        clauses.append(f"status = {mark}")
        args.append(status)
    if not include_nested:
        clauses.append("parent_run_id IS NULL")
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def check_run_id(run_id: str) -> None:
    """Refuse a run id no store can keep alike: empty, too long, or holding NUL."""
    if not run_id or len(run_id) > MAX_RUN_ID or "\x00" in run_id:
        raise StoreError(
            f"run id {quoted(run_id)} cannot be stored: it must be 1 to {MAX_RUN_ID} "
            "characters, without NUL"
        )


def pruned_session(
    key: bytes, session_id: str, kept: tuple[SessionHead, str] | None, upto: int, base: str
) -> SessionHead | None:
    """The head of a session once a prune deleted its items up to `upto` (`base`: the last
    one's digest): its chain starts after them; None when no item is left. A head that
    does not check out is kept as it is (the session stays refused)."""
    if kept is None or upto >= kept[0].n:
        return None
    head, signature = kept
    if not compare_digest(signature, session_sig(key, session_id, head)):
        return head
    return SessionHead(upto + 1, base, head.n, head.digest)
