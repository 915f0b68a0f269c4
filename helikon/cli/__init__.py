"""The `helikon` command line: run agents, print the loop's table.

Errors are one clear line on stderr and exit status 2, never a traceback; a run that failed
exits 1, and so does `validate` of a chart that does not compile (it lists the problems).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from helikon.cli.loading import LoadError, call, load_module, module_label
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.chart.table import TransitionTable


def _charts_dir() -> Path:
    """The reference agents: the repository's charts/ when present, else the wheel's copy."""
    package = Path(__file__).resolve().parent.parent
    repository = package.parent / "charts"
    return repository if repository.is_dir() else package / "examples"


CHARTS = _charts_dir()
DEMO_CHART = "budget_assistant.py"


class UsageError(Exception):
    """A command-line mistake: reported as one line, exit status 2."""


def format_table(table: TransitionTable, *, implicit: bool = False) -> str:
    """The table's rows as aligned text, one row a line, in priority order."""
    header = ("from", "input", "guards", "to", "action")
    lines = [
        (r.source, r.input_kind, " and ".join(map(str, r.guards)) or "-", r.target, r.action)
        for r in table.rows
        if implicit or not r.implicit
    ]
    widths = [max(len(cells[i]) for cells in (header, *lines)) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*header).rstrip(), fmt.format(*("-" * w for w in widths)).rstrip()]
    out += [fmt.format(*cells).rstrip() for cells in lines]
    return "\n".join(out)


# ---------------------------------------------------------------- run


def wants_real_model(offline: bool) -> bool:
    return not offline and bool(
        os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")
    )


def model_for(module: Any, offline: bool, model_name: str | None) -> Any:
    """A real OpenAI-compatible model when configured, else the chart's scripted turns."""
    if wants_real_model(offline):
        from helikon.models.openai import OpenAIModel

        return OpenAIModel.chat(model_name or os.environ.get("HELIKON_MODEL", "gpt-4o-mini"))
    if not hasattr(module, "script"):
        raise UsageError(f"{module_label(module)} has no offline script(); set OPENAI_API_KEY")
    from helikon.models.scripted import ScriptedModel

    return ScriptedModel(list(call(module, "script")))


def approval_handler(mode: str) -> Any:
    """`ask` prompts y/n on the terminal; `all` / `none` decide without asking."""
    if mode == "all":
        return lambda request, context: True
    if mode == "none":
        return lambda request, context: False
    if mode == "ask" and sys.stdin.isatty():

        def ask(request: Any, context: Any) -> bool:
            call = request.call
            answer = input(f"  approve {call.name}({call.arguments})? [y/N] ")
            return answer.strip().lower() in ("y", "yes")

        return ask
    return None  # suspend: the run ends with RunSuspended


@dataclass(frozen=True)
class LiveAgent:
    """An agent a chart module defines, set up as the command line asked for a live run."""

    agent: Any
    text: str
    context: Any
    source: str


def live_agent(module: Any, args: argparse.Namespace, purpose: str) -> LiveAgent:
    """The chart module's agent with the model, approvals and input `args` choose.

    Raises:
        UsageError: the module defines no agent, or there is nothing to ask it.
        LoadError: the module's agent(), script() or deps() raised.
    """

    if not hasattr(module, "agent"):
        raise UsageError(f"{module_label(module)} defines no agent(model) to {purpose}")
    agent = call(module, "agent", model_for(module, args.offline, args.model))
    handler = approval_handler(args.approve)
    if handler is not None:
        agent = replace(agent, on_approval=handler)
    text = args.input or getattr(module, "EXAMPLE_INPUT", None)
    if not text:
        raise UsageError('give the agent something to do: --input "..."')
    return LiveAgent(agent, text, chart_context(module), chart_source(args.chart))


def chart_context(module: Any) -> Any:
    """The `RunContext` a chart module's runs get: its `deps()`, if it defines one."""
    from helikon.run.config import RunContext

    return RunContext(call(module, "deps") if hasattr(module, "deps") else None)


def chart_source(chart: str) -> str:
    """How a trace names where its agent came from: a chart file's full path, or a module."""
    return str(Path(chart).resolve()) if Path(chart).is_file() else chart


async def run_agent(module: Any, args: argparse.Namespace) -> int:
    """Run the chart module's agent, streaming its events readably; 1 if the run failed."""
    from helikon.export.console import EventPrinter
    from helikon.run.driver import Run
    from helikon.run.results import RunResultStreaming
    from helikon.trace import TraceWriter

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


DIAGRAM_FORMATS = ("dot", "svg", "png", "mermaid", "md", "json")


def diagram_bytes(table: Any, fmt: str, overlay: Any = None) -> bytes:
    from helikon import export

    if fmt == "json":
        return export.chart_to_json(table).encode()
    if fmt == "mermaid":
        return export.chart_to_mermaid(table, overlay).encode()
    if fmt == "md":
        return export.chart_to_markdown(table, overlay).encode()
    dot = export.chart_to_dot(table, overlay)
    if fmt == "dot":
        return dot.encode()
    try:
        return export.render(dot, "svg" if fmt == "svg" else "png")
    except export.RenderError as exc:
        raise UsageError(str(exc)) from None


def trace_at(path: str) -> Any:
    """The trace recorded at `path`; a missing, unreadable or corrupt file is a UsageError."""
    from helikon.trace import TraceError, read_trace

    try:
        return read_trace(path)
    except TraceError as exc:
        raise UsageError(str(exc)) from None


