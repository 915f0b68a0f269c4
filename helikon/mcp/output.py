"""A tool's `outputSchema`, checked helikon's way instead of the SDK's.

The SDK checks a result's structured content against the tool's output schema with plain
`jsonschema`, whose `pattern` is Python's backtracking `re`, on the event loop: a hostile
server's `"^(a+)+$"` and a few 24-character strings would hold every run in the process for
seconds, past any timeout. So helikon sends `tools/call` itself (`MCPServer._call`, without
the SDK's check) and checks the structured content here, with the linear checker and step
budget of a tool's arguments (`helikon.tools.schema_keywords`). An output schema that cannot
be checked that way (a pattern RE2 refuses) leaves its tool out of the listing: fail closed.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from mcp import types

from helikon.mcp.errors import MCPToolError
from helikon.tools.json_schema import schema_arguments

OutputCheck = Callable[[types.CallToolResult], None]
"""Raises `MCPToolError` when a result breaks its tool's output schema."""


def output_check(listed: types.Tool) -> OutputCheck:
    """The check of `listed`'s results, built once at listing.

    Raises:
        ValueError: its output schema is not valid JSON Schema of an object, or cannot be
            checked in linear time (naming the tool).
    """
    if listed.output_schema is None:
        return _unchecked
    schema = schema_arguments(listed.name, listed.output_schema, "output schema")

    def check(result: types.CallToolResult) -> None:
        if result.is_error:
            return  # an error result need not keep to the schema
        content = result.structured_content
        if content is None:
            raise MCPToolError(
                f"the server's answer was refused: tool {listed.name!r} has an output "
                "schema, but the answer has no structured content"
            )
        problems = schema.problems(content, json.dumps(content))
        if problems:
            raise MCPToolError(
                "the server's answer was refused: its structured content breaks the output "
                f"schema of tool {listed.name!r}: " + "; ".join(problems)
            )

    return check


def _unchecked(result: types.CallToolResult) -> None:
    """A tool without an output schema: any structured content will do."""
