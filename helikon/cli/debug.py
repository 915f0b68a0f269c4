"""`helikon debug`: its arguments, and opening a `DebugShell` live or on a recorded trace.

`helikon debug` fails with one line and status 2 when its chart or trace cannot be used (a
missing or corrupt trace, a chart that cannot be loaded); inside the session, a mistaken
command prints one `error:` line and the session goes on.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from helikon.cli.agents import (
    NoModel,
    add_agent_arguments,
    chart_context,
    live_agent,
    model_for,
    model_set_up,
    scripted_note,
)
from helikon.cli.loading import LoadError, call, load_module
from helikon.cli.usage import UsageError
from helikon.debug.debugger import Debugger, DebuggerError
from helikon.debug.repl import DebugShell
from helikon.durable import StoreError, open_store, stored_trace
from helikon.export.console import safe_text
from helikon.trace import Trace, TraceError, read_trace


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `helikon debug` to the `helikon` command line's subcommands."""
    debug = commands.add_parser(
        "debug",
        help="step through a run: breakpoints, rewind, fork (live or from a trace)",
        description="Debug an agent live (helikon debug CHART --input ...) or replay a "
        "recorded run (helikon debug --trace T.jsonl [--chart CHART]) or a stored one "
        "(helikon debug --store URL RUN_ID [--chart CHART]).",
    )

    add_agent_arguments(debug, optional=True)
    debug.add_argument(
        "--approve",
        choices=("ask", "all", "none"),
        default="ask",
        help="how to answer approvals (ask: prompt on a terminal, else suspend)",
    )
    debug.add_argument("--trace", metavar="T.jsonl", help="replay this recorded run")
    debug.add_argument(
        "--store",
        metavar="URL",
        help="replay a stored run: helikon debug --store URL RUN_ID (no trace file needed)",
    )
    debug.add_argument(
        "--chart",
        dest="replay_chart",
        metavar="CHART",
        help="with --trace: the chart the run used, to compute steps again, fork and go live "
        "(default: step through the trace as recorded; nothing is imported)",
    )
    debug.set_defaults(handler=command_debug)


def command_debug(args: argparse.Namespace) -> int:
    """`helikon debug`: open the session the arguments describe and run its prompt.

    Returns:
        0 when the session ends; 2, after one `helikon: ...` line on stderr, when the chart
        or trace cannot be used (reported here, so no caller has to know the error types).
    """

    try:
        if args.store:
            shell = open_stored(args)
        elif args.trace:
            shell = open_replay(args)
        else:
            shell = open_live(args)
    except (UsageError, LoadError, TraceError, DebuggerError, StoreError) as exc:
        print(f"helikon: {exc}", file=sys.stderr)
        return 2
    with shell:
        return shell.run()


def open_live(args: argparse.Namespace) -> DebugShell:
    """A shell over a new run of the agent the chart file defines."""

    if not args.chart:
        raise UsageError("name a chart to debug (helikon debug CHART) or a trace (--trace T)")
    module = load_module(args.chart)
    live = live_agent(module, args, "debug")
    debugger = Debugger.live(live.agent, live.text, context=live.context, source=live.source)
    script = list(module.script()) if args.offline else None
    how = "offline, the chart's scripted model" if args.offline else "live, a real model"
    return DebugShell(debugger, script=script, title=f"{args.chart} ({how})")


def open_replay(args: argparse.Namespace) -> DebugShell:
    """A shell replaying the trace `args.trace`: as recorded, or on the agent of --chart.

    Nothing a trace names is imported: without --chart the replay shows the recorded steps
    on the chart the trace recorded; with it, each step is computed again and checked, and
    the session can fork and continue live.
    """

    if args.input:
        raise UsageError("--input is for live runs; a trace replays the input it recorded")
    return replay_shell(read_trace(args.trace), args.trace, args.replay_chart or args.chart, args)


def open_stored(args: argparse.Namespace) -> DebugShell:
    """A shell replaying the stored run `RUN_ID` of `--store URL`, as `open_replay` does a
    trace: nothing the store names is imported; `--chart CHART` is the agent to go live on.
    """

    if args.trace:
        raise UsageError("replay a trace (--trace) or a stored run (--store), not both")
    if args.input:
        raise UsageError("--input is for live runs; a stored run replays the input it recorded")
    if not args.chart:
        raise UsageError("name the stored run to debug: helikon debug --store URL RUN_ID")
    store = open_store(args.store)
    try:
        trace = stored_trace(store, args.chart)
    finally:
        store.close()
    name = f"run {safe_text(args.chart)} of {safe_text(args.store)}"
    return replay_shell(trace, name, args.replay_chart, args)


def replay_shell(
    trace: Trace, name: str, target: str | None, args: argparse.Namespace
) -> DebugShell:
    """A shell replaying `trace` (named `name` in its title): as recorded, or on the agent
    of the chart file `target`."""

    if not target:
        debugger = Debugger.replay(trace)
        steps = len(debugger.expected)
        return DebugShell(debugger, title=f"replay of {name} ({steps} steps, as recorded)")
    module = _agent_module(target)
    model = _fork_model(module, args)
    debugger = Debugger.replay(trace, call(module, "agent", model), context=chart_context(module))
    script = list(module.script()) if args.offline else None
    title = f"replay of {name} ({len(debugger.expected)} steps){scripted_note(args.offline)}"
    return DebugShell(debugger, script=script, title=title)


def _fork_model(module: Any, args: argparse.Namespace) -> Any:
    """The model a fork that goes live calls: the chart's script with --offline, else a
    real one; with none set up the replay still opens (it calls no model), and the fork's
    first model call says so (`NoModel`)."""

    if args.offline or model_set_up():
        return model_for(module, args.offline, args.model, "debug")
    return NoModel("debug")


def _agent_module(target: str) -> Any:

    module = load_module(target)
    if not hasattr(module, "agent"):
        raise UsageError(f"{target} defines no agent(model) to debug")
    return module
