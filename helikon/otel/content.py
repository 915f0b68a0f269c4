"""Message content as the GenAI semantic conventions record it, for runs that opt in
(`RunConfig(otel_content=True)`): `gen_ai.input.messages` and `gen_ai.output.messages` as
JSON, every text passed through the run's redaction first.

Every text goes through `redact`, which the spans take from the run: its listener port's
`exported_text` (`helikon.run.listening`), which applies `RunConfig.redact` when the run
redacts; the port also redacts each transition's record it tells the spans. These texts are
not among its reports but taken from the effects the spans wrap (the model's request and
answer, a tool call's arguments and result, an error's text), so the spans ask the port for
each as they export it.

A message is ``{"role": ..., "parts": [...]}``; parts are ``text``, ``reasoning``,
``tool_call`` (id, name, arguments as the model wrote them) and ``tool_call_response``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from helikon.core.items import (
    AssistantMessage,
    CompactionSummary,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)

Redact = Callable[[str], str]


def messages_json(items: Iterable[Any], redact: Redact | None) -> str:
    """`items` (a conversation window) as a JSON list of messages."""
    return _json([_message(item, redact) for item in items])


def output_json(items: Iterable[Any], finish_reason: str, redact: Redact | None) -> str:
    """A model's answer as one assistant message with its finish reason."""
    parts = [_part(item, redact) for item in items]
    return _json([{"role": "assistant", "parts": parts, "finish_reason": finish_reason}])


def text(value: str, redact: Redact | None) -> str:
    return redact(value) if redact is not None else value


def _message(item: Any, redact: Redact | None) -> dict[str, Any]:
    if isinstance(item, UserMessage):
        role = "user"
    elif isinstance(item, (SystemMessage, CompactionSummary)):
        role = "system"
    elif isinstance(item, ToolResult):
        role = "tool"
    else:
        role = "assistant"
    return {"role": role, "parts": [_part(item, redact)]}


def _part(item: Any, redact: Redact | None) -> dict[str, Any]:
    if isinstance(item, ToolCall):
        arguments = text(item.arguments, redact)
        return {"type": "tool_call", "id": item.call_id, "name": item.name, "arguments": arguments}
    if isinstance(item, ToolResult):
        response = text(item.content, redact)
        return {"type": "tool_call_response", "id": item.call_id, "response": response}
    if isinstance(item, Reasoning):
        return {"type": "reasoning", "content": text(item.content, redact)}
    if isinstance(item, (UserMessage, SystemMessage, AssistantMessage, CompactionSummary)):
        return {"type": "text", "content": text(item.content, redact)}
    return {"type": getattr(item, "type", type(item).__name__)}


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
