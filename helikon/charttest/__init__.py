"""Chart tests: tests generated from a compiled chart.

Theory of operation. `targets_of` lists every declared row of a chart with every sequence of
guard outcomes that can select it (what `match_row` records): the targets. The planner
(`search`) finds a path from the initial state to each target over the pure `transition`,
building each step's input with the witnesses of the guards it checks (`witnesses` for
helikon's guards, `Subject.witnesses` for a chart's own; a target needing an outcome no
witness builds is reported, never guessed), and varying the agent's `Setup` (an output type,
limits, probe tools, a synthetic handoff target) where its own setup cannot reach a row.
"""

from __future__ import annotations

from helikon.charttest.draft import Builder, Draft, Witness
from helikon.charttest.paths import ChartPath, PathStep, Plan, Unwitnessed
from helikon.charttest.setup import ProbeAnswer, Setup
from helikon.charttest.subject import Subject
from helikon.charttest.targets import Target, Targets, targets_of
from helikon.charttest.witnesses import BUILTIN_WITNESSES

__all__ = [
    "BUILTIN_WITNESSES",
    "Builder",
    "ChartPath",
    "Draft",
    "PathStep",
    "Plan",
    "ProbeAnswer",
    "Setup",
    "Subject",
    "Target",
    "Targets",
    "Unwitnessed",
    "Witness",
    "targets_of",
]
