"""`helikon diagram`, `validate` and `table`: draw, check and print compiled charts."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from helikon import export
from helikon.cli.chart_tests import coverage_overlay
from helikon.cli.loading import LoadError, load_table
from helikon.cli.usage import UsageError, encoded, table_of, trace_at, write_output
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.errors import ChartDefinitionError
from helikon.core.table import TransitionTable
from helikon.export import TraceOverlay

DIAGRAM_FORMATS = ("dot", "svg", "png", "mermaid", "md", "json")


def add_diagram_parser(commands: Any) -> None:
    diagram = commands.add_parser("diagram", help="draw a chart (DOT, SVG, PNG, Mermaid, ...)")
    diagram.add_argument("chart", help="default, a chart file, or module:attr")
    diagram.add_argument("-f", "--format", choices=DIAGRAM_FORMATS, default="svg")
    overlays = diagram.add_mutually_exclusive_group()
    overlays.add_argument("--trace", help="overlay the path a recorded run took")
    overlays.add_argument(
        "--coverage",
        nargs="+",
        metavar="TRACE",
        help="overlay the rows these recorded runs took, merged; uncovered rows stand out",
    )
    diagram.add_argument("-o", "--output", help="file to write (default: stdout)")
    diagram.set_defaults(handler=command_diagram)


def add_validate_parser(commands: Any) -> None:
    validate = commands.add_parser("validate", help="compile a chart and report its problems")
    validate.add_argument("chart", help="a chart file, or module:attr")
    validate.set_defaults(handler=command_validate)


def add_table_parser(commands: Any) -> None:
    table = commands.add_parser("table", help="print the default chart's compiled table")
    table.add_argument("--implicit", action="store_true", help="include implicit rows")
    table.set_defaults(handler=command_table)


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


def diagram_bytes(table: Any, fmt: str, overlay: Any = None) -> bytes:
    if fmt == "json":
        return encoded(export.chart_to_json(table))
    if fmt == "mermaid":
        return encoded(export.chart_to_mermaid(table, overlay))
    if fmt == "md":
        return encoded(export.chart_to_markdown(table, overlay))
    dot = export.chart_to_dot(table, overlay)
    if fmt == "dot":
        return encoded(dot)
    try:
        return export.render(dot, "svg" if fmt == "svg" else "png")
    except export.RenderError as exc:
        raise UsageError(str(exc)) from None


def overlay_of(table: Any, trace_path: str) -> TraceOverlay:
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
    if args.coverage:
        overlay = coverage_overlay(table, args.coverage)
    data = diagram_bytes(table, args.format, overlay)
    write_output(data, args.output)
    return 0


def command_validate(args: argparse.Namespace) -> int:
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


def command_table(args: argparse.Namespace) -> int:
    print(format_table(DEFAULT_TABLE, implicit=args.implicit))
    return 0
