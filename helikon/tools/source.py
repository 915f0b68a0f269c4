"""`ToolSource`: tools known only when a run starts, such as an MCP server's.

A run lists each source of its agent once, before its first transition, and keeps the tools
it got to its end: names and permissions live in the transition context, which is fixed for
the run. A source keeps its listing for the runs after (`listed`) until it is told to list
again (`helikon.mcp.MCPServer.refresh`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from helikon.tools.tool import Tool


class ToolSource(Protocol):
    """Where a run gets tools from when it starts (`Agent(mcp_servers=[...])`).

    `helikon.mcp.MCPServer` is one; anything with these three members is.
    """

    @property
    def name(self) -> str:
        """Names the source in errors (`ToolsUnavailable.source`)."""
        ...

    @property
    def listed(self) -> Sequence[Tool] | None:
        """The tools of the source's latest listing; None before its first."""
        ...

    async def list_tools(self) -> Sequence[Tool]:
        """The source's tools: listed the first time, the same listing after that.

        Raises:
            Exception: the tools cannot be listed; the run fails with `ToolsUnavailable`.
        """
        ...
