"""`helikon studio`: open a run in the browser, live or replayed from a trace.

    helikon studio CHART [--input TEXT] [--offline] [--model NAME] [--port N]
    helikon studio --trace RUN.jsonl [--chart CHART] [--port N]
    helikon studio --store URL [RUN_ID] [--chart CHART] [--port N]

`add_studio_parser(commands)` adds the command to `helikon`'s subcommands; the handler
builds the debugger, serves it on 127.0.0.1 and prints the URL; Ctrl-C stops it.
Mistakes raise `UsageError` (one line, exit status 2).
"""

from __future__ import annotations

import argparse
import secrets
from dataclasses import replace
from types import ModuleType
from typing import Any

from helikon.cli.agents import (
    add_agent_arguments,
    approval_handler,
    chart_context,
    live_agent,
    model_for,
    scripted_note,
)
from helikon.cli.loading import LoadError, call, load_module
from helikon.cli.usage import UsageError
from helikon.debug.debugger import Debugger, DebuggerError
from helikon.durable import StoreError, open_store
from helikon.models.scripted import ScriptedModel
from helikon.studio.access import LOOPBACK  # the default; any other address needs a token
from helikon.studio.server import StudioServer
from helikon.studio.session import StudioError, ThreadedDebugger
from helikon.studio.stored import StoredRuns
from helikon.trace import TraceError, read_trace

DEFAULT_PORT = 8765


def add_parser(commands: Any) -> None:
    """Add `studio` to `commands`, the result of `ArgumentParser.add_subparsers()`."""
    studio = commands.add_parser(
        "studio",
        help="step a run in the browser: live, or replayed from a trace",
        description=(
            "Serve a debugger page on 127.0.0.1: the chart with the path so far, the "
            "timeline, the state and the conversation; step, continue, go back, break."
        ),
    )

    add_agent_arguments(studio, optional=True)
    studio.add_argument(
        "--approve",
        choices=("all", "none"),
        help="answer approvals (default: the run suspends when one is needed)",
    )
    studio.add_argument("--trace", metavar="RUN.jsonl", help="replay a recorded run instead")
    studio.add_argument(
        "--store",
        metavar="URL",
        help="replay the stored run RUN_ID (default: the newest) and list the store's runs "
        "to pick from; a run still going is followed as its records land",
    )
    studio.add_argument(
        "--chart",
        dest="chart_option",
        metavar="CHART",
        help="with --trace or --store: the chart the run used, to compute its steps again "
        "(default: the steps as recorded; nothing the trace or store names is imported); "
        "with --store, also the agent that resumes a suspended run once its calls are "
        "approved or rejected in the page (on --model, or --offline: the chart's script)",
    )
    studio.add_argument(
        "--host",
        default=LOOPBACK,
        help=f"the address to listen on (default {LOOPBACK}); any other makes the studio "
        "require a token, printed at start, on every request",
    )
    studio.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port on {LOOPBACK} (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    studio.set_defaults(handler=command_studio)


def command_studio(args: argparse.Namespace) -> int:
    """Serve the studio until Ctrl-C."""

    runs = open_runs(args) if args.store else None
    try:
        session = open_session(args) if runs is None else stored_session(runs, args.chart)
    except BaseException:
        if runs is not None:
            runs.close()
        raise
    try:
        token = None if args.host == LOOPBACK else secrets.token_urlsafe(32)
        server = StudioServer(session, host=args.host, port=args.port, runs=runs, token=token)
    except (OSError, StudioError) as exc:
        session.close()
        if runs is not None:
            runs.close()
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {why}") from None
    scripted = scripted_note(args.offline) if session.mode == "live" else ""
    print(f"helikon studio: {server.url}  (Ctrl-C stops){scripted}", flush=True)
    if server.token is not None:
        print(f"helikon studio: token {server.token} (every request needs it)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("\nhelikon studio: stopped", flush=True)
    finally:
        server.close()
    return 0


def open_session(args: argparse.Namespace) -> ThreadedDebugger:
    """The `ThreadedDebugger` the arguments ask for: a replay with `--trace`, else a live run."""

    if args.chart and args.chart_option and args.chart != args.chart_option:
        raise UsageError("name the chart once: as CHART or as --chart")
    chart = args.chart or args.chart_option
    if args.trace:
        if args.input:
            raise UsageError("--input starts a live run; a replay's input is in its trace")
        return replay_session(args.trace, chart)
    if not chart:
        raise UsageError("name a chart to run (helikon studio charts/triage.py) or --trace")
    return live_session(chart, args)


def open_runs(args: argparse.Namespace) -> StoredRuns:
    """The run store `--store URL` names, with the agent of `--chart CHART` (if given) to
    compute the replays' steps again. Nothing the store names is imported."""

    if args.trace or args.input:
        raise UsageError("--store replays a stored run: give no --trace and no --input")
    try:
        store = open_store(args.store)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    if not args.chart_option:
        return StoredRuns(store)
    try:
        module = _load(args.chart_option)
    except UsageError:
        store.close()
        raise
    if not hasattr(module, "agent"):
        store.close()
        raise UsageError(f"{args.chart_option} defines no agent(model) to replay")

    def agent_for() -> tuple[Any, Any]:
        return module.agent(ScriptedModel([])), chart_context(module)  # a replay calls no model

    def resume_with() -> tuple[Any, Any]:  # a decided run goes on: its model is called
        agent = call(module, "agent", model_for(module, args.offline, args.model, "studio"))
        handler = approval_handler(args.approve)
        agent = agent if handler is None else replace(agent, on_approval=handler)
        return agent, chart_context(module)

    return StoredRuns(store, agent_for, resume_with)


def stored_session(runs: StoredRuns, run_id: str | None) -> ThreadedDebugger:
    """The replay of stored run `run_id` (None: the store's newest)."""

    try:
        return runs.session(run_id if run_id is not None else runs.newest())
    except StudioError as exc:
        raise UsageError(str(exc)) from None


def live_session(chart: str, args: argparse.Namespace) -> ThreadedDebugger:

    module = _load(chart)
    try:
        live = live_agent(module, args, "studio")
    except LoadError as exc:
        raise UsageError(str(exc)) from None
    debugger = Debugger.live(live.agent, live.text, context=live.context, source=live.source)
    return ThreadedDebugger(debugger, mode="live")


def replay_session(trace_path: str, chart: str | None) -> ThreadedDebugger:

    try:
        trace = read_trace(trace_path)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    if chart is None:  # the trace alone: its steps as recorded, nothing imported
        return ThreadedDebugger(
            Debugger.replay(trace), mode="replay", fresh=lambda: Debugger.replay(trace)
        )
    module = _load(chart)
    if not hasattr(module, "agent"):
        raise UsageError(f"{chart} defines no agent(model) to replay")

    def fresh() -> Debugger:  # one replay for each browser session
        agent = module.agent(ScriptedModel([]))  # a replay never calls the model
        return Debugger.replay(trace, agent, context=chart_context(module))

    try:
        debugger = fresh()
    except DebuggerError as exc:
        raise UsageError(f"cannot replay {trace_path} on {chart}: {exc}") from None
    return ThreadedDebugger(debugger, mode="replay", fresh=fresh)


def _load(chart: str) -> ModuleType:

    try:
        return load_module(chart)
    except LoadError as exc:
        raise UsageError(str(exc)) from None
