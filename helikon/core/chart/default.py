"""The default chart, compiled once at import."""

from __future__ import annotations

from helikon.core.chart.compile import compile_chart
from helikon.core.chart.dsl import AGENT_LOOP
from helikon.core.table import TransitionTable

DEFAULT_TABLE: TransitionTable = compile_chart(AGENT_LOOP)
