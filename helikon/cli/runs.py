"""`helikon runs`: what a run store keeps (list, show, export, delete, prune), and driving its
runs on (resume, recover); and `--store`, which `helikon run` takes too.

    helikon runs list [--status S] [--all]        helikon runs show RUN_ID [--events N]
    helikon runs resume RUN_ID --chart CHART [--approve all|none|ask] [--offline] [--force]
    helikon runs recover --chart CHART            helikon runs export RUN_ID [-o OUT.jsonl]
    helikon runs delete RUN_ID                    helikon runs prune --older-than 30d
    helikon runs fork RUN_ID --at SEQ [--edit KIND ARGS... --chart CHART]

Every command takes `--store URL` (default $HELIKON_STORE, else `sqlite:///.helikon/runs.db`,
relative to the current directory). Nothing is ever imported because a store row names it:
`resume` and `recover` run the agent of the chart given on the command line, and the store
checks it is the run's agent, chart and tool set. Store rows are hostile input: every name,
text and argument printed goes through `safe_text`. A store that does not check out, a run
that is not there, a run another driver holds, a run its store failed (`StoreFailed`): one
line, exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import io
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from helikon.cli.agents import (
    approval_handler,
    chart_context,
    model_for,
    require_model,
    scripted_note,
)
from helikon.cli.loading import LoadError, call, load_module, module_label
from helikon.cli.usage import UsageError, encoded, write_output
from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.state import NeedsApproval
from helikon.debug.debugger import Debugger, DebuggerError
from helikon.debug.fork import calls_answer, decisions, effect_answer, text_answer, tool_answer
from helikon.debug.stored_fork import Edit, fork_stored
from helikon.durable import (
    RunInfo,
    RunLeased,
    RunStore,
    StoredRun,
    StoreError,
    export_trace,
    open_store,
)
from helikon.durable.views import events_of, pending_of, spent_of
from helikon.export.console import EventPrinter, StepNotes, safe_text
from helikon.models.scripted import ScriptedModel
from helikon.run.journal import FORKING, copier_gone, forking_refusal
from helikon.run.snapshot import ApprovalMismatch, SnapshotMismatch

DEFAULT_STORE = "sqlite:///.helikon/runs.db"
STORE_ENV = "HELIKON_STORE"
STATUSES = ("running", "suspended", "completed", "failed")
DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


# ---------------------------------------------------------------- the store


def add_store_argument(command: argparse.ArgumentParser, *, ephemeral: bool = False) -> None:
    """`--store URL`; with `ephemeral`, `--store none` runs without one."""
    none = "; none: an ephemeral run, kept nowhere" if ephemeral else ""
    command.add_argument(
        "--store",
        metavar="URL",
        help=f"the run store (default ${STORE_ENV}, else {DEFAULT_STORE}{none})",
    )


def store_url(args: argparse.Namespace) -> str | None:
    """The store URL the command line names, or None for `none`."""
    url: str = args.store or os.environ.get(STORE_ENV) or DEFAULT_STORE
    return None if url.strip().lower() == "none" else url


def open_cli_store(args: argparse.Namespace) -> RunStore:
    """The store a `runs` command works on.

    Raises:
        UsageError: `none`, or the store cannot be opened.
    """
    url = store_url(args)
    if url is None:
        raise UsageError(f"helikon runs {args.runs_command} needs a run store, not --store none")
    with store_errors():
        store = open_store(url)
    vars(args).setdefault("_stores", []).append(store)  # closed when the command ends
    return store


@contextmanager
def store_errors() -> Iterator[None]:
    """A store's refusal (and a run that cannot resume) as one line: a UsageError."""
    try:
        yield
    except RunLeased as exc:  # the store's message says `force=True`; here it is --force
        held = str(exc).split(" (its lease)")[0]
        raise UsageError(
            f"{held} (its lease): resume it after that, or with --force if that owner is known dead"
        ) from None
    except (StoreError, SnapshotMismatch, ApprovalMismatch) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise UsageError(first if len(first) <= 300 else first[:299] + "…") from None


