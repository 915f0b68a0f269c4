"""A hostile MCP server over stdio, written by hand (no SDK), for the tests of helikon.mcp.

It speaks JSON-RPC lines the way a careless or malicious server might: a tool list over
several pages with odd names and odd schemas, and tools whose answers are garbage, invalid,
huge, protocol errors, or never come, or that kill the process mid-call; or (slow-schemas)
tools whose schemas would be slow to check; or (slow-output) tools whose output schemas
would be slow to check against the structured content they answer with.

    python tests/mcp_hostile_server.py [pages|circle|endless|broken-list|slow-schemas|slow-output]
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

MODE = sys.argv[1] if len(sys.argv) > 1 else "pages"
OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}}
NOTHING = {"type": "object", "properties": {}}


def tool(name: str, schema: Any = NOTHING, **more: Any) -> dict[str, Any]:
    return {"name": name, "description": f"the {name} tool", "inputSchema": schema, **more}


PAGES: list[list[dict[str, Any]]] = [
    [tool("echo", OBJECT), tool("garbage"), tool("silent"), tool("bad_result")],
    [
        tool("huge"),
        tool("protocol_error"),
        tool("is_error"),
        tool("image"),
        tool(
            "structured_bad",
            outputSchema={
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
        ),
        tool("die"),
    ],
    [
        tool("bad_schema", {"type": "object", "properties": {"a": {"type": "strin"}}}),
        tool("has space"),
        tool("dup"),
        tool("dup"),
        tool("trusting", annotations={"readOnlyHint": True}),
    ],
]


# Schemas whose check would take exponential (patterns) or quadratic (uniqueItems) time on
# jsonschema's own keywords; "backreference" cannot be checked in linear time at all.
EVIL = "^(a+)+$"
# Each level an anyOf of the next level twice: 2**12 leaves to check, as many before them.
FAN: dict[str, Any] = {f"d{n}": {"anyOf": [{"$ref": f"#/$defs/d{n + 1}"}] * 2} for n in range(12)}
FAN["d12"] = {"type": "string"}
SLOW_SCHEMAS: list[dict[str, Any]] = [
    tool("pattern", {"type": "object", "properties": {"text": {"pattern": EVIL}}}),
    tool("pattern_keys", {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}),
    tool(
        "only_pattern_keys",
        {"type": "object", "patternProperties": {EVIL: {}}, "additionalProperties": False},
    ),
    tool("key_names", {"type": "object", "propertyNames": {"pattern": EVIL}}),
    tool("unique", {"type": "object", "properties": {"items": {"uniqueItems": True}}}),
    tool("fan_out", {"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": FAN}),
    tool("backreference", {"type": "object", "properties": {"text": {"pattern": "^(a)\\1$"}}}),
]

TEXTS = {"type": "object", "additionalProperties": {"type": "string", "pattern": EVIL}}
SLOW_OUTPUT: list[dict[str, Any]] = [
    tool("evil_output", outputSchema=TEXTS),
    tool("no_structure", outputSchema=TEXTS),  # answers with text alone
    tool(
        "fan_output",
        outputSchema={"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": FAN},
    ),
    tool(
        "backreference_output",
        outputSchema={"type": "object", "properties": {"text": {"pattern": "^(a)\\1$"}}},
    ),
]
A24 = "a" * 23 + "!"  # 24 characters: `^(a+)+$` backtracks a third of a second on them in `re`


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request_id: Any, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def refuse(request_id: Any, code: int, message: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def text(value: str, **more: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], **more}


def list_tools(request_id: Any, cursor: str | None) -> None:
    if MODE == "circle":
        answer(request_id, {"tools": [], "nextCursor": "b" if cursor == "a" else "a"})
    elif MODE == "endless":
        answer(request_id, {"tools": [], "nextCursor": f"n{int((cursor or 'n0')[1:]) + 1}"})
    elif MODE == "slow-schemas":
        answer(request_id, {"tools": SLOW_SCHEMAS})
    elif MODE == "slow-output":
        answer(request_id, {"tools": SLOW_OUTPUT})
    elif MODE == "broken-list":  # not valid MCP: the SDK refuses the whole page
        tools = [tool("fine"), tool("odd_schema", {"type": "string"}), {"name": "no_schema"}]
        answer(request_id, {"tools": tools})
    else:
        page = int(cursor or "0")
        result: dict[str, Any] = {"tools": PAGES[page]}
        if page + 1 < len(PAGES):
            result["nextCursor"] = str(page + 1)
        answer(request_id, result)


def garbage(request_id: Any, arguments: dict[str, Any]) -> None:
    sys.stdout.write("this is not JSON-RPC\n")  # a line that is not JSON, then the answer
    answer(request_id, text("after the garbage"))


def image(request_id: Any, arguments: dict[str, Any]) -> None:
    blocks = [
        {"type": "image", "data": "aGVsbG8h", "mimeType": "image/png"},
        {"type": "text", "text": "a caption"},
    ]
    answer(request_id, {"content": blocks})


BEHAVIOURS: dict[str, Any] = {
    "echo": lambda i, arguments: answer(i, text(json.dumps(arguments))),
    "garbage": garbage,
    "silent": lambda i, arguments: None,  # never answers
    "bad_result": lambda i, arguments: answer(i, {"content": "not a list of blocks"}),
    "huge": lambda i, arguments: answer(i, text("y" * 300_000)),
    "protocol_error": lambda i, arguments: refuse(i, -32603, "internal failure"),
    "is_error": lambda i, arguments: answer(i, text("disk full", isError=True)),
    "image": image,
    "structured_bad": lambda i, arguments: answer(
        i, {"content": [], "structuredContent": {"n": "not a number"}}
    ),
    "die": lambda i, arguments: os._exit(1),
    "evil_output": lambda i, arguments: answer(
        i, {"content": [], "structuredContent": {f"text{n}": A24 for n in range(4)}}
    ),
    "fan_output": lambda i, arguments: answer(i, {"content": [], "structuredContent": {"a": 1}}),
}


def call_tool(request_id: Any, name: str, arguments: dict[str, Any]) -> None:
    behaviour = BEHAVIOURS.get(name)
    if behaviour is None:
        answer(request_id, text(f"called {name}"))
    else:
        behaviour(request_id, arguments)


def handle(message: dict[str, Any]) -> None:
    method, request_id = message.get("method"), message.get("id")
    params = message.get("params") or {}
    if request_id is None:
        return  # a notification
    if method == "initialize":
        info = {"name": "hostile", "version": "0"}
        answer(
            request_id,
            {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": info},
        )
    elif method == "tools/list":
        list_tools(request_id, params.get("cursor"))
    elif method == "tools/call":
        call_tool(request_id, params["name"], params.get("arguments") or {})
    elif method == "ping":
        answer(request_id, {})
    else:
        refuse(request_id, -32601, f"method not found: {method}")


if __name__ == "__main__":
    for line in sys.stdin:
        handle(json.loads(line))
