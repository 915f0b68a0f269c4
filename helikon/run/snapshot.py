"""`RunSnapshot`: a run at a transition boundary, enough to continue it later, and the
checks a resume makes before anything runs.

Theory of operation: a snapshot is data a caller keeps (in memory, a file, a queue), so on
resume it is hostile input. It is signed with HMAC-SHA256 when taken (`sign`); resuming
refuses a snapshot whose signature does not match, and an unsigned one unless the caller
says `trust_unsigned=True`. Whatever can be derived is derived again instead of trusted:
which calls of a batch ask for approval and which may run comes from the chart and the
tools' policy (`check_derivable`). Approval decisions must bind to the suspension they
answer (run id, the suspension's seq, call id, arguments hash), may not conflict, and a
suspension is resumed once per process (`claim`); single use across processes needs the run
store. Snapshots round-trip through JSON (`helikon.core.codec`).

The signing key: `RunConfig(snapshot_key=...)`, else the environment variable
`HELIKON_SNAPSHOT_KEY`, else a random key made once per process, so resuming in the same
process works with no setup and resuming in another needs a configured key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
from collections.abc import Collection, Sequence
from dataclasses import field, replace
from typing import Any, Literal

from helikon.core.approvals import ApprovalDecision, ApprovalRequest, arguments_hash
from helikon.core.codec import dumps
from helikon.core.context import TransitionCtx
from helikon.core.errors import HelikonError
from helikon.core.items import Item, ToolCall
from helikon.core.state import (
    TERMINAL_PHASES,
    ApprovalDecisions,
    EffectPhase,
    ExecutingTools,
    LoopState,
    NeedsApproval,
    TransitionInput,
)
from helikon.core.values import value

SNAPSHOT_VERSION: Literal[2] = 2
KEY_VARIABLE = "HELIKON_SNAPSHOT_KEY"


class SnapshotMismatch(HelikonError, ValueError):
    """The snapshot cannot be resumed here: another agent, chart or format version, a
    signature that does not match, a state the chart or policy cannot produce, a run that
    already ended, or a suspension already resumed."""


class ApprovalMismatch(HelikonError, ValueError):
    """A decision does not bind to a pending call: unknown call, other arguments, another
    run or suspension, or two decisions for one call."""


@value
class RunSnapshot:
    """The run's state, full conversation, and the input already observed but not applied.

    `signature` is the HMAC-SHA256 of everything else (`sign`); an unsigned snapshot has "".
    """

    run_id: str
    agent: str
    chart: str
    seq: int
    depth: int
    state: LoopState
    conversation: tuple[Item, ...]
    next_input: TransitionInput | None = None
    version: Literal[2] = SNAPSHOT_VERSION
    signature: str = field(default="", repr=False)

    def check(self, agent: str, chart: str) -> None:
        """Refuse to resume on another agent or chart."""
        if self.agent != agent:
            raise SnapshotMismatch(
                f"snapshot of run {self.run_id} was taken from agent {self.agent!r}, not {agent!r}"
            )
        if self.chart != chart:
            raise SnapshotMismatch(
                f"snapshot of run {self.run_id} was taken on chart {self.chart[:12]}, but the "
                f"agent now runs chart {chart[:12]}: the loop changed, so it cannot resume"
            )

    def check_state(self, phases: set[str]) -> None:
        """Refuse a state the chart cannot be in, a finished run, or an inconsistent batch."""
        state: Any = self.state
        if state.phase not in phases:
            raise SnapshotMismatch(
                f"snapshot of run {self.run_id} is in phase {state.phase!r}, "
                "which the agent's chart does not have"
            )
        if state.phase in TERMINAL_PHASES:
            raise SnapshotMismatch(
                f"run {self.run_id} already ended ({state.phase}) at step {self.seq}: "
                "there is nothing to resume"
            )
        if isinstance(state, NeedsApproval):
            batch = {call.call_id: call for call in state.calls}
            for request in state.pending:
                call = request.call
                if batch.get(call.call_id) != call or request.arguments_hash != arguments_hash(
                    call.arguments
                ):
                    raise SnapshotMismatch(
                        f"snapshot of run {self.run_id} is corrupt: pending call "
                        f"{call.call_id!r} ({call.name}) does not match the batch the model "
                        "asked for, or its argument hash; refusing to resume"
                    )

    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The requests this suspension waits on, stamped with its run id and seq (what a
        decision must bind to); empty when the run is not waiting for approval."""
        state: Any = self.state
        if not isinstance(state, NeedsApproval):
            return ()
        return tuple(request.bound(self.run_id, self.seq) for request in state.pending)

    def check_decisions(self, decisions: Sequence[ApprovalDecision]) -> None:
        """Refuse any decision that is not for a pending call of this suspension with exactly
        its arguments, and two decisions for one call."""
        if not isinstance(self.state, NeedsApproval):
            raise ApprovalMismatch(f"run {self.run_id} is not waiting for approval")
        pending = {request.call.call_id: request for request in self.pending()}
        seen: set[str] = set()
        for decision in decisions:
            request = pending.get(decision.call_id)
            if request is None:
                raise ApprovalMismatch(
                    f"no call {decision.call_id!r} is waiting for approval in run "
                    f"{self.run_id}; pending: {', '.join(pending) or '(none)'}"
                )
            if decision.call_id in seen:
                raise ApprovalMismatch(
                    f"two decisions for call {decision.call_id!r} ({request.call.name}): "
                    "refused, since they may conflict"
                )
            seen.add(decision.call_id)
            if not decision.answers(request):
                raise ApprovalMismatch(
                    f"decision for call {decision.call_id!r} ({request.call.name}) quotes "
                    f"arguments hash {decision.arguments_hash[:12]}, but the pending call's "
                    f"arguments hash to {request.arguments_hash[:12]}: refused"
                )
            if not decision.binds(request):
                raise ApprovalMismatch(
                    f"decision for call {decision.call_id!r} ({request.call.name}) is for run "
                    f"{decision.run_id or '(none)'!r} at suspension {decision.seq}, not run "
                    f"{self.run_id!r} at suspension {self.seq}: decide on the requests this "
                    "suspension gave (`result.pending`, `RunSuspended.pending`)"
                )


