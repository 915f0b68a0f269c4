"""`helikon diagram`, `validate` and `table`: draw, check and print compiled charts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from helikon import export
from helikon.cli.chart_tests import coverage_overlay
from helikon.cli.loading import LoadError, load_table
from helikon.cli.usage import UsageError, encoded, table_of, trace_at, write_output
from helikon.core.chart.turns import unbounded_cycles
from helikon.core.errors import ChartDefinitionError
from helikon.core.table import Row, TransitionTable
from helikon.export import LAYOUTS, Layout, TraceOverlay

DIAGRAM_FORMATS = ("dot", "svg", "png", "mermaid", "md", "json")
EXTENSION_FORMATS = {
    ".dot": "dot",
    ".gv": "dot",
    ".svg": "svg",
    ".png": "png",
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".md": "md",
    ".json": "json",
}
"""The format an `-o` file's extension asks for, when `-f` does not say."""


def add_diagram_parser(commands: Any) -> None:
    diagram = commands.add_parser("diagram", help="draw a chart (DOT, SVG, PNG, Mermaid, ...)")
    diagram.add_argument("chart", help="default, a chart file, or module:attr")
    diagram.add_argument(
        "-f",
        "--format",
        choices=DIAGRAM_FORMATS,
        help="default: the -o file's extension's (.svg, .png, .dot, .mmd, .md, .json), else svg",
    )
    diagram.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="detailed",
        help=(
            "detailed (default): every row's input, guards and action on its edge; "
            "overview: one edge per source and target labelled with row ids, legible at a "
            "page's width (the rows: -f md). Applies to dot, svg, png and mermaid"
        ),
    )
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
    table = commands.add_parser(
        "table",
        help="print a chart's compiled table (default: the default chart's)",
        description=(
            "Print a chart's rows by id. Without --implicit only the declared rows "
            "(the chart's own transitions); --implicit adds the rows compile_chart adds to make "
            "the table total (a terminal phase absorbing an input, a phase refusing one)."
        ),
    )
    table.add_argument(
        "chart", nargs="?", default="default", help="default, a chart file, or module:attr"
    )
    table.add_argument("--implicit", action="store_true", help="include implicit rows")
    table.set_defaults(handler=command_table)


def format_table(table: TransitionTable, *, implicit: bool = False) -> str:
    """The table's rows as aligned text, one row a line by id, then what was counted.

    The ids are `Row.index`, the numbers diagrams, traces, the debugger and the studio show.
    """
    header = ("row", "from", "input", "guards", "to", "action")
    lines = [
        (str(r.index), r.source, r.input_kind, _guards(r), r.target, r.action)
        for r in table.rows
        if implicit or not r.implicit
    ]
    widths = [max(len(cells[i]) for cells in (header, *lines)) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*header).rstrip(), fmt.format(*("-" * w for w in widths)).rstrip()]
    out += [fmt.format(*cells).rstrip() for cells in lines]
    return "\n".join([*out, "", row_count(table, implicit=implicit)])


def _guards(row: Row) -> str:
    return " and ".join(map(str, row.guards)) or "-"


def row_count(table: TransitionTable, *, implicit: bool = False) -> str:
    """What a table's rows count: `38 declared rows (79 with the 41 implicit ones)`."""
    declared = sum(1 for row in table.rows if not row.implicit)
    added = len(table.rows) - declared
    if implicit:
        return f"{len(table.rows)} rows: {declared} declared, {added} implicit"
    return (
        f"{declared} declared rows ({len(table.rows)} with the {added} implicit ones: --implicit)"
    )


def diagram_bytes(table: Any, fmt: str, overlay: Any = None, layout: Layout = "detailed") -> bytes:
    if fmt == "json":
        return encoded(export.chart_to_json(table))
    if fmt == "mermaid":
        return encoded(export.chart_to_mermaid(table, overlay, layout=layout))
    if fmt == "md":
        return encoded(export.chart_to_markdown(table, overlay))
    dot = export.chart_to_dot(table, overlay, layout=layout)
    if fmt == "dot":
        return encoded(dot)
    try:
        return export.render(dot, "svg" if fmt == "svg" else "png")
    except export.RenderError as exc:
        raise UsageError(str(exc)) from None


def diagram_format(given: str | None, output: str | None) -> str:
    """The format to draw in: `-f`'s, else the output file's extension's, else SVG.

    Raises:
        UsageError: `-f` and the extension disagree, or an output file's extension names
            no format and `-f` is not given.
    """
    if output in (None, "-"):
        return given or "svg"
    suffix = Path(output).suffix.lower()
    implied = EXTENSION_FORMATS.get(suffix)
    if given is not None and implied is not None and given != implied:
        raise UsageError(f"-f {given} but {output!r} ends in {suffix} ({implied}): change one")
    if given is None and implied is None:
        known = ", ".join(EXTENSION_FORMATS)
        raise UsageError(f"which format is {output!r}? give -f FORMAT, or name it {known}")
    return given or implied or "svg"


def overlay_of(table: Any, trace_path: str) -> TraceOverlay:
    try:
        return TraceOverlay.from_trace(table, trace_at(trace_path))
    except ValueError as exc:
        raise UsageError(f"{trace_path}: {exc}") from None


def command_diagram(args: argparse.Namespace) -> int:
    table = table_of(args.chart)
    overlay = overlay_of(table, args.trace) if args.trace else None
    if args.coverage:
        overlay = coverage_overlay(table, args.coverage)
    data = diagram_bytes(table, diagram_format(args.format, args.output), overlay, args.layout)
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
    for part in unbounded_cycles(table.phases, table.rows, table.effects):
        print(cycle_warning(table.name, part), file=sys.stderr)
    return 0


def cycle_warning(chart: str, part: tuple[str, ...]) -> str:
    """One line: a loop of the chart that neither counts a turn nor checks a budget."""
    return (
        f"chart {chart}: warning: {', '.join(part)} loop with no turn counted and no budget "
        "checked, so max_turns cannot stop a run there; enter CallingModel or a model-calling "
        "custom phase on the loop, or guard a row of it with turn_limit_reached or "
        "budget_exhausted"
    )


def command_table(args: argparse.Namespace) -> int:
    print(format_table(table_of(args.chart), implicit=args.implicit))
    return 0
