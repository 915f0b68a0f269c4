"""`Tool.from_schema`: a tool whose arguments a given JSON schema describes (MCP's tools).

The arguments are checked against the schema before the callable runs; whatever does not fit
is an error result the model reads, never an exception out of `invoke`.
"""

from __future__ import annotations

import asyncio
import re
import warnings
from typing import Any

import pytest

from helikon.core.items import ToolCall, ToolResult
from helikon.tools import Tool, ToolContext, ToolPolicy, execute_batch

CONTEXT: ToolContext[Any] = ToolContext("run-1", "call-1", "tester", None)

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city"],
    "additionalProperties": False,
}


def invoke(tool: Tool, arguments: str) -> ToolResult:
    return asyncio.run(tool.invoke(ToolCall("call-1", tool.name, arguments), CONTEXT))


def weather_tool(**options: Any) -> tuple[Tool, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    async def call(arguments: dict[str, Any]) -> dict[str, Any]:
        seen.append(arguments)
        return {"city": arguments["city"], "temp": 21.5}

    return Tool.from_schema("weather", "The weather in a city.", WEATHER, call, **options), seen


def test_the_model_is_offered_the_schema_as_given() -> None:
    tool, _ = weather_tool()
    assert (tool.name, tool.description) == ("weather", "The weather in a city.")
    assert tool.spec.parameters == WEATHER


def test_a_schema_without_type_is_offered_as_an_object_schema() -> None:
    schema = {"properties": {"q": {"type": "string"}}}
    tool = Tool.from_schema("find", "", schema, lambda arguments: "found")
    assert tool.spec.parameters == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert schema == {"properties": {"q": {"type": "string"}}}  # not mutated


def test_arguments_that_fit_reach_the_call_as_one_dict() -> None:
    tool, seen = weather_tool()
    result = invoke(tool, '{"city": "Oslo", "days": 3}')
    assert result == ToolResult("call-1", '{"city":"Oslo","temp":21.5}')
    assert seen == [{"city": "Oslo", "days": 3}]


def test_a_sync_call_runs_too() -> None:
    tool = Tool.from_schema("echo", "", {"type": "object"}, lambda arguments: arguments)
    assert invoke(tool, '{"a": [1, 2]}').content == '{"a":[1,2]}'


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        ('{"days": 3}', "- (root): 'city' is a required property"),
        ('{"city": "Oslo", "days": 9}', "- days: 9 is greater than the maximum of 7"),
        ('{"city": 5}', "- city: 5 is not of type 'string'"),
        (
            '{"city": "Oslo", "hail": true}',
            "- (root): Additional properties are not allowed ('hail' was unexpected)",
        ),
        ('["Oslo"]', "- (root): arguments must be a JSON object, not list"),
        ('{"city": "Oslo", "days": NaN}', "- (root): arguments are not valid JSON (NaN is"),
        ('{"city": ', "- (root): arguments are not valid JSON (Expecting value"),
    ],
)
def test_arguments_that_do_not_fit_are_an_error_result_naming_the_problem(
    arguments: str, line: str
) -> None:
    tool, seen = weather_tool()
    result = invoke(tool, arguments)
    assert (result.is_error, result.status) == (True, "errored")
    assert result.content.startswith("error: invalid arguments for tool 'weather':\n")
    assert line in result.content
    assert seen == []


def test_every_problem_gets_its_own_line() -> None:
    tool, _ = weather_tool()
    content = invoke(tool, '{"city": "", "days": 0}').content
    assert content.splitlines()[1:] == [
        "- city: '' should be non-empty",
        "- days: 0 is less than the minimum of 1",
    ]


