"""`helikon test` and `helikon coverage`: chart tests generated from a chart, and the coverage
of recorded runs; `coverage_overlay` is what `helikon diagram --coverage` draws.

`test` exits 1 when a target is not covered, a target has no witness, or a path failed; so
does `coverage` when the traces leave a declared row's target uncovered.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from helikon.charttest import (
    ChartMismatch,
    ChartTests,
    Subject,
    coverage_of_traces,
    emit_pytest,
    format_coverage,
    trace_hits,
)
from helikon.charttest.bench import SetupRefused
from helikon.charttest.subject import witnesses_in
from helikon.cli.loading import (
    LoadError,
    call,
    chart_name,
    charts_in,
    compile_in,
    is_chart,
    load_module,
)
from helikon.cli.usage import UsageError, encoded, table_of, trace_at, write_output
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.errors import ChartDefinitionError
from helikon.core.table import TransitionTable
from helikon.export import TraceOverlay
from helikon.export.console import safe_text
from helikon.models.scripted import ScriptedModel
from helikon.run.agent import Agent


def add_test_parser(commands: Any) -> None:
    test = commands.add_parser(
        "test", help="run tests generated from a chart: a path to every row, through the driver"
    )
    test.add_argument("chart", help="default, a chart file, or module[:attr]")
    test.add_argument(
        "--emit-pytest", metavar="FILE", help="also write the paths as a pytest module"
    )
    test.set_defaults(handler=command_test)


def add_coverage_parser(commands: Any) -> None:
    coverage = commands.add_parser("coverage", help="which rows of a chart recorded runs took")
    coverage.add_argument("traces", nargs="+", metavar="TRACE", help="trace files of the chart")
    coverage.add_argument("--chart", required=True, help="default, a chart file, or module:attr")
    coverage.set_defaults(handler=command_coverage)


def command_test(args: argparse.Namespace) -> int:
    try:
        tests = ChartTests(subject_for(args.chart))
    except SetupRefused as exc:  # the agent as written does not start
        raise UsageError(str(exc)) from None
    coverage = tests.run_sync()
    print(safe_text(format_coverage(coverage), multiline=True))
    if args.emit_pytest:
        output = Path(args.emit_pytest)
        command = shlex.join(["helikon", "test", args.chart, "--emit-pytest", args.emit_pytest])
        write_output(encoded(emit_pytest(tests, args.chart, output, command)), args.emit_pytest)
    return 1 if coverage.gaps else 0


def command_coverage(args: argparse.Namespace) -> int:
    table = table_of(args.chart)
    traces = [trace_at(path) for path in args.traces]
    try:
        coverage = coverage_of_traces(table, traces, args.traces, args.chart)
    except ChartMismatch as exc:
        raise UsageError(str(exc)) from None
    print(safe_text(format_coverage(coverage), multiline=True))
    return 1 if coverage.gaps else 0


def coverage_overlay(table: TransitionTable, paths: list[str]) -> TraceOverlay:
    """The rows the traces at `paths` took, merged, as a coverage overlay of `table`."""
    traces = [trace_at(path) for path in paths]
    try:
        hits = trace_hits(table, traces, paths)
    except ChartMismatch as exc:
        raise UsageError(str(exc)) from None
    rows: dict[int, int] = {}
    for (row, _), count in hits.items():
        rows[row] = rows.get(row, 0) + count
    return TraceOverlay.for_coverage(table, rows)


# ---------------------------------------------------------------- what is tested


def subject_for(target: str) -> Subject:
    """The subject `target` names: `default` (a bare agent on the default chart), a chart
    module or file (its `agent(model)`, else a bare agent on its chart), or `where:attr`
    naming a chart class, a compiled table or an agent.

    Raises:
        UsageError: nothing testable can be loaded from `target`.
    """
    if target == "default":
        return Subject.of_table(DEFAULT_TABLE, name="default")
    where, _, attr = target.rpartition(":") if ":" in target else (target, "", "")
    try:
        module = load_module(where)
        found = getattr(module, attr) if attr else module
        return _subject(target, module, found)
    except AttributeError:
        raise UsageError(f"{where} has no attribute {attr!r}") from None
    except (LoadError, ChartDefinitionError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _subject(target: str, module: ModuleType, found: Any) -> Subject:
    witnesses = witnesses_in(module)
    if isinstance(found, TransitionTable):
        return Subject.of_table(found, name=target, witnesses=witnesses)
    if is_chart(found):
        return Subject.of_table(compile_in(module, found), name=target, witnesses=witnesses)
    if isinstance(found, Agent):
        return Subject(target, lambda model: _with_model(found, model), witnesses=witnesses)
    if not isinstance(found, ModuleType):
        raise UsageError(f"{target} is not a chart, a compiled table, an agent or a module")
    if hasattr(found, "agent"):
        call(found, "agent", _probe_model())  # its agent() fails here, as one clear line
        return Subject.of_module(found, name=target)
    tables = [obj for obj in vars(found).values() if isinstance(obj, TransitionTable)]
    if len(tables) == 1:
        return Subject.of_table(tables[0], name=target, witnesses=witnesses)
    charts = charts_in(found)
    if len(charts) == 1:
        return Subject.of_table(compile_in(found, charts[0]), name=target, witnesses=witnesses)
    if len(charts) > 1:
        names = ", ".join(map(chart_name, charts))
        raise UsageError(f"{target} defines several charts ({names}); pick one with :Name")
    raise UsageError(f"{target} defines no agent, chart or compiled table")


def _with_model(agent: Agent, model: Any) -> Agent:
    return replace(agent, model=model)


def _probe_model() -> ScriptedModel:
    return ScriptedModel([])
