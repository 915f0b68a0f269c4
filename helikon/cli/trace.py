"""`helikon trace`: render a recorded run as an HTML page, a Mermaid sequence or Markdown."""

from __future__ import annotations

import argparse
from typing import Any

from helikon import export
from helikon.cli.usage import UsageError, encoded, table_of, trace_at, write_output
from helikon.export.console import safe_text

TRACE_FORMATS = ("html", "mermaid", "md")


def add_parser(commands: Any) -> None:
    trace = commands.add_parser("trace", help="render a recorded trace (HTML, Mermaid, Markdown)")
    trace.add_argument("trace", help="a trace file written by `helikon run --trace`")
    trace.add_argument("-f", "--format", choices=TRACE_FORMATS, default="html")
    trace.add_argument("--chart", help="draw this chart (default: the chart the trace recorded)")
    trace.add_argument("-o", "--output", help="file to write (default: stdout)")
    trace.set_defaults(handler=command_trace)


def command_trace(args: argparse.Namespace) -> int:
    trace = trace_at(args.trace)  # the trace records its chart: nothing it names is imported
    table = table_of(args.chart) if args.chart else None
    if args.format == "html":
        try:
            text = export.trace_to_html(trace, table)
        except export.RenderError as exc:  # jinja2 is missing
            raise UsageError(str(exc)) from None
    elif args.format == "mermaid":
        text = export.trace_to_mermaid(trace)
    else:
        text = export.trace_to_markdown(trace)
    if args.format != "html" and args.output in (None, "-"):
        text = safe_text(text, multiline=True)  # the trace's text, read on a terminal
    write_output(encoded(text), args.output)
    return 0