def test_a_huge_argument_is_quoted_short_in_the_error() -> None:
    tool, _ = weather_tool()
    content = invoke(tool, '{"city": "Oslo", "days": "' + "x" * 5000 + '"}').content
    assert len(content) < 500
    assert re.search(r"x… \(\d+ characters\)$", content), content[-80:]  # cut, and says so


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "string"}, "its arguments must be an object schema, not type 'string'"),
        ({"type": "object", "properties": 5}, "its schema is not valid JSON Schema"),
        ({"type": "object", "required": "city"}, "its schema is not valid JSON Schema"),
        ({"type": "object", "$schema": {"no": "uri"}}, "its schema's $schema is not a URI"),
        ([1, 2], "its schema must be a JSON object"),
    ],
)
def test_a_schema_that_is_not_json_schema_of_an_object_is_refused(
    schema: Any, problem: str
) -> None:
    with pytest.raises(ValueError, match="tool 'odd'") as refused:
        Tool.from_schema("odd", "", schema, lambda arguments: None)
    assert problem in str(refused.value)


def test_a_name_the_model_apis_refuse_is_refused() -> None:
    with pytest.raises(ValueError, match="must be 1-64 letters"):
        Tool.from_schema("files.read", "", {"type": "object"}, lambda arguments: None)


def test_an_unknown_metaschema_falls_back_to_the_latest_draft_without_a_warning() -> None:
    schema = {"$schema": "https://example.invalid/mine", "type": "object", "required": ["a"]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tool = Tool.from_schema("t", "", schema, lambda arguments: "ok")
    assert invoke(tool, '{"a": 1}').content == "ok"
    assert "'a' is a required property" in invoke(tool, "{}").content


def test_a_remote_ref_is_never_fetched_it_is_an_error_result() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/schema.json"}}}
    tool = Tool.from_schema("t", "", schema, lambda arguments: "ran")
    result = invoke(tool, '{"a": 1}')
    assert result.is_error
    assert "(schema): the tool's schema cannot be applied" in result.content
    assert "Unresolvable: http://127.0.0.1:9/schema.json" in result.content


def test_a_schema_that_refers_to_itself_forever_is_an_error_result() -> None:
    schema = {"type": "object", "$ref": "#"}
    tool = Tool.from_schema("t", "", schema, lambda arguments: "ran")
    result = invoke(tool, "{}")
    assert result.is_error
    assert "(schema): the tool's schema cannot be applied" in result.content


def test_only_a_read_only_schema_tool_may_run_again() -> None:
    """What a resumed run's in-flight rule and a Temporal tool activity's retries read
    (`rerunnable` raised AttributeError on a schema tool before)."""
    plain, _ = weather_tool()
    reading, _ = weather_tool(read_only=True)
    assert (plain.idempotent, plain.rerunnable) == (False, False)
    assert (reading.idempotent, reading.rerunnable) == (False, True)


def test_a_needs_approval_rule_sees_the_arguments_dict() -> None:
    tool, _ = weather_tool(needs_approval=lambda arguments: arguments["city"] == "Mordor")
    assert tool.permission_for(ToolCall("c", "weather", '{"city": "Oslo"}')) == "allow"
    assert tool.permission_for(ToolCall("c", "weather", '{"city": "Mordor"}')) == "ask"
    assert tool.permission_for(ToolCall("c", "weather", '{"city": 5}')) == "ask"


def test_the_run_policy_sees_a_schema_tool_like_any_other() -> None:
    tool, _ = weather_tool(needs_approval=True, read_only=True)
    policy = ToolPolicy(ask_for_side_effects=True)
    assert policy.permissions([tool]) == {"weather": "ask"}
    other, _ = weather_tool(read_only=True)
    assert policy.permissions([other]) == {"weather": "allow"}


def test_a_batch_runs_schema_tools_and_keeps_bad_calls_as_error_results() -> None:
    tool, seen = weather_tool()
    calls = [ToolCall("a", "weather", '{"city": "Oslo"}'), ToolCall("b", "weather", "{}")]
    results = asyncio.run(
        execute_batch(calls, {"weather": tool}, ToolContext.factory("run-1", "tester"))
    )
    assert [(r.call_id, r.is_error) for r in results] == [("a", False), ("b", True)]
    assert seen == [{"city": "Oslo"}]
