"""The default chart, compiled once at import."""

from __future__ import annotations

from helikon.chart.compile import compile_chart
from helikon.chart.dsl import AGENT_LOOP
from helikon.chart.table import TransitionTable

DEFAULT_TABLE: TransitionTable = compile_chart(AGENT_LOOP)
