"""The checks the real API makes that catch client bugs: tool results must answer calls.

`invalid(path, body)` says why OpenAI would reject a request with HTTP 400, or None.
"""

from __future__ import annotations

from typing import Any


def invalid(path: str, body: dict[str, Any]) -> str | None:
    """Why the real API would reject `body` with a 400, for the checks worth having here."""
    if not body.get("model"):
        return "you must provide a model parameter"
    if path.endswith("/chat/completions"):
        return _invalid_messages(body.get("messages"))
    return _invalid_input(body.get("input"))


def _invalid_messages(messages: Any) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    open_calls: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                return (
                    "messages with role 'tool' must be a response to a preceding message "
                    "with 'tool_calls'"
                )
            open_calls.discard(message["tool_call_id"])
        elif open_calls:
            return (
                "an assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id': {sorted(open_calls)}"
            )
        if role == "assistant":
            open_calls = {call["id"] for call in message.get("tool_calls") or ()}
    return None


def _invalid_input(items: Any) -> str | None:
    if isinstance(items, str):
        return None
    if not isinstance(items, list):
        return "'input' must be a string or an array of input items"
    calls: set[str] = set()
    for item in items:
        if item.get("type") == "function_call":
            calls.add(item.get("call_id"))
        elif item.get("type") == "function_call_output" and item.get("call_id") not in calls:
            return f"No tool call found for function call output with call_id {item.get('call_id')}"
    return None
