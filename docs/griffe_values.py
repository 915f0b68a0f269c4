"""A griffe extension for the API reference: helikon's `@value` classes are dataclasses.

`helikon.core.values.value` makes a class a slotted dataclass (declared with `dataclass_transform`),
but griffe's static analysis only recognises `@dataclass` itself, so without this extension
every state, input, event, item and error would be documented without its constructor, and
the `Args:` sections of their docstrings would match no parameter. This extension gives each
`@value` class the `__init__` that `dataclass` builds: its annotated fields in order, minus
`field(init=False)` ones, with their defaults.

Loaded by mkdocs.yml (`extensions: [docs/griffe_values.py:ValueClasses]`); not part of helikon.
"""

from __future__ import annotations

from typing import Any

import griffe

VALUE_DECORATOR = "helikon.core.values.value"


def _decorator_path(decorator: griffe.Decorator) -> str:
    expr = decorator.value
    if isinstance(expr, griffe.ExprCall):
        expr = expr.function
    return str(getattr(expr, "canonical_path", expr))


def _field_arguments(attribute: griffe.Attribute) -> dict[str, Any] | None:
    """The keyword arguments of a `field(...)` default, or None when it is not one."""
    value = attribute.value
    if isinstance(value, griffe.ExprCall) and value.canonical_path == "dataclasses.field":
        return {
            arg.name: arg.value for arg in value.arguments if isinstance(arg, griffe.ExprKeyword)
        }
    return None


def _parameter(attribute: griffe.Attribute) -> griffe.Parameter | None:
    if attribute.annotation is None or "property" in attribute.labels:
        return None
    arguments = _field_arguments(attribute)
    if arguments is None:
        default: Any = attribute.value
    elif str(arguments.get("init")) == "False":
        return None
    elif "default_factory" in arguments:
        default = griffe.ExprCall(function=arguments["default_factory"], arguments=[])
    else:
        default = arguments.get("default")
    return griffe.Parameter(
        attribute.name,
        annotation=attribute.annotation,
        kind=griffe.ParameterKind.positional_or_keyword,
        default=default,
        docstring=attribute.docstring,
    )


def _add_init(cls: griffe.Class) -> None:
    parameters = [
        parameter
        for member in cls.members.values()
        if isinstance(member, griffe.Attribute) and (parameter := _parameter(member)) is not None
    ]
    self = griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)
    init = griffe.Function(
        "__init__",
        lineno=0,
        endlineno=0,
        parent=cls,
        parameters=griffe.Parameters(self, *parameters),
        returns="None",
    )
    cls.set_member("__init__", init)
    cls.labels.add("dataclass")


class ValueClasses(griffe.Extension):
    """Give every `@value` class its dataclass `__init__`."""

    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        if "__init__" in cls.members:
            return
        if any(_decorator_path(d) == VALUE_DECORATOR for d in cls.decorators):
            _add_init(cls)
