"""A tool's arguments described by a JSON schema it was given, not by a Python signature.

An MCP server's tools (and any tool whose schema comes from elsewhere) have no signature to
build a pydantic model from, and pydantic cannot validate an arbitrary JSON Schema. The
`jsonschema` package can (it implements every draft, `$ref` included); it is imported only
when such a tool is built, so plain `@tool` functions never need it. It comes with the `mcp`
extra.

The schema is checked when the tool is built (a schema that is not valid JSON Schema, or
whose root is not an object, is refused), and each call's arguments are checked against it:
arguments that are not JSON, not an object, hold `NaN`, or break the schema are an
`InvalidArguments`, which the tool turns into an error result the model can fix. `$ref`s
resolve only inside the schema itself: nothing is ever fetched. Every keyword is checked in
linear time, patterns with RE2 (`helikon.tools.schema_keywords`, which says what is refused).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from helikon.core.quoting import cut, quoted
from helikon.tools.context import ToolContext
from helikon.tools.schema import InvalidArguments

# A model may write a whole document into one argument: keep each error line readable.
_MAX_LINES = 20


@dataclass(frozen=True, slots=True)
class SchemaArguments:
    """Arguments validated against `schema`; the tool's callable receives them as one dict.

    Args:
        schema: the JSON schema the model is offered (an object schema).
        validator: a `jsonschema` validator for it.
        keywords: `helikon.tools.schema_keywords`, which bounds the check's steps.
    """

    schema: dict[str, Any]
    validator: Any
    keywords: Any

    def parse(self, arguments: str) -> dict[str, Any]:
        """The arguments as a dict, checked against the schema.

        Raises:
            InvalidArguments: one line per problem, `path: message`.
        """
        values = _json_object(arguments)
        problems = self.problems(values, arguments)
        if problems:
            raise InvalidArguments(problems)
        return values

    def problems(self, values: Any, text: str) -> list[str]:
        """One line per way `values` (parsed from `text`, whose length bounds the check's
        steps) breaks the schema, `path: message`; none when it keeps to it."""
        try:
            found = self.keywords.errors_within(self.validator, values, text)
            errors = sorted(found, key=_error_key)
        except Exception as exc:  # a $ref that does not resolve, a schema that recurses
            problem = cut(f"{type(exc).__name__}: {exc}")
            return [f"(schema): the tool's schema cannot be applied ({problem})"]
        return [_line(error) for error in errors[:_MAX_LINES]]

    def bind(
        self, values: Mapping[str, Any], context: ToolContext[Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """The callable takes the arguments as one dict."""
        return [dict(values)], {}

    def json_schema(self) -> dict[str, Any]:
        return self.schema


def schema_arguments(
    tool_name: str, schema: Mapping[str, Any], what: str = "schema"
) -> SchemaArguments:
    """Check `schema` and build its validator; errors call it "its `what`" (an MCP tool's
    output schema is checked the same way as an input schema).

    A schema without `type` is taken as an object schema (and offered with
    `"type": "object"`), since a tool's arguments are always a JSON object.

    Raises:
        ValueError: `schema` is not a mapping, its root is not an object schema, or it is not
            valid JSON Schema (naming the tool).
        ModuleNotFoundError: the `jsonschema` package is missing (naming the extra).
    """
    validator_for, latest, registry, schema_error, keywords = _jsonschema()
    if not isinstance(schema, Mapping):
        raise ValueError(
            f"tool {quoted(tool_name)}: its {what} must be a JSON object, not {quoted(schema)}"
        )
    offered = dict(schema)
    offered.setdefault("type", "object")
    if offered["type"] != "object":
        raise ValueError(
            f"tool {quoted(tool_name)}: its {_described(what)} must be an object schema, not type "
            f"{quoted(offered['type'])}"
        )
    if not isinstance(offered.get("$schema", ""), str):
        raise ValueError(f"tool {quoted(tool_name)}: its {what}'s $schema is not a URI")
    # An unknown $schema falls back to the latest draft (without jsonschema's warning).
    validator_class = keywords.linear(validator_for(offered, default=latest))
    try:
        validator_class.check_schema(offered, format_checker=keywords.regex_checker())
    except schema_error as exc:
        raise ValueError(f"tool {quoted(tool_name)}: its {what} {_schema_problem(exc)}") from None
    except RecursionError:
        raise ValueError(f"tool {quoted(tool_name)}: its {what} is nested too deeply") from None
    backtracking = keywords.refuse_backtracking(offered)
    if backtracking is not None:
        problem = f"cannot be checked safely: {backtracking}"
        raise ValueError(f"tool {quoted(tool_name)}: its {what} {problem}")
    return SchemaArguments(offered, validator_class(offered, registry=registry()), keywords)


def _schema_problem(exc: Any) -> str:
    if exc.validator == "format" and exc.validator_value == "regex" and exc.cause is not None:
        return f"has a pattern that cannot be checked in linear time: {exc.cause}"
    return f"is not valid JSON Schema: {cut(str(exc.message))}"


def _described(what: str) -> str:
    """What an object schema describes: the arguments, for a tool's own schema."""
    return "arguments" if what == "schema" else what


def _jsonschema() -> tuple[Any, Any, Any, type[Exception], Any]:
    try:
        from jsonschema import Draft202012Validator, SchemaError
        from jsonschema.validators import validator_for
        from referencing import Registry

        from helikon.tools import schema_keywords
    except ModuleNotFoundError as exc:
        if exc.name not in ("jsonschema", "referencing", "re2"):
            raise
        raise ModuleNotFoundError(
            f"a tool built from a JSON schema needs the {exc.name} package: "
            "pip install 'helikon[mcp]'",
            name=exc.name,
        ) from exc
    return validator_for, Draft202012Validator, Registry, SchemaError, schema_keywords


def _json_object(arguments: str) -> dict[str, Any]:
    try:
        values = json.loads(arguments, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise InvalidArguments([f"(root): arguments are not valid JSON ({exc})"]) from None
    except RecursionError:
        raise InvalidArguments(["(root): arguments are nested too deeply"]) from None
    if not isinstance(values, dict):
        kind = type(values).__name__
        raise InvalidArguments([f"(root): arguments must be a JSON object, not {kind}"])
    return values


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _error_key(error: Any) -> tuple[str, str]:
    return (_path(error), str(error.message))


def _path(error: Any) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "(root)"


def _line(error: Any) -> str:
    return f"{cut(_path(error))}: {cut(str(error.message))}"
