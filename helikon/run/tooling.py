"""Taking tools: a run's tools are fixed before its first transition, from the agent's own and
those its tool sources (`mcp_servers`) list. `Tooled` holds how a run takes them; `Run`
(helikon.run.driver) is one.

Theory of operation: a new run lists its sources once (`prepare`, a stoppable effect, run
by `advance()` and `apply()` before the first transition); a run resumed from a store takes
the tools its header recorded, one resumed from a snapshot the listings its sources hold
(`_take_listed_tools`), and a debugger's replay the tools its trace recorded, as stand-ins
never called (`take_recorded_tools`). Each way ends in `_use_tools`, which sets the run's
tools, handoffs, transition context and `listed_tools` together. Listing, checking and
building the tools themselves is `helikon.run.prepare`'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from helikon.core.context import TransitionCtx
from helikon.core.errors import ToolsUnavailable
from helikon.core.state import Fail
from helikon.core.tool_spec import ListedTool, ToolSpec
from helikon.run.config import RunConfig
from helikon.run.lifecycle import Lifecycle
from helikon.run.loop import Stopped
from helikon.run.prepare import (
    Sourced,
    listed,
    listed_source_tools,
    recorded_tools,
    source_tools,
    tools_and_handoffs,
    transition_ctx,
)
from helikon.run.snapshot import SnapshotMismatch
from helikon.run.spec import AgentSpec, HandoffTo
from helikon.tools import Tool

__all__ = ["Tooled"]


class Tooled:
    """How a run takes its tools (see the module docstring); `Run` provides the rest."""

    agent: AgentSpec
    agents: Mapping[str, AgentSpec]
    config: RunConfig
    tools: dict[str, Tool]
    handoffs: dict[str, HandoffTo]
    ctx: TransitionCtx
    listed_tools: tuple[ListedTool, ...]
    next_input: Any
    _stop: Any
    _lifecycle: Lifecycle
    _specs: tuple[ToolSpec, ...] | None

    if TYPE_CHECKING:

        def _move(self, to: Lifecycle) -> None: ...
        async def stoppable(self, awaitable: Awaitable[Any]) -> Any: ...

    async def prepare(self) -> None:
        """Get the tools of the agent's tool sources (`mcp_servers`), once, before the run's
        first transition (`advance()` and `apply()` await it): list them and take them into
        the run's tools, its transition context's permissions and its `tool_specs`, fixed
        from then on.

        Nothing to do without sources, for a resumed run (it takes the tools its store
        recorded, else the listings its sources hold), or a second time. What it took is
        `listed_tools`, which the run's trace header and store header record. A source that
        cannot list, or a name two tools share, makes the first input `Fail(ToolsUnavailable)`,
        so the run fails before any model call; `cancel()` and the deadline stop a listing
        as they stop any effect.
        """
        if self._lifecycle.prepared:
            return
        self._move(Lifecycle.PREPARED)
        if not self.agent.mcp_servers:
            return
        try:
            listed = await self.stoppable(source_tools(self.agent))
        except Stopped:
            self.next_input = self._stop
            return
        if isinstance(listed, ToolsUnavailable):
            self.next_input = Fail(listed)
            return
        try:
            self._use_tools(listed)
        except ValueError as exc:  # what source_tools checked, caught again in the driver
            self.next_input = Fail(ToolsUnavailable("", str(exc)))

    def _use_tools(self, sourced: Sourced) -> None:
        self.listed_tools = listed(sourced)
        tools = [tool for _, tool in sourced]
        self.tools, self.handoffs = tools_and_handoffs(self.agent, self.agents, tools)
        self.ctx = transition_ctx(self.agent, self.config, self.tools, self.handoffs)
        self._specs = None

    def take_recorded_tools(self, records: Sequence[ListedTool]) -> None:
        """Offer the tools a trace recorded from the agent's sources, as stand-ins that are
        never called (a replay: its tool results are recorded), and ask no source for any.

        Raises:
            ValueError: a tool came from a source the agent does not have, or a record is
                not a valid tool.
        """
        self._use_tools(recorded_tools(self.agent, records, live=False))
        if not self._lifecycle.prepared:
            self._move(Lifecycle.PREPARED)

    def _take_listed_tools(self, what: str) -> None:
        """A resumed run of an agent with tool sources takes the listings they hold."""
        if self.agent.mcp_servers:
            try:
                self._use_tools(listed_source_tools(self.agent))
            except ValueError as exc:
                raise SnapshotMismatch(f"{what}: {exc}") from None
