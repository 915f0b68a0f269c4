"""The rules helikon.mcp applies to what a server sends, as tables: which hints ask for
approval, and what text a result becomes. The inputs are the SDK's own protocol values."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types

from helikon.mcp import MCPToolError
from helikon.mcp.listing import ListingRules, needs_approval, read_only
from helikon.mcp.results import result_text

UNTRUSTED = ListingRules("s")
TRUSTED = ListingRules("s", trust_hints=True)


def listed(**hints: Any) -> types.Tool:
    annotations = types.ToolAnnotations(**hints) if hints else None
    return types.Tool(name="t", input_schema={"type": "object"}, annotations=annotations)


# (hints, asks when untrusted, asks when trusted, read-only when trusted)
HINTS = [
    ({}, True, True, False),
    ({"destructive_hint": True}, True, True, False),
    ({"destructive_hint": False}, False, False, False),
    ({"read_only_hint": True}, True, False, True),
    ({"read_only_hint": True, "destructive_hint": True}, True, False, True),
    ({"read_only_hint": False, "destructive_hint": False}, False, False, False),
    ({"idempotent_hint": True}, True, True, False),
]


@pytest.mark.parametrize(("hints", "untrusted", "trusted", "trusted_read_only"), HINTS)
def test_hints_only_ever_tighten(
    hints: dict[str, bool], untrusted: bool, trusted: bool, trusted_read_only: bool
) -> None:
    tool = listed(**hints)
    assert needs_approval(tool, UNTRUSTED) is untrusted
    assert read_only(tool, UNTRUSTED) is False
    assert needs_approval(tool, TRUSTED) is trusted
    assert read_only(tool, TRUSTED) is trusted_read_only


def test_the_users_choice_beats_the_hints_and_a_rule_that_raises_asks() -> None:
    tool = listed(destructive_hint=True)
    assert needs_approval(tool, ListingRules("s", needs_approval=False)) is False
    assert needs_approval(listed(), ListingRules("s", needs_approval=lambda t: False)) is False

    def broken(listed: types.Tool) -> bool:
        raise RuntimeError("oops")

    assert needs_approval(tool, ListingRules("s", needs_approval=broken)) is True


def result(**fields: Any) -> types.CallToolResult:
    return types.CallToolResult(**fields)


def text(value: str) -> types.TextContent:
    return types.TextContent(text=value)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (result(content=[text("3")], structured_content={"result": 3}), "3"),
        (result(content=[], structured_content={"result": "hi"}), "hi"),
        (result(content=[], structured_content={"result": 1, "also": 2}), '{"result":1,"also":2}'),
        (result(content=[], structured_content=[1, 2]), "[1,2]"),
        (result(content=[text("summary")], structured_content={"n": 1}), '{"n":1}'),
        (result(content=[text("a"), text("b")]), "a\nb"),
        (result(content=[]), ""),
        (
            result(content=[types.ResourceLink(name="log", uri="file:///var/log/x")]),
            "[resource link: log <file:///var/log/x>]",
        ),
        (
            result(
                content=[
                    types.EmbeddedResource(
                        resource=types.TextResourceContents(uri="file:///a", text="inside")
                    )
                ]
            ),
            "inside",
        ),
        (
            result(
                content=[
                    types.EmbeddedResource(
                        resource=types.BlobResourceContents(uri="file:///b", blob="AAAA")
                    )
                ]
            ),
            "[resource file:///b: binary, 3 bytes, not shown]",
        ),
        (
            result(content=[types.AudioContent(data="AAAAAAAA", mime_type="audio/wav")]),
            "[audio: audio/wav, 6 bytes, not shown]",
        ),
    ],
)
def test_a_result_is_its_json_value_or_its_text(
    answer: types.CallToolResult, expected: str
) -> None:
    assert result_text(answer, 1000) == expected


def test_an_error_result_and_an_oversized_one_raise_for_the_model_to_read() -> None:
    with pytest.raises(MCPToolError, match="the tool failed: disk full"):
        result_text(result(content=[text("disk full")], is_error=True), 1000)
    with pytest.raises(MCPToolError, match=r"the tool failed: \(the server gave no reason\)"):
        result_text(result(content=[], is_error=True), 1000)
    with pytest.raises(MCPToolError, match="11 characters long, over this server's limit of 10"):
        result_text(result(content=[text("x" * 11)]), 10)
    with pytest.raises(MCPToolError, match=r"xxxxx\.\.\. \(6 more characters\)"):
        result_text(result(content=[text("x" * 11)], is_error=True), 5)
    assert result_text(result(content=[text("x" * 11)]), None) == "x" * 11
