"""`helikon run` and `helikon demo`: run a chart module's agent, streaming its events.

A run is kept in a run store (`--store URL`, default $HELIKON_STORE, else the embedded
`sqlite:///.helikon/runs.db`; `--store none` for an ephemeral run), so a suspended or
interrupted run goes on with `helikon runs resume`. The demo is always ephemeral.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
from typing import Any

from helikon.cli.agents import add_agent_arguments, live_agent, scripted_note
from helikon.cli.loading import CHARTS, LoadError, load_module
from helikon.cli.runs.resuming import resume_hint, stopped_by_its_store
from helikon.cli.store import add_store_argument, store_errors, store_url, with_store
from helikon.cli.temporal import add_temporal_arguments, command_run_temporal
from helikon.cli.usage import UsageError
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.durable import RunNotFound, RunStore, open_store
from helikon.export.console import EventPrinter, StepNotes, safe_text
from helikon.run.driver import Run
from helikon.run.results import RunResultStreaming
from helikon.trace import Sinks, TraceWriter

DEMO_CHART = "budget_assistant.py"


def add_parsers(commands: Any) -> None:
    """Add `demo` and `run` to `commands` (`ArgumentParser.add_subparsers()`)."""
    demo = commands.add_parser("demo", help="run the budget assistant offline")
    demo.add_argument("--input", help="what to ask (default: the chart's example)")
    demo.set_defaults(handler=command_demo)

    run = commands.add_parser("run", help="run an agent from charts/<file>.py")
    add_agent_arguments(run)
    run.add_argument(
        "--approve",
        choices=("ask", "all", "none"),
        default="ask",
        help="how to answer approvals (ask: prompt on a terminal, else suspend)",
    )
    run.add_argument("--trace", metavar="OUT.jsonl", help="record every transition here")
    add_store_argument(run, ephemeral=True)
    run.add_argument("--run-id", metavar="ID", help="the run's id (default: a fresh one)")
    add_temporal_arguments(run, required=False)
    run.set_defaults(handler=command_run)


async def run_agent(module: Any, args: argparse.Namespace) -> int:
    """Run the chart module's agent, streaming its events readably; 1 if the run failed."""
    live = live_agent(module, args, "run")
    agent = live.agent
    store = _new_store(args)
    printer = EventPrinter()
    printer.line(printer.paint(f"> {live.text}{scripted_note(args.offline)}", "bold"))

    trace = getattr(args, "trace", None)
    writer = TraceWriter(trace, source=live.source) if trace else None
    try:
        run = Run(agent, input=live.text, context=live.context, store=store, run_id=args.run_id)
        notes = StepNotes(printer, run.run_id)  # the phases and effect results it prints
        run.trace = Sinks(writer, notes) if writer is not None else notes
        last: Any = None
        with store_errors():
            async for event in RunResultStreaming(run, timeout=agent.config.timeout):
                printer(event)
                last = event
    finally:
        if writer is not None:
            writer.close()
        close = getattr(agent.model, "aclose", None)  # a real model's HTTP clients
        if close is not None:
            await close()
        if store is not None:
            store.close()
    if store is not None:
        stopped_by_its_store(run.run_id, last, args)
        printer.line(_kept(run.run_id, store, last, args))
    return 1 if last is not None and last.type == "run_failed" else 0


def _kept(run_id: str, store: RunStore, last: Any, args: argparse.Namespace) -> str:
    """Where the run is kept, and how to go on with it when it suspended."""
    if last is not None and last.type == "run_suspended":
        return resume_hint(run_id, args)
    show = f"helikon runs show {shlex.quote(run_id)}{with_store(args)}"
    return f"run {safe_text(run_id)} kept in {safe_text(store.url)} ({safe_text(show)})"


def _new_store(args: argparse.Namespace) -> RunStore | None:
    """The store the run is kept in (None: ephemeral); a `--run-id` it holds is refused
    before the run starts."""
    url = store_url(args)
    if url is None:
        return None
    with store_errors():
        store = open_store(url)
        if not args.run_id:
            return store
        try:
            store.header(args.run_id)
        except RunNotFound:
            return store
    store.close()
    raise UsageError(
        f"a run {args.run_id!r} is already in {url}: give another --run-id "
        f"(helikon runs show {shlex.quote(args.run_id)}{with_store(args)} shows that one)"
    )


def command_run(args: argparse.Namespace) -> int:
    if getattr(args, "temporal", None):
        return command_run_temporal(args)
    try:
        module = load_module(args.chart)
        return asyncio.run(run_agent(module, args))
    except LoadError as exc:  # the chart file, or its agent(), script() or deps(), failed
        raise UsageError(str(exc)) from None


def command_demo(args: argparse.Namespace) -> int:
    args.chart = str(CHARTS / DEMO_CHART)
    args.offline, args.model = True, None
    args.approve, args.trace = "all", None
    args.store, args.run_id = "none", None
    print(f"helikon demo: {DEMO_CHART} offline, with a scripted model\n")
    code = command_run(args)
    declared = sum(1 for row in DEFAULT_TABLE.rows if not row.implicit)
    implicit = len(DEFAULT_TABLE.rows) - declared
    print(
        f"\nThe loop that ran: the default chart, {declared} declared rows "
        f"(`helikon table` prints them), and {implicit} implicit ones that make the table "
        f"total, {len(DEFAULT_TABLE.rows)} in all (`helikon table --implicit`)."
    )
    return code
