"""Tools: `@tool` and `Tool`, schemas from signatures, concurrent execution, permissions.

A tool is a plain or async function: its type hints give the JSON schema of its arguments,
its docstring the description (or `Tool.from_schema` with a given schema). `execute_batch`
runs a turn's calls; `ToolPolicy` combines a run's permission policy with each tool's own;
a `ToolSource` gives a run tools when it starts (an MCP server).
"""

from __future__ import annotations

from helikon.tools.batch import ContextFactory, ResultCallback, StartCallback, execute_batch
from helikon.tools.context import ToolContext
from helikon.tools.policy import CallPolicy, ToolPolicy, tools_by_name
from helikon.tools.source import ToolSource
from helikon.tools.tool import ApprovalRule, Tool, output_text, tool

__all__ = [
    "ApprovalRule",
    "CallPolicy",
    "ContextFactory",
    "ResultCallback",
    "StartCallback",
    "Tool",
    "ToolContext",
    "ToolPolicy",
    "ToolSource",
    "execute_batch",
    "output_text",
    "tool",
    "tools_by_name",
]
