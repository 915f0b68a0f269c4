"""`ToolSpec`: a tool as the model sees it. Tools build them; model adapters send them."""

from __future__ import annotations

from typing import Any, Literal

from helikon.core.values import value


@value
class ToolSpec:
    """A tool as the model sees it: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@value
class ListedTool:
    """A tool a run took from one of its tool sources (an MCP server) when it started, as a
    trace and a run store record it: which source, what the model was offered, and what its
    permission rested on. A resumed run offers these again, and a replay or the debugger
    reads them instead of asking the server."""

    source: str
    spec: ToolSpec
    needs_approval: bool = True
    read_only: bool = False
    permission: Literal["allow", "deny", "ask"] = "allow"
