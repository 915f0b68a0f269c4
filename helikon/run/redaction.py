"""`RunConfig(redact=...)` applied to what a run writes: store records, traces, sessions.

A value is walked field by field. A field is text the hook sees when its name says it holds
what a user, a model or a tool wrote (message contents, arguments, results, reasons and
error messages, validation errors, which quote the input they refuse) and its annotation is
`str` or a tuple of `str`. A field annotated `Any` or `JsonValue` under such a name (a typed
final output's `value`, an effect's `args` and `output`) is JSON from the same sources: every
string in it is passed through the hook, keys too. Everything else (ids, names, phases,
discriminators, `Literal` fields such as a model failure's reason) is left as it is, so a
redacted value is still a valid value of its type, whatever the hook does to text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import Any

Redact = Callable[[str], str]

_TEXT_NAMES = frozenset(
    {
        "content",
        "arguments",
        "args",
        "args_delta",
        "text",
        "final_text",
        "partial_text",
        "raw",
        "reason",
        "message",
        "info",
        "errors",
        "repair_errors",
        "schema_errors",
    }
)
_JSON_NAMES = frozenset({"value", "args", "output"})
_TEXT, _TEXTS, _JSON = "text", "texts", "json"


def redacted(value: Any, redact: Redact | None) -> Any:
    """`value` with every text it carries passed through `redact` (None: `value` as is)."""
    if redact is None:
        return value
    return _walk(value, redact)


def _walk(value: Any, redact: Redact) -> Any:
    if isinstance(value, tuple):
        return tuple(_walk(each, redact) for each in value)
    if isinstance(value, list):
        return [_walk(each, redact) for each in value]
    if isinstance(value, dict):
        return {key: _walk(each, redact) for key, each in value.items()}
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes: dict[str, Any] = {}
    for name, rule in _rules(type(value)):
        old = getattr(value, name)
        if rule == _TEXT:
            new = redact(old) if isinstance(old, str) else old
        elif rule == _TEXTS:
            new = tuple(redact(s) if isinstance(s, str) else s for s in old)
        elif rule == _JSON:
            new = _json(old, redact)
        else:
            new = _walk(old, redact)
        if new is not old:
            changes[name] = new
    return dataclasses.replace(value, **changes) if changes else value


def _json(value: Any, redact: Redact) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {_json(key, redact): _json(each, redact) for key, each in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_json(each, redact) for each in value)
    return value


@cache
def _rules(cls: type) -> tuple[tuple[str, str], ...]:
    """How each field of dataclass `cls` that can be given to its constructor is redacted."""
    rules = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        annotation = field.type if isinstance(field.type, str) else _spelled(field.type)
        rule = "walk"
        if field.name in _TEXT_NAMES and annotation in ("str", "str | None"):
            rule = _TEXT
        elif field.name in _TEXT_NAMES and annotation == "tuple[str, ...]":
            rule = _TEXTS
        elif field.name in _JSON_NAMES and annotation in ("Any", "typing.Any", "JsonValue"):
            rule = _JSON
        rules.append((field.name, rule))
    return tuple(rules)


def _spelled(annotation: Any) -> str:
    """An evaluated annotation as its source spells it (`str`, `str | None`, ...)."""
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)