def with_store(args: argparse.Namespace) -> str:
    """`--store URL` as the user gave it, to repeat in a hint (empty for the default)."""
    return f" --store {safe_text(shlex.quote(args.store))}" if args.store else ""


# ---------------------------------------------------------------- the parser


def add_parser(commands: Any) -> None:
    """Add `runs` and its subcommands to `commands` (`ArgumentParser.add_subparsers()`)."""
    runs = commands.add_parser("runs", help="list, show, resume, export and prune stored runs")
    sub = runs.add_subparsers(dest="runs_command", required=True)

    listing = _command(sub, "list", "the runs in the store, newest first", command_list)
    listing.add_argument("--status", choices=STATUSES, help="only runs of this status")
    listing.add_argument("--all", action="store_true", help="nested runs too")

    show = _command(sub, "show", "a run: its state, pending approvals, last events", command_show)
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--events", type=int, default=10, metavar="N", help="last N (default 10)")

    resume = _command(sub, "resume", "continue a run with the agent of CHART", command_resume)
    resume.add_argument("run_id", metavar="RUN_ID")
    _add_driving_arguments(resume)
    resume.add_argument(
        "--force", action="store_true", help="take the run's lease from an owner known dead"
    )

    recover = _command(
        sub, "recover", "resume every run of CHART's agent whose owner died", command_recover
    )
    _add_driving_arguments(recover)

    export = _command(sub, "export", "write a run (and its nested runs) as a trace", command_export)
    export.add_argument("run_id", metavar="RUN_ID")
    export.add_argument("-o", "--output", help="the trace file to write (default: stdout)")

    fork = _command(
        sub, "fork", "a new run sharing RUN_ID's records up to SEQ, to resume", command_fork
    )
    fork.add_argument("run_id", metavar="RUN_ID")
    fork.add_argument("--at", required=True, type=int, metavar="SEQ", help="the last seq shared")
    fork.add_argument(
        "--edit",
        nargs="+",
        metavar="WORD",
        help='replace the next input: text "ANSWER" | calls \'[{"call_id": ..., "name": ..., '
        '"arguments": ...}]\' | tool CALL_ID "RESULT" ... | effect JSON | approve [CALL_ID ...] '
        "| reject [CALL_ID ...] (needs --chart)",
    )
    fork.add_argument(
        "--chart", help="with --edit: the chart file whose agent ran the run (to compute the step)"
    )

    delete = _command(sub, "delete", "delete a run and the runs nested in it", command_delete)
    delete.add_argument("run_id", metavar="RUN_ID")
    delete.add_argument(
        "--force", action="store_true", help="delete it even while a live owner drives it"
    )

    prune = _command(sub, "prune", "delete runs not updated for a while", command_prune)
    prune.add_argument(
        "--older-than", required=True, metavar="AGE", type=duration, help="e.g. 90s, 12h, 30d"
    )


def _command(sub: Any, name: str, help: str, handler: Any) -> argparse.ArgumentParser:
    command: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
    add_store_argument(command)
    command.set_defaults(handler=_closing(handler))
    return command


