"""`helikon runs resume` and `recover`: driving stored runs on with the agent of the chart
given on the command line (nothing is imported because a store row names it: the store
checks it is the run's agent, chart and tool set); and the hints that say how to go on with
a run, which `helikon run` prints too.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from collections.abc import Sequence
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
from helikon.cli.runs.reading import lease_expired, show_pending
from helikon.cli.store import open_cli_store, store_errors, with_store
from helikon.cli.usage import UsageError
from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.durable import RunInfo, RunStore, StoreError
from helikon.durable.views import pending_of, spent_of
from helikon.export.console import EventPrinter, StepNotes, safe_text
from helikon.run.journal import forking_refusal

# ---------------------------------------------------------------- runs resume


def command_resume(args: argparse.Namespace) -> int:
    require_model(args.offline, "runs resume")  # before asking for decisions on a terminal
    store = open_cli_store(args)
    module = chart_module(args.chart)
    with store_errors():
        stored = store.get(args.run_id)
    refusal = forking_refusal(args.run_id, stored.info.lease_owner)
    if refusal is not None:  # before its approvals: an unfinished fork is never resumed
        raise UsageError(refusal)
    pending = pending_of(stored)
    decisions = decide(pending, args.approve)
    if decisions is None:
        show_pending(pending, args)
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


# ---------------------------------------------------------------- how to go on


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


# ---------------------------------------------------------------- runs recover


def command_recover(args: argparse.Namespace) -> int:
    require_model(args.offline, "runs recover")
    store = open_cli_store(args)
    module = chart_module(args.chart)
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


# ---------------------------------------------------------------- the chart's agent


def chart_module(chart: str) -> Any:
    """The chart module `--chart` names, which must define `agent(model)`.

    Raises:
        UsageError: it cannot be loaded, or defines no agent.
    """
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