def overlay_of(table: Any, trace_path: str) -> Any:
    from helikon.export import TraceOverlay

    trace = trace_at(trace_path)
    if trace.header.chart_digest != table.digest:
        raise UsageError(
            f"{trace_path} was recorded on chart {trace.header.chart} "
            f"({trace.header.chart_digest[:12]}), not on this chart ({table.digest[:12]})"
        )
    rows = [line.row.index for line in trace.transitions(trace.header.run_id)]
    return TraceOverlay.from_rows(table, rows)


def command_diagram(args: argparse.Namespace) -> int:
    table = table_of(args.chart)
    overlay = overlay_of(table, args.trace) if args.trace else None
    data = diagram_bytes(table, args.format, overlay)
    write_output(data, args.output)
    return 0


def command_validate(args: argparse.Namespace) -> int:
    from helikon.cli.loading import load_table
    from helikon.core.errors import ChartDefinitionError

    try:
        table = load_table(args.chart)
    except LoadError as exc:
        # A chart compiled while its file is imported (or by agent()) fails as a LoadError.
        if not isinstance(exc.__cause__, ChartDefinitionError):
            raise UsageError(str(exc)) from None
        print(str(exc.__cause__), file=sys.stderr)
        return 1
    except ChartDefinitionError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    declared = sum(1 for row in table.rows if not row.implicit)
    print(f"{table.name}: ok ({len(table.phases)} phases, {declared} rows, {table.digest[:12]})")
    return 0


def table_of(target: str) -> Any:
    from helikon.cli.loading import load_table
    from helikon.core.errors import ChartDefinitionError

    try:
        return load_table(target)
    except (LoadError, ChartDefinitionError) as exc:
        raise UsageError(str(exc)) from None


def write_output(data: bytes, output: str | None) -> None:
    if output in (None, "-"):
        if data[:4] == b"\x89PNG":
            raise UsageError("PNG is binary: write it to a file with -o FILE")
        sys.stdout.write(data.decode())
        return
    try:
        Path(output).write_bytes(data)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from None


TRACE_FORMATS = ("html", "mermaid", "md")


def command_trace(args: argparse.Namespace) -> int:
    from helikon import export

    trace = trace_at(args.trace)
    table = None
    source = args.chart or trace.header.source
    if source:
        try:
            table = table_of(source)
        except UsageError:
            if args.chart:
                raise
    if args.format == "html":
        text = export.trace_to_html(trace, table)
    elif args.format == "mermaid":
        text = export.trace_to_mermaid(trace)
    else:
        text = export.trace_to_markdown(trace)
    write_output(text.encode(), args.output)
    return 0


def command_docs(args: argparse.Namespace) -> int:
    from helikon.cli.docs import generate
    from helikon.core.errors import ChartDefinitionError
    from helikon.export import RenderError

    try:
        written = generate(Path(args.out))
    except (LoadError, ChartDefinitionError, RenderError) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename or args.out}: {exc.strerror}") from None
    for path in written:
        print(path)
    return 0


def command_table(args: argparse.Namespace) -> int:
    print(format_table(DEFAULT_TABLE, implicit=args.implicit))
    return 0


# ---------------------------------------------------------------- main


def add_agent_arguments(command: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """The arguments of commands that run an agent from a chart file: `run`, `debug`, `studio`.

    `optional` makes CHART optional (for commands that can replay a trace instead).
    """
    command.add_argument(
        "chart", nargs="?" if optional else None, help="a chart file (charts/triage.py) or module"
    )
    command.add_argument("--input", "-i", help="what to ask (default: the chart's example)")
    command.add_argument("--offline", action="store_true", help="use the scripted model")
    command.add_argument("--model", help="model name for a real endpoint")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="helikon", description="LLM agents as statecharts.")
    commands = top.add_subparsers(dest="command", required=True)

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

    diagram = commands.add_parser("diagram", help="draw a chart (DOT, SVG, PNG, Mermaid, ...)")
    diagram.add_argument("chart", help="default, a chart file, or module:attr")
    diagram.add_argument("-f", "--format", choices=DIAGRAM_FORMATS, default="svg")
    diagram.add_argument("--trace", help="overlay the path a recorded run took")
    diagram.add_argument("-o", "--output", help="file to write (default: stdout)")
    diagram.set_defaults(handler=command_diagram)

    trace = commands.add_parser("trace", help="render a recorded trace (HTML, Mermaid, Markdown)")
    trace.add_argument("trace", help="a trace file written by `helikon run --trace`")
    trace.add_argument("-f", "--format", choices=TRACE_FORMATS, default="html")
    trace.add_argument("--chart", help="the chart the run used, if not the trace's source")
    trace.add_argument("-o", "--output", help="file to write (default: stdout)")
    trace.set_defaults(handler=command_trace)

    validate = commands.add_parser("validate", help="compile a chart and report its problems")
    validate.add_argument("chart", help="a chart file, or module:attr")
    validate.set_defaults(handler=command_validate)

    from helikon.cli.debug import add_debug_parser
    from helikon.cli.studio import add_studio_parser

    add_debug_parser(commands)
    add_studio_parser(commands)

    docs = commands.add_parser("docs", help="generate the chart pages of the documentation")
    docs.add_argument("--out", default="docs", help="the docs folder (default: docs)")
    docs.set_defaults(handler=command_docs)

    table = commands.add_parser("table", help="print the default chart's compiled table")
    table.add_argument("--implicit", action="store_true", help="include implicit rows")
    table.set_defaults(handler=command_table)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except UsageError as exc:
        # One line, even when the message quotes a multi-line error (a chart's problems).
        message = " ".join(line.strip() for line in str(exc).splitlines())
        print(f"helikon: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`helikon ... | head`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