# ---------------------------------------------------------------- signing


def snapshot_key(configured: bytes | str | None = None) -> bytes:
    """The key snapshots are signed with: `configured`, else $HELIKON_SNAPSHOT_KEY, else the
    process's own random key."""
    chosen = configured if configured is not None else os.environ.get(KEY_VARIABLE) or None
    if chosen is None:
        return _process_key()
    return chosen.encode("utf-8") if isinstance(chosen, str) else bytes(chosen)


_KEY: list[bytes] = []
_KEY_LOCK = threading.Lock()


def _process_key() -> bytes:
    with _KEY_LOCK:
        if not _KEY:
            _KEY.append(secrets.token_bytes(32))
        return _KEY[0]


def _mac(snapshot: RunSnapshot, key: bytes) -> str:
    payload = dumps(replace(snapshot, signature=""), RunSnapshot).encode("utf-8")
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def sign(snapshot: RunSnapshot, key: bytes) -> RunSnapshot:
    """`snapshot` with its signature."""
    return replace(snapshot, signature=_mac(snapshot, key))


def check_signature(snapshot: RunSnapshot, key: bytes, *, trust_unsigned: bool) -> bool:
    """True when the snapshot is signed with `key`; False when it is unsigned and trusted.

    Raises:
        SnapshotMismatch: the signature does not match (always refused), or the snapshot is
            unsigned and `trust_unsigned` is false.
    """
    if not snapshot.signature:
        if trust_unsigned:
            return False
        raise SnapshotMismatch(
            f"snapshot of run {snapshot.run_id} is not signed: refusing to resume it "
            "(pass trust_unsigned=True to resume a snapshot you made yourself)"
        )
    if not hmac.compare_digest(snapshot.signature, _mac(snapshot, key)):
        raise SnapshotMismatch(
            f"snapshot of run {snapshot.run_id} does not match its signature: it was altered, "
            f"or signed with another key (set RunConfig(snapshot_key=...) or ${KEY_VARIABLE} "
            "to the key of the process that took it)"
        )
    return True


# ---------------------------------------------------------------- derived, not trusted


