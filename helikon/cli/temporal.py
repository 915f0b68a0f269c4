"""`helikon worker --temporal` and `helikon run --temporal`: runs on a Temporal cluster.

`worker` serves the agents of one or more chart modules on a task queue, writing their runs
to a run store (`--store URL`: PostgreSQL when workers are on several machines, SQLite for
one); `--offline` gives each agent its chart's scripted model, as `helikon run --offline`
does (without it, a key or base URL must be set). `run --temporal` calls no model (the
worker's answers): it starts the chart's agent as a workflow on that task queue and
streams its events from the same store, the events a local run streams (no token deltas:
a store keeps none), each step's phase and effect results printed as `helikon run` prints
them (from the store's records); approvals are decided by the workflow's `decide` update
as `--approve` says, and `helikon runs show` reads the run like a local one.

The `temporal` extra is imported only here, when a command asks for it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import uuid
from collections.abc import Sequence
from typing import Any

from helikon.cli.agents import chart_context, live_agent, model_for, scripted_note
from helikon.cli.loading import LoadError, call, load_module, module_label
from helikon.cli.runs.resuming import decide
from helikon.cli.store import add_store_argument, store_errors, store_url, with_store
from helikon.cli.usage import UsageError
from helikon.durable import RunStore, open_store
from helikon.export.console import EventPrinter, StepNotes, safe_text
from helikon.models.scripted import ScriptedModel


def add_parser(commands: Any) -> None:
    """Add `worker` to `commands`."""
    worker = commands.add_parser("worker", help="serve chart modules' agents on Temporal")
    worker.add_argument("charts", nargs="+", metavar="CHART", help="chart files or modules")
    add_temporal_arguments(worker, required=True)
    worker.add_argument("--offline", action="store_true", help="use the charts' scripted models")
    worker.add_argument("--model", help="model for a real endpoint (as `helikon run --model`)")
    add_store_argument(worker)
    worker.set_defaults(handler=command_worker)


def add_temporal_arguments(command: argparse.ArgumentParser, *, required: bool) -> None:
    command.add_argument(
        "--temporal",
        metavar="HOST:PORT",
        required=required,
        help="the Temporal frontend to run on (e.g. 127.0.0.1:7233)",
    )
    command.add_argument("--task-queue", metavar="Q", help="the task queue (default: helikon)")
    command.add_argument("--namespace", default="default", help="the Temporal namespace")


def _sdk() -> Any:
    try:
        import helikon.temporal as sdk
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("temporalio"):
            raise
        raise UsageError(
            "--temporal needs the temporal extra: pip install 'helikon[temporal]'"
        ) from None
    return sdk


async def _client(args: argparse.Namespace) -> Any:
    from temporalio.client import Client

    try:
        return await Client.connect(args.temporal, namespace=args.namespace)
    except Exception as exc:
        raise UsageError(f"cannot reach Temporal at {args.temporal}: {exc}") from None


def _store(args: argparse.Namespace, command: str) -> RunStore:
    url = store_url(args)
    if url is None:
        raise UsageError(f"helikon {command} --temporal needs a run store, not --store none")
    with store_errors():
        return open_store(url)


def _queue(args: argparse.Namespace) -> str:
    return args.task_queue or "helikon"


# ---------------------------------------------------------------- the worker


def command_worker(args: argparse.Namespace) -> int:
    sdk = _sdk()
    agents, deps = _agents(args.charts, args)
    store = _store(args, "worker")
    try:
        return asyncio.run(_serve(sdk, args, agents, deps, store))
    finally:
        store.close()


def _agents(charts: Sequence[str], args: argparse.Namespace) -> tuple[list[Any], Any]:
    agents: list[Any] = []
    with_deps: list[Any] = []
    try:
        for chart in charts:
            module = load_module(chart)
            if not hasattr(module, "agent"):
                raise UsageError(f"{module_label(module)} defines no agent(model) to serve")
            model = model_for(module, args.offline, args.model, "worker")
            agents.append(call(module, "agent", model))
            if hasattr(module, "deps"):
                with_deps.append(module)
    except LoadError as exc:
        raise UsageError(str(exc)) from None
    if len(with_deps) > 1:
        names = ", ".join(module_label(m) for m in with_deps)
        raise UsageError(f"one worker serves one deps(): {names} each define one")
    deps = chart_context(with_deps[0]).deps if with_deps else None
    return agents, deps


async def _serve(
    sdk: Any, args: argparse.Namespace, agents: list[Any], deps: Any, store: Any
) -> int:
    client = await _client(args)
    try:
        worker = sdk.helikon_worker(client, _queue(args), agents, store, deps=deps)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    names = ", ".join(sorted(worker.registry.agents))
    where = f"on task queue {_queue(args)!r} at {args.temporal}{scripted_note(args.offline)}"
    print(f"helikon worker: {names} {where}", flush=True)
    with contextlib.suppress(asyncio.CancelledError):
        await worker.run()
    return 0


# ---------------------------------------------------------------- a run


def command_run_temporal(args: argparse.Namespace) -> int:
    """`helikon run CHART --temporal HOST:PORT`; 1 if the run failed."""
    sdk = _sdk()
    try:
        module = load_module(args.chart)
        # The worker's model answers: this agent only names the run and its chart.
        live = live_agent(module, args, "run", model=ScriptedModel([]))
    except LoadError as exc:
        raise UsageError(str(exc)) from None
    if args.trace:
        raise UsageError("--trace records a local run; a Temporal run is kept in --store")
    store = _store(args, "run")
    try:
        return asyncio.run(_run(sdk, args, live, store))
    finally:
        store.close()


async def _run(sdk: Any, args: argparse.Namespace, live: Any, store: RunStore) -> int:
    client = await _client(args)
    run_id = args.run_id or uuid.uuid4().hex
    printer = EventPrinter()
    printer.line(printer.paint(f"> {live.text}", "bold"))
    try:
        handle = await sdk.start_run(
            client, live.agent, live.text, task_queue=_queue(args), run_id=run_id
        )
    except sdk.RedactionUnsupported as exc:  # as `helikon worker` reports it (a ValueError)
        raise UsageError(str(exc)) from None
    seen = 0
    last: Any = None
    step = StepNotes(printer, run_id).stored  # the phases and effect results it prints
    while True:
        with store_errors():
            async for event in sdk.events(store, run_id, seen, steps=step):
                printer(event)
                seen += 1
                last = event
        if last is None or last.type != "run_suspended":
            break
        decisions = decide(store.pending(run_id), args.approve)
        if decisions is None:
            show = f"helikon runs show {shlex.quote(run_id)}{with_store(args)}"
            printer.line(
                f"run {safe_text(run_id)} waits for approval on Temporal: decide with the "
                f"workflow's `decide` update ({safe_text(show)} shows what it waits on)"
            )
            return 0
        await sdk.decide(handle, decisions)
    show = f"helikon runs show {shlex.quote(run_id)}{with_store(args)}"
    printer.line(f"run {safe_text(run_id)} kept in {safe_text(store.url)} ({safe_text(show)})")
    return 1 if last is not None and last.type == "run_failed" else 0
