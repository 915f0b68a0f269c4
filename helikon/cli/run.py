"""`helikon run` and `helikon demo`: run a chart module's agent, streaming its events."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from helikon.cli.agents import add_agent_arguments, live_agent
from helikon.cli.loading import CHARTS, LoadError, load_module
from helikon.cli.usage import UsageError
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.export.console import EventPrinter
from helikon.run.driver import Run
from helikon.run.results import RunResultStreaming
from helikon.trace import TraceWriter

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
    run.set_defaults(handler=command_run)


async def run_agent(module: Any, args: argparse.Namespace) -> int:
    """Run the chart module's agent, streaming its events readably; 1 if the run failed."""
    live = live_agent(module, args, "run")
    agent = live.agent
    printer = EventPrinter()
    printer.line(printer.paint(f"> {live.text}", "bold"))

    trace = getattr(args, "trace", None)
    writer = TraceWriter(trace, source=live.source) if trace else None
    try:
        run = Run(agent, input=live.text, context=live.context, trace=writer)
        last: Any = None
        async for event in RunResultStreaming(run, timeout=agent.config.timeout):
            printer(event)
            last = event
    finally:
        if writer is not None:
            writer.close()
        close = getattr(agent.model, "aclose", None)  # a real model's HTTP clients
        if close is not None:
            await close()
    return 1 if last is not None and last.type == "run_failed" else 0


def command_run(args: argparse.Namespace) -> int:
    try:
        module = load_module(args.chart)
        return asyncio.run(run_agent(module, args))
    except LoadError as exc:  # the chart file, or its agent(), script() or deps(), failed
        raise UsageError(str(exc)) from None


def command_demo(args: argparse.Namespace) -> int:
    args.chart = str(CHARTS / DEMO_CHART)
    args.offline, args.model = True, None
    args.approve, args.trace = "all", None
    print(f"helikon demo: {DEMO_CHART} offline, with a scripted model\n")
    code = command_run(args)
    print(
        f"\nThe loop that ran: {len(DEFAULT_TABLE.rows)} rows compiled from the default chart "
        "(`helikon table` prints them)."
    )
    return code