def check_derivable(
    snapshot: RunSnapshot,
    ctx: TransitionCtx,
    *,
    signed: bool,
    approved: Collection[tuple[str, str]] = (),
) -> None:
    """Refuse a snapshot whose calls the chart and the tools' policy would not have let run.

    Every call of a batch is pending, allowed or settled, once; a call the policy denies
    never waits or runs; a call that asks for approval waits for it, unless a signed
    snapshot says it was approved earlier in the same suspension, or (a stored run) it is
    in `approved`, the (call id, arguments hash) pairs its batch's decisions approved. A
    snapshot never carries approval decisions as its next input: decisions come with the
    resume.

    Raises:
        SnapshotMismatch: naming the call and what it would have done.
    """
    state: Any = snapshot.state
    if isinstance(snapshot.next_input, ApprovalDecisions):
        raise SnapshotMismatch(
            f"snapshot of run {snapshot.run_id} carries approval decisions as its next input: "
            "decisions are given to resume, never read from a snapshot"
        )
    if isinstance(state, NeedsApproval):
        _check_batch(snapshot, ctx, state.calls, state.pending, state.allowed, state.settled)
        for call in state.allowed:
            _check_runnable(snapshot, ctx, call, signed=signed, waiting=True)
    elif isinstance(state, ExecutingTools):
        settled = {result.call_id for result in state.settled}
        for call in state.calls:
            if (
                call.call_id not in settled
                and (
                    call.call_id,
                    arguments_hash(call.arguments),
                )
                not in approved
            ):
                _check_runnable(snapshot, ctx, call, signed=signed, waiting=False)
    elif isinstance(state, EffectPhase) and ctx.table.effects.get(state.phase) != state.effect:
        raise SnapshotMismatch(
            f"snapshot of run {snapshot.run_id} would run effect {state.effect!r} in phase "
            f"{state.phase}, which the chart does not run there"
        )


def _check_batch(
    snapshot: RunSnapshot,
    ctx: TransitionCtx,
    calls: tuple[ToolCall, ...],
    pending: tuple[ApprovalRequest, ...],
    allowed: tuple[ToolCall, ...],
    settled: tuple[Any, ...],
) -> None:
    ids = [call.call_id for call in calls]
    accounted = [
        *(request.call.call_id for request in pending),
        *(call.call_id for call in allowed),
        *(result.call_id for result in settled),
    ]
    if len(set(ids)) != len(ids) or sorted(accounted) != sorted(ids):
        raise SnapshotMismatch(
            f"snapshot of run {snapshot.run_id} is corrupt: the batch's calls are not each "
            "pending, allowed or settled exactly once"
        )
    batch = {call.call_id: call for call in calls}
    for call in allowed:
        if batch[call.call_id] != call:
            raise SnapshotMismatch(
                f"snapshot of run {snapshot.run_id} is corrupt: allowed call {call.call_id!r} "
                f"({call.name}) is not the call the model asked for"
            )
    for request in pending:
        if ctx.permission(request.call) == "deny":
            raise SnapshotMismatch(
                f"snapshot of run {snapshot.run_id}: call {request.call.call_id!r} "
                f"({request.call.name}) waits for approval, but the policy denies it"
            )


def _check_runnable(
    snapshot: RunSnapshot, ctx: TransitionCtx, call: ToolCall, *, signed: bool, waiting: bool
) -> None:
    permission = ctx.permission(call)
    if permission == "allow" or (permission == "ask" and signed and waiting):
        return
    why = "the policy denies it" if permission == "deny" else "it needs approval"
    raise SnapshotMismatch(
        f"snapshot of run {snapshot.run_id} would run call {call.call_id!r} ({call.name}), "
        f"but {why}: refusing to resume"
    )


# ---------------------------------------------------------------- single use


_SPENT: set[tuple[str, int]] = set()
_SPENT_LOCK = threading.Lock()


def claim(snapshot: RunSnapshot) -> None:
    """Mark the run's boundary `seq` as resumed in this process.

    Raises:
        SnapshotMismatch: it was resumed before (a second resume would repeat its effects,
            an approval spent twice).
    """
    key = (snapshot.run_id, snapshot.seq)
    with _SPENT_LOCK:
        if key in _SPENT:
            raise SnapshotMismatch(
                f"run {snapshot.run_id} was already resumed from step {snapshot.seq} in this "
                "process: a snapshot is resumed once (across processes, use a run store)"
            )
        _SPENT.add(key)
