"""`helikon runs fork`, `delete` and `prune`: changing what a run store keeps, running
nothing (a fork is written and left suspended, for `runs resume`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
from collections.abc import Sequence

from helikon.cli.agents import chart_context
from helikon.cli.loading import call
from helikon.cli.runs.reading import lease_expired, when
from helikon.cli.runs.resuming import chart_module
from helikon.cli.store import open_cli_store, store_errors, with_store
from helikon.cli.usage import UsageError
from helikon.debug.debugger import Debugger, DebuggerError
from helikon.debug.fork import calls_answer, decisions, effect_answer, text_answer, tool_answer
from helikon.debug.stored_fork import Edit, fork_stored
from helikon.durable import RunInfo
from helikon.export.console import safe_text
from helikon.models.scripted import ScriptedModel
from helikon.run.journal import FORKING, copier_gone

# ---------------------------------------------------------------- runs fork


def command_fork(args: argparse.Namespace) -> int:
    """`helikon runs fork`: the fork is written and left suspended; nothing runs."""
    store = open_cli_store(args)
    agent = context = None
    if args.edit:
        if not args.chart:
            raise UsageError("an edited fork computes its next step: give --chart CHART")
        module = chart_module(args.chart)
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


# ---------------------------------------------------------------- runs delete, prune


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
