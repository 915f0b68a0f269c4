"""The lines of a trace file, as values: a header, then transitions and effects.

A trace file starts with a versioned `TraceHeader` (agent, chart name and digest, helikon
version) and holds one `TransitionTrace` per transition: the state before, the input, the
row that matched with every guard checked, the state after, the events, the next action and
the appended items. Events that came from effects rather than transitions (token deltas,
`AgentUpdated`, `RunSuspended`, ...) are kept as `EffectTrace` lines, so the full stream can
be rebuilt. Runs nested in a run (handoff targets, agents as tools) write to the same file,
each line naming its `run_id`; a `RunTrace` line opens each nested run with its chart.

Every line carries its time (`helikon.trace.times`): the header and a `RunTrace` when the run
began (`at`), an `EffectTrace` when its event was emitted (`at`), a `TransitionTrace` when it
was applied and how long the effect before it took (`time`, a `StepTime`). The fields are
additive: a trace written before them reads with None there, and a reader that does not know
them ignores them, so the version stays 2.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Literal

from pydantic import Field

from helikon.core.errors import HelikonError
from helikon.core.events import AgentEvent
from helikon.core.items import Item
from helikon.core.state import LoopState, NextAction, TransitionInput
from helikon.core.table import ChartData
from helikon.core.tool_spec import ListedTool
from helikon.core.values import value
from helikon.trace.times import StepTime

TRACE_VERSION = 2
"""Version 2 (this release): the header records the chart (`table`), nested runs have a `run`
line, events carry the seed's field names. Version 1 traces are refused with a clear error."""


class TraceError(HelikonError, ValueError):
    """A trace that cannot be read: the message names the file, the line and the problem."""


@value
class TraceHeader:
    """The first line: the run's agent and id, and the chart it ran on, recorded whole
    (`table`), so reading, drawing and stepping the trace never import anything. `source`
    says where the agent was defined (a chart file), for people: nothing is ever loaded
    because a trace names it. `tools` are the tools the run took from its tool sources (MCP
    servers) as it started, so a replay needs no server."""

    agent: str
    run_id: str
    chart: str
    chart_digest: str
    helikon_version: str
    table: ChartData
    version: int = TRACE_VERSION
    source: str | None = None
    tools: tuple[ListedTool, ...] = ()
    at: str | None = None
    kind: Literal["header"] = field(default="header", init=False)


@value
class RunTrace:
    """A run nested in the traced one began (a handoff target, an agent as a tool): its
    agent and chart. `table` is recorded the first time a trace meets a chart digest;
    `tools` as in `TraceHeader`."""

    run_id: str
    agent: str
    chart: str
    chart_digest: str
    table: ChartData | None = None
    tools: tuple[ListedTool, ...] = ()
    at: str | None = None
    kind: Literal["run"] = field(default="run", init=False)


@value
class RowTrace:
    """The row a transition took: its index and every guard checked, with its value."""

    index: int
    source: str
    input_kind: str
    target: str
    action: str
    checked: tuple[tuple[str, bool], ...]


@value
class TransitionTrace:
    run_id: str
    seq: int
    state_before: LoopState
    input: TransitionInput
    row: RowTrace
    state_after: LoopState
    events: tuple[AgentEvent, ...]
    next_action: NextAction
    appends: tuple[Item, ...]
    time: StepTime | None = None
    kind: Literal["transition"] = field(default="transition", init=False)


@value
class EffectTrace:
    """An event an effect produced between transition `after_seq` and the next."""

    run_id: str
    after_seq: int
    event: AgentEvent
    at: str | None = None
    kind: Literal["effect"] = field(default="effect", init=False)


TraceLine = Annotated[
    TraceHeader | RunTrace | TransitionTrace | EffectTrace, Field(discriminator="kind")
]
