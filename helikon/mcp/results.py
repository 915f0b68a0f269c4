"""A `CallToolResult` as the text the model reads.

Structured content is the tool's JSON value (`{"result": x}`, the SDK's wrapping of a value
that is not an object, is unwrapped to `x`); a string value is the text itself. A result
without structured content is its content blocks: text as it is, anything else as a short
note saying what it was. An `isError` result, and a result longer than the server's limit,
raise `MCPToolError`, so the model reads them as the call's error result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp import types

from helikon.mcp.errors import MCPToolError
from helikon.tools import output_text


def result_text(result: types.CallToolResult, limit: int | None) -> str:
    """The text the model reads for `result`.

    Raises:
        MCPToolError: the server says the call failed, or the text is over `limit`.
    """
    if result.is_error:
        said = content_text(result.content) or "(the server gave no reason)"
        raise MCPToolError(f"the tool failed: {_clipped(said, limit)}")
    if result.structured_content is not None:
        text = output_text(unwrapped(result.structured_content))
    else:
        text = content_text(result.content)
    if limit is not None and len(text) > limit:
        raise MCPToolError(
            f"the result is {len(text)} characters long, over this server's limit of {limit} "
            "(MCPServer(max_result_chars=...))"
        )
    return text


def unwrapped(value: Any) -> Any:
    """`x` for the SDK's `{"result": x}`, anything else as it is."""
    if isinstance(value, dict) and len(value) == 1 and "result" in value:
        return value["result"]
    return value


def content_text(blocks: Sequence[types.ContentBlock]) -> str:
    """Content blocks as text: text blocks as they are, other blocks as a note, one a line."""
    return "\n".join(_block_text(block) for block in blocks)


def _block_text(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link: {block.name} <{block.uri}>]"
    contents = block.resource
    if isinstance(contents, types.TextResourceContents):
        return contents.text
    mime = contents.mime_type or "binary"
    return f"[resource {contents.uri}: {mime}, {len(contents.blob) * 3 // 4} bytes, not shown]"


def _clipped(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text) - limit} more characters)"