def _closing(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`handler`, closing the stores it opened (`open_cli_store`) when it returns or raises."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        finally:
            for store in vars(args).pop("_stores", ()):
                store.close()

    return run


def _add_driving_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--chart", required=True, help="the chart file whose agent ran the run")
    command.add_argument(
        "--approve",
        choices=("ask", "all", "none"),
        default="ask",
        help="decide approvals (ask: prompt on a terminal, else leave the run suspended)",
    )
    command.add_argument("--offline", action="store_true", help="use the scripted model")
    command.add_argument("--model", help="model name for a real endpoint")


def duration(text: str) -> float:
    """`90s`, `15m`, `12h`, `30d` in seconds (argparse's `type=`)."""
    found = DURATION.fullmatch(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age: use e.g. 90s, 15m, 12h, 30d")
    return float(found[1]) * SECONDS[found[2]]


# ---------------------------------------------------------------- reading


def when(stamp: Any) -> str:
    """A store's timestamp as local time (a row's own text if it is no timestamp)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(stamp)))
    except (TypeError, ValueError, OverflowError, OSError):
        return safe_text(str(stamp))


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
    _show_pending(pending_of(stored), args, info.lease_owner)
    _show_spent(stored, args)
    events = events_of(stored)
    shown = events[-args.events :] if args.events > 0 else []
    print(f"last events ({len(shown)} of {len(events)}):")
    printer = EventPrinter()
    for event in shown:
        printer(event)
    return 0


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


TEMPORAL_OWNER = "temporal:"
"""How the lease of a run a Temporal workflow drives is named (helikon.temporal.writes)."""


def lease_expired(info: RunInfo, now: float | None = None) -> bool:
    """No live owner holds the run's lease (a row's own text for the time counts as none)."""
    try:
        expires = float(info.lease_expires_at) if info.lease_expires_at is not None else None
    except (TypeError, ValueError):
        return True
    return expires is None or expires <= (time.time() if now is None else now)


def _show_pending(
    pending: Sequence[ApprovalRequest], args: argparse.Namespace, owner: object = None
) -> None:
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


def command_fork(args: argparse.Namespace) -> int:
    """`helikon runs fork`: the fork is written and left suspended; nothing runs."""
    store = open_cli_store(args)
    agent = context = None
    if args.edit:
        if not args.chart:
            raise UsageError("an edited fork computes its next step: give --chart CHART")
        module = _chart_module(args.chart)
        agent, context = call(module, "agent", ScriptedModel([])), chart_context(module)
    elif args.chart:
        raise UsageError("--chart is for --edit: a fork without one copies records only")
    edit = None if not args.edit else functools.partial(edit_of, args.edit)
    try:
        with store_errors():
            fork_id = asyncio.run(
                fork_stored(store, args.run_id, args.at, edit=edit, agent=agent, context=context)
            )
    except DebuggerError as exc:
        raise UsageError(str(exc)) from None
    print(
        f"run {safe_text(fork_id)} forked from {safe_text(args.run_id)} at seq {args.at} "
        f"(helikon runs resume {safe_text(fork_id)} --chart CHART{with_store(args)})"
    )
    return 0


def edit_of(words: Sequence[str], debugger: Debugger) -> Edit:
    """The input `--edit WORDS` names, for the replay at the fork point."""
    kind, args = words[0], list(words[1:])
    if kind == "text" and len(args) == 1:
        return text_answer(debugger, args[0])
    if kind == "calls" and len(args) == 1:
        return calls_answer(debugger, args[0])
    if kind == "tool" and args and len(args) % 2 == 0:
        return tool_answer(debugger, args)
    if kind == "effect" and len(args) == 1:
        return effect_answer(debugger, args[0])
    if kind in ("approve", "reject"):
        return decisions(debugger, approve=kind == "approve", named=args)
    raise DebuggerError(
        'usage: --edit text "ANSWER" | --edit calls JSON | --edit tool CALL_ID "RESULT" ... | '
        "--edit effect JSON | --edit approve [CALL_ID ...] | --edit reject [CALL_ID ...]"
    )


def command_delete(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    with store_errors():
        # The listing, not `get`: a run whose rows do not check out can still be deleted.
        held = [
            run
            for run in store.runs(include_nested=True)
            if run.run_id == args.run_id and run.lease_owner is not None and not lease_expired(run)
        ]
        if held and not args.force and not copier_gone(held[0].lease_owner):
            raise UsageError(_delete_refusal(held[0]))
        gone = store.delete(args.run_id)
    nested = f" and {gone - 1} nested run{'s' if gone > 2 else ''}" if gone > 1 else ""
    print(f"deleted run {safe_text(args.run_id)}{nested}")
    return 0


def _delete_refusal(run: RunInfo) -> str:
    """Why `runs delete` (without --force) leaves `run`, whose lease a live owner holds."""
    owner, run_id = safe_text(str(run.lease_owner)), safe_text(repr(run.run_id))
    if owner.startswith(FORKING):  # a fork's copy never expires: its process must end
        return (
            f"run {run_id} is a fork still being copied by process {owner[len(FORKING) :]}: "
            "delete it once that process has ended, or with --force if it died"
        )
    return (
        f"run {run_id} is driven by {owner} until {when(run.lease_expires_at)} (its lease): "
        "delete it after that, or with --force"
    )


def command_prune(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    with store_errors():
        gone = store.prune(args.older_than)
    print(f"pruned {gone} run{'' if gone == 1 else 's'} not updated for {args.older_than:g}s")
    return 0


# ---------------------------------------------------------------- driving runs on


def command_resume(args: argparse.Namespace) -> int:
    require_model(args.offline, "runs resume")  # before asking for decisions on a terminal
    store = open_cli_store(args)
    module = _chart_module(args.chart)
    with store_errors():
        stored = store.get(args.run_id)
    refusal = forking_refusal(args.run_id, stored.info.lease_owner)
    if refusal is not None:  # before its approvals: an unfinished fork is never resumed
        raise UsageError(refusal)
    pending = pending_of(stored)
    decisions = decide(pending, args.approve)
    if decisions is None:
        _show_pending(pending, args)
        print(f"run {safe_text(args.run_id)} is left suspended (no terminal to ask on)")
        return 0
    for spent in spent_of(stored):
        verdict = "approved" if spent.approved else "rejected"
        print(
            f"going on with call {safe_text(spent.call_id)} {verdict}: decided by a resume "
            "that stopped before its next step"
        )
    return asyncio.run(resume_run(store, module, args, args.run_id, decisions, args.force))


def decide(pending: Sequence[ApprovalRequest], mode: str) -> tuple[ApprovalDecision, ...] | None:
    """Decisions on `pending` as `--approve` asks (None: leave the run suspended)."""
    if not pending:
        return ()
    handler = approval_handler(mode)
    if handler is None:
        return None
    return tuple(
        request.approve() if handler(request, None) else request.reject() for request in pending
    )


async def resume_run(
    store: RunStore,
    module: Any,
    args: argparse.Namespace,
    run_id: str,
    decisions: Sequence[ApprovalDecision],
    force: bool = False,
) -> int:
    """Resume `run_id` with the chart module's agent, streaming its events; 1 if it failed."""
    agent = _agent(module, args)
    printer = EventPrinter()
    last: Any = None
    try:
        with store_errors():
            notes = StepNotes(printer, run_id)  # the phases and effect results it prints
            result = agent.resume(
                run_id,
                decisions,
                store=store,
                force=force,
                context=chart_context(module),
                trace=notes,
            )
            async for event in result:
                if last is None:  # the run's lease is held now: it goes on
                    header = f"> resuming run {safe_text(run_id)}{scripted_note(args.offline)}"
                    printer.line(printer.paint(header, "bold"))
                printer(event)
                last = event
    finally:
        close = getattr(agent.model, "aclose", None)  # a real model's HTTP clients
        if close is not None:
            await close()
    stopped_by_its_store(run_id, last, args)
    if last is not None and last.type == "run_suspended":
        printer.line(resume_hint(run_id, args))
    return 1 if last is not None and last.type == "run_failed" else 0


def stopped_by_its_store(run_id: str, last: Any, args: argparse.Namespace) -> None:
    """A run that failed because its store failed a write (`StoreFailed`) stopped on the
    store's error, not its own: one line, exit status 2, saying how to go on.

    Raises:
        UsageError: the run's last event is such a `RunFailed`.
    """
    if last is None or last.type != "run_failed" or last.error.kind != "store_failed":
        return
    error = last.error
    if error.reason == "LeaseLost":  # another driver has it: nothing to resume here
        raise UsageError(error.message)
    command = resume_command(run_id, args)
    raise UsageError(
        f"{error.message}; run {run_id} is kept at its last step: once the store takes "
        f"writes again, resume it with {command}{model_flags(args)} --force{with_store(args)}"
    )


def resume_command(run_id: str, args: argparse.Namespace) -> str:
    """`helikon runs resume RUN_ID --chart CHART` for `run_id` on `args`' chart (quoted for a
    shell, not escaped: the hints that end in it say how)."""
    return f"helikon runs resume {shlex.quote(run_id)} --chart {shlex.quote(args.chart)}"


def resume_hint(run_id: str, args: argparse.Namespace) -> str:
    """How to go on with a suspended run, as a command to type (escaped): on the model it
    ran on (`--offline`, `--model NAME`)."""
    command = resume_command(run_id, args)
    hint = f"run {run_id} is suspended: {command} --approve all{model_flags(args)}"
    return safe_text(hint) + with_store(args)


def model_flags(args: argparse.Namespace) -> str:
    """The model a run ran on, as `runs resume` takes it (`--offline`, `--model NAME`): a
    resume without them is refused when no real model is set up."""
    model = " --offline" if args.offline else ""
    return model + (f" --model {shlex.quote(args.model)}" if args.model else "")


def command_recover(args: argparse.Namespace) -> int:
    require_model(args.offline, "runs recover")
    store = open_cli_store(args)
    module = _chart_module(args.chart)
    name = _agent(module, args).name
    with store_errors():
        running = [r for r in store.runs("running") if r.agent == name]
        stopped = [r for r in store.runs("suspended") if r.agent == name and r.lease_owner]
    now = time.time()
    orphans = [r for r in running if lease_expired(r, now)]
    held = len(running) - len(orphans)
    orphans += [r for r in stopped if lease_expired(r, now) and _decided(store, r.run_id)]
    note = f" ({held} still leased by a live owner)" if held else ""
    if not orphans:
        print(f"nothing to recover: no running run of {safe_text(name)} lost its owner{note}")
        return 0
    plural = "s" if len(orphans) > 1 else ""
    print(f"recovering {len(orphans)} run{plural} of {safe_text(name)}{note}")
    return asyncio.run(_recover_each(store, module, args, orphans))


def _decided(store: RunStore, run_id: str) -> bool:
    """Whether suspended run `run_id` holds decisions a resume spent before its owner died
    (it goes on with them); one that cannot be read is resumed to say why."""
    try:
        return bool(spent_of(store.get(run_id)))
    except StoreError:
        return True


async def _recover_each(
    store: RunStore, module: Any, args: argparse.Namespace, runs: Sequence[RunInfo]
) -> int:
    """Resume each run; one that cannot is reported in a line and the others go on."""
    code = 0
    for run in runs:
        try:
            code = max(code, await resume_run(store, module, args, run.run_id, ()))
        except UsageError as exc:
            print(f"helikon: {safe_text(str(exc))}", file=sys.stderr)
            code = 2
    return code


def _chart_module(chart: str) -> Any:
    try:
        module = load_module(chart)
    except LoadError as exc:
        raise UsageError(str(exc)) from None
    if not hasattr(module, "agent"):
        raise UsageError(f"{module_label(module)} defines no agent(model) to resume")
    return module


def _agent(module: Any, args: argparse.Namespace) -> Any:
    """The chart module's agent, on the model and with the approvals `args` ask for (a
    fresh one for each run: a scripted model continues where its run stopped)."""
    try:
        model = model_for(module, args.offline, args.model, f"runs {args.runs_command}")
        agent = call(module, "agent", model)
    except LoadError as exc:
        raise UsageError(str(exc)) from None
    handler = approval_handler(args.approve)
    return agent if handler is None else replace(agent, on_approval=handler)
