"""Chart tests: tests generated from a compiled chart, run through the real driver.

Theory of operation. `targets_of` lists every declared row of a chart with every sequence of
guard outcomes that can select it (what `match_row` records): the targets. The planner
(`search`) finds a path from the initial state to each target over the pure `transition`,
building each step's input with the witnesses of the guards it checks (`witnesses` for
helikon's guards, `Subject.witnesses` for a chart's own; a target needing an outcome no
witness builds is reported, never guessed), and varying the agent's `Setup` (an output type,
limits, probe tools, a synthetic handoff target) where its own setup cannot reach a row.
`drive` runs each path through the driver, scripting the model, the probe tools, the approvals
and the stops, and checks each step took its planned row; a path the driver cannot deliver
(a response its stream assembler cannot build) is checked over `transition`, and implicit
rows by table tests over `transition`. `Coverage` gathers what was hit, from these runs or
from recorded traces; `format_coverage` prints it; `emit_pytest` writes the paths as a pytest
module.

    from helikon.charttest import ChartTests, Subject, format_coverage
    coverage = ChartTests(Subject.of_module(my_chart_module)).run_sync()
    print(format_coverage(coverage))
"""

from __future__ import annotations

from helikon.charttest.coverage import (
    ChartMismatch,
    Coverage,
    ImplicitCoverage,
    TargetCoverage,
    coverage_of_traces,
    trace_hits,
)
from helikon.charttest.draft import Builder, Draft, Witness
from helikon.charttest.emit import emit_pytest
from helikon.charttest.paths import ChartPath, PathStep, Plan, Unwitnessed
from helikon.charttest.report import format_coverage
from helikon.charttest.setup import ProbeAnswer, Setup
from helikon.charttest.subject import Subject
from helikon.charttest.suite import ChartTests
from helikon.charttest.targets import Target, Targets, targets_of
from helikon.charttest.witnesses import BUILTIN_WITNESSES

__all__ = [
    "BUILTIN_WITNESSES",
    "Builder",
    "ChartMismatch",
    "ChartPath",
    "ChartTests",
    "Coverage",
    "Draft",
    "ImplicitCoverage",
    "PathStep",
    "Plan",
    "ProbeAnswer",
    "Setup",
    "Subject",
    "Target",
    "TargetCoverage",
    "Targets",
    "Unwitnessed",
    "Witness",
    "coverage_of_traces",
    "emit_pytest",
    "format_coverage",
    "targets_of",
    "trace_hits",
]
