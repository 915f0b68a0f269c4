"""A tool's arguments: a pydantic model built from the function's signature, and its schema.

Each parameter becomes a field named by position (`p0`, `p1`, ...) whose alias is the
parameter's name, so any parameter name works (even `schema` or `model_config`, which a
pydantic model could not hold as a field name), and the schema and the validation errors
speak the parameter's own name. A parameter annotated `ToolContext` is injected by the driver
and left out of the schema.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from helikon.tools.context import ToolContext

# Schema keys whose values are data, not schemas: a "title" inside them is not ours to strip.
_DATA_KEYS = frozenset({"default", "enum", "const", "examples"})
# Schema keys whose values map names to schemas: the names may themselves be "title".
_NAMED_SCHEMAS = frozenset({"properties", "$defs", "patternProperties"})


class InvalidArguments(ValueError):
    """The model's arguments do not fit the tool's schema; `lines` says why, one line each
    (`field.path: message`, `(root)` for the whole value)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines


@dataclass(frozen=True, slots=True)
class Arguments:
    """How a function's parameters map to a validating model.

    Args:
        model: validates the model's argument JSON (extra fields forbidden).
        params: (field name, parameter) for each parameter in the schema, in signature order.
        context_param: the parameter that receives the `ToolContext`, if any.
        signature: every parameter, in signature order.
    """

    model: type[BaseModel]
    params: tuple[tuple[str, inspect.Parameter], ...]
    context_param: inspect.Parameter | None
    signature: tuple[inspect.Parameter, ...]

    def parse(self, arguments: str) -> dict[str, Any]:
        """The validated arguments by parameter name; raises `InvalidArguments`."""
        try:
            parsed = self.model.model_validate_json(arguments)
        except ValidationError as exc:
            raise InvalidArguments(describe_errors(exc)) from None
        return {param.name: getattr(parsed, field) for field, param in self.params}

    def bind(
        self, values: Mapping[str, Any], context: ToolContext[Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments for the call, with the context injected."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for param in self.signature:
            item = context if param is self.context_param else values[param.name]
            if param.kind is param.POSITIONAL_ONLY:
                args.append(item)
            else:
                kwargs[param.name] = item
        return args, kwargs

    def json_schema(self) -> dict[str, Any]:
        """The arguments' JSON schema for function calling, without pydantic's titles."""
        schema: dict[str, Any] = _strip_titles(self.model.model_json_schema(by_alias=True))
        schema.setdefault("properties", {})
        schema.setdefault("required", [])
        return schema


def arguments_of(
    fn: Callable[..., Any], tool_name: str, descriptions: Mapping[str, str]
) -> Arguments:
    """Build the arguments model of `fn`.

    Args:
        fn: the tool's function.
        tool_name: names the model and the errors.
        descriptions: parameter descriptions (from the docstring), by parameter name.

    Raises:
        TypeError: for `*args`/`**kwargs`, or annotations that do not resolve.
    """
    hints = _type_hints(fn, tool_name)
    fields: dict[str, Any] = {}
    params: list[tuple[str, inspect.Parameter]] = []
    context_param: inspect.Parameter | None = None
    signature = tuple(inspect.signature(fn).parameters.values())
    for param in signature:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {tool_name!r}: *args and **kwargs cannot be described")
        hint = hints.get(param.name, Any)
        if _is_context(hint):
            context_param = param
            continue
        field = f"p{len(params)}"
        default = ... if param.default is param.empty else param.default
        fields[field] = (_aliased(hint, param.name, descriptions.get(param.name)), default)
        params.append((field, param))
    model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return Arguments(model, tuple(params), context_param, signature)


def describe_errors(exc: ValidationError) -> list[str]:
    """One line per bad field: `field.path: message`; `(root)` for the whole value."""
    lines = []
    for error in exc.errors(include_url=False):
        if error["type"] == "json_invalid":
            lines.append(f"(root): arguments are not valid JSON ({error['msg']})")
            continue
        where = ".".join(str(part) for part in error["loc"]) or "(root)"
        lines.append(f"{where}: {error['msg']}")
    return lines


def _type_hints(fn: Callable[..., Any], tool_name: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise TypeError(
            f"tool {tool_name!r}: cannot resolve an annotation ({exc}); define the types it "
            "uses at module level"
        ) from exc


def _is_context(hint: Any) -> bool:
    """`ToolContext`, `ToolContext[D]`, either optional or `Annotated`."""
    origin = get_origin(hint)
    if origin is Annotated:
        return _is_context(get_args(hint)[0])
    if origin is Union or origin is UnionType:
        return any(_is_context(arg) for arg in get_args(hint) if arg is not NoneType)
    return hint is ToolContext or origin is ToolContext


def _aliased(hint: Any, name: str, description: str | None) -> Any:
    """`hint` with the parameter's name as alias; the user's own `Field(...)` metadata wins."""
    base, metadata = hint, ()
    if get_origin(hint) is Annotated:
        base, *rest = get_args(hint)
        metadata = tuple(rest)
    ours = Field(alias=name) if description is None else Field(alias=name, description=description)
    return Annotated[(base, ours, *metadata)]


def _strip_titles(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    stripped: dict[str, Any] = {}
    for key, item in node.items():
        if key in _NAMED_SCHEMAS and isinstance(item, dict):
            stripped[key] = {name: _strip_titles(sub) for name, sub in item.items()}
        elif key in _DATA_KEYS:
            stripped[key] = item
        elif key != "title" or not isinstance(item, str):
            stripped[key] = _strip_titles(item)
    return stripped
