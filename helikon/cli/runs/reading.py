"""`helikon runs list`, `show` and `export`: what a run store keeps, read and never written;
and how a stored run's facts print (times, leases, pending and spent decisions), which the
other `runs` commands print too.

Store rows are hostile input: every name, text and argument printed goes through
`safe_text`, and an exported trace's DEL and C1 controls are escaped.
"""

from __future__ import annotations

import argparse
import io
import re
import shlex
import time
from collections.abc import Iterator, Sequence
from typing import Any

from helikon.cli.store import open_cli_store, store_errors, with_store
from helikon.cli.usage import encoded, write_output
from helikon.core.approvals import ApprovalRequest
from helikon.core.state import NeedsApproval
from helikon.durable import RunInfo, StoredRun, export_trace
from helikon.durable.records import StepRecord
from helikon.durable.views import pending_of, spent_of, timeline_of
from helikon.export.console import EventPrinter, safe_text

TEMPORAL_OWNER = "temporal:"
"""How the lease of a run a Temporal workflow drives is named (helikon.temporal.writes)."""


def when(stamp: Any) -> str:
    """A store's timestamp as local time (a row's own text if it is no timestamp)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(stamp)))
    except (TypeError, ValueError, OverflowError, OSError):
        return safe_text(str(stamp))


def lease_expired(info: RunInfo, now: float | None = None) -> bool:
    """No live owner holds the run's lease (a row's own text for the time counts as none)."""
    try:
        expires = float(info.lease_expires_at) if info.lease_expires_at is not None else None
    except (TypeError, ValueError):
        return True
    return expires is None or expires <= (time.time() if now is None else now)


# ---------------------------------------------------------------- runs list


def runs_table(runs: Sequence[RunInfo]) -> str:
    """The runs as aligned text: run id, agent, phase, status, turns, updated."""
    header = ("run id", "agent", "phase", "status", "turns", "updated")
    rows = [
        (
            *(safe_text(str(part)) for part in (r.run_id, r.agent, r.phase, r.status, r.turns)),
            when(r.updated_at),
        )
        for r in runs
    ]
    widths = [max(len(cells[i]) for cells in (header, *rows)) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*cells).rstrip() for cells in (header, *rows))


def command_list(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    with store_errors():
        runs = store.runs(args.status, include_nested=args.all)
    if not runs:
        which = f"{args.status} " if args.status else ""
        print(f"no {which}runs in {safe_text(store.url)}")
        return 0
    print(runs_table(runs))
    return 0


# ---------------------------------------------------------------- runs show


def command_show(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    with store_errors():
        stored = store.get(args.run_id)
        nested = [r for r in store.runs(include_nested=True) if r.parent_run_id == args.run_id]
    header, info = stored.header, stored.info
    state = stored.records[-1].state_after if stored.records else None
    print(
        f"run {safe_text(header.run_id)}  agent {safe_text(header.agent)}  chart "
        f"{safe_text(header.chart)} {header.chart_digest[:12]}"
    )
    phase = state.phase if state is not None else "not started"
    print(
        f"status {safe_text(info.status)}  phase {safe_text(phase)}  step {len(stored.records)}"
        f"  turns {safe_text(str(info.turns))}"
    )
    print(f"created {when(info.created_at)}  updated {when(info.updated_at)}")
    for line in _relations(stored.header.parent_run_id, info, nested):
        print(line)
    show_pending(pending_of(stored), args, info.lease_owner)
    _show_spent(stored, args)
    show_timeline(stored, args.events)
    return 0


def show_timeline(stored: StoredRun, last: int) -> None:
    """Print a stored run's `last` events as a live run prints them, told each step that
    led to them: the phase it entered, an effect's result, how long the effect before it
    took, and where the run was resumed."""
    timeline = timeline_of(stored)
    entries: list[tuple[StepRecord | None, Any]] = []
    for entry in timeline:
        if isinstance(entry, StepRecord):
            entries.append((entry, None))
            entries += [(None, event) for event in entry.events]
        else:
            entries.append((None, entry.event))
    events = sum(1 for record, _ in entries if record is None)
    count = min(last, events) if last > 0 else 0
    start = len(entries)
    while count and start:  # back to the `last`th event from the end, and its steps
        start -= 1
        count -= entries[start][0] is None
    while start and entries[start - 1][0] is not None:
        start -= 1
    shown = entries[start:] if last > 0 else []
    print(f"last events ({sum(r is None for r, _ in shown)} of {events}):")
    printer = EventPrinter()
    for record, _ in entries[:start]:  # a pause before a resumption counts from the last
        if record is not None and record.time is not None:  # step, shown or not
            printer.at = record.time.at
    for record, event in shown:
        if record is not None:
            printer.step(record.state_after, record.input, record.time)
        else:
            printer(event)


def _relations(parent: str | None, info: RunInfo, nested: Sequence[RunInfo]) -> Iterator[str]:
    if parent is not None:
        yield f"nested in {safe_text(parent)}"
    if info.lease_owner is not None:
        owner = safe_text(str(info.lease_owner))
        if lease_expired(info):
            gone = " (helikon runs recover --chart CHART resumes it)"
            yield f"lease {owner}, expired at {when(info.lease_expires_at)}" + (
                gone if info.status == "running" else ""
            )
        else:
            yield f"lease {owner}, until {when(info.lease_expires_at)}"
    for run in nested:
        agent, status = safe_text(str(run.agent)), safe_text(str(run.status))
        yield f"nested run {safe_text(run.run_id)} ({agent}, {status})"


def show_pending(
    pending: Sequence[ApprovalRequest], args: argparse.Namespace, owner: object = None
) -> None:
    """Print the approvals a suspended run waits on, and how to decide them: a resume here,
    or the decide update of the Temporal workflow that owns it."""
    if not pending:
        return
    if isinstance(owner, str) and owner.startswith(TEMPORAL_OWNER):
        how = "its Temporal workflow owns it: decide with the workflow's decide update"
        print(f"pending approvals ({len(pending)}); {how} (helikon.temporal.decide)")
    else:
        print(
            f"pending approvals ({len(pending)}); decide with: helikon runs resume "
            f"{shlex.quote(safe_text(args.run_id))} --chart CHART --approve all|none|ask"
            f"{with_store(args)}"
        )
    for request in pending:
        tool_call = request.call  # the model chose the name and the arguments: escaped
        name, arguments = safe_text(tool_call.name), safe_text(tool_call.arguments)
        print(f"  {safe_text(tool_call.call_id)}  {name}({arguments})")
        print(f"    arguments hash {safe_text(request.arguments_hash)}")


def _show_spent(stored: StoredRun, args: argparse.Namespace) -> None:
    """The decisions a resume spent at this suspension before it stopped (killed before its
    next step): not pending any more, applied by the next resume."""
    spent = spent_of(stored)
    if not spent:
        return
    print(
        f"decided, not applied yet ({len(spent)}): the resume that spent them stopped; "
        f"helikon runs resume {shlex.quote(safe_text(args.run_id))} --chart CHART goes on "
        f"with them{with_store(args)}"
    )
    state = stored.records[-1].state_after
    assert isinstance(state, NeedsApproval)  # spent_of found decisions: the run waits
    calls = {request.call.call_id: request.call for request in state.pending}
    for decision in spent:  # the store took each only for a call of this suspension
        found = calls[decision.call_id]
        called = f"{safe_text(found.name)}({safe_text(found.arguments)})"
        verdict = "approved" if decision.approved else "rejected"
        print(f"  {safe_text(decision.call_id)}  {called}  {verdict}")


# ---------------------------------------------------------------- runs export


def command_export(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    if args.output not in (None, "-"):
        with store_errors():
            count = export_trace(store, args.run_id, args.output)
        print(f"wrote {count} lines to {args.output}")
        return 0
    out = io.StringIO()
    with store_errors():
        export_trace(store, args.run_id, out)
    write_output(encoded(_terminal_safe_json(out.getvalue())), None)
    return 0


def _terminal_safe_json(text: str) -> str:
    """JSON lines with DEL and the C1 controls (which JSON may leave raw, and which a
    terminal obeys) written as `\\u` escapes: the same JSON, safe on a terminal."""
    return re.sub("[\x7f-\x9f]", lambda found: f"\\u{ord(found[0]):04x}", text)
