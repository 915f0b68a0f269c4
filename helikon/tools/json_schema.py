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
        try:
            found = self.keywords.errors_within(self.validator, values, arguments)
            errors = sorted(found, key=_error_key)
        except Exception as exc:  # a $ref that does not resolve, a schema that recurses
            problem = cut(f"{type(exc).__name__}: {exc}")
            lines = [f"(schema): the tool's schema cannot be applied ({problem})"]
            raise InvalidArguments(lines) from None
        if errors:
            raise InvalidArguments([_line(error) for error in errors[:_MAX_LINES]])
        return values

    def bind(
        self, values: Mapping[str, Any], context: ToolContext[Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """The callable takes the arguments as one dict."""
        return [dict(values)], {}

    def json_schema(self) -> dict[str, Any]:
        return self.schema


def schema_arguments(tool_name: str, schema: Mapping[str, Any]) -> SchemaArguments:
    """Check `schema` and build its validator.

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
            f"tool {tool_name!r}: its schema must be a JSON object, not {quoted(schema)}"
        )
    offered = dict(schema)
    offered.setdefault("type", "object")
    if offered["type"] != "object":
        raise ValueError(
            f"tool {tool_name!r}: its arguments must be an object schema, not type "
            f"{quoted(offered['type'])}"
        )
    if not isinstance(offered.get("$schema", ""), str):
        raise ValueError(f"tool {tool_name!r}: its schema's $schema is not a URI")
    # An unknown $schema falls back to the latest draft (without jsonschema's warning).
    validator_class = keywords.linear(validator_for(offered, default=latest))
    try:
        validator_class.check_schema(offered, format_checker=keywords.regex_checker())
    except schema_error as exc:
        raise ValueError(f"tool {tool_name!r}: {_schema_problem(exc)}") from None
    except RecursionError:
        raise ValueError(f"tool {tool_name!r}: its schema is nested too deeply") from None
    backtracking = keywords.refuse_backtracking(offered)
    if backtracking is not None:
        raise ValueError(f"tool {tool_name!r}: its schema cannot be checked safely: {backtracking}")
    return SchemaArguments(offered, validator_class(offered, registry=registry()), keywords)


def _schema_problem(exc: Any) -> str:
    if exc.validator == "format" and exc.validator_value == "regex" and exc.cause is not None:
        return f"its schema has a pattern that cannot be checked in linear time: {exc.cause}"
    return f"its schema is not valid JSON Schema: {cut(str(exc.message))}"


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
