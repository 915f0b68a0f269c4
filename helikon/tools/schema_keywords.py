"""The JSON Schema keywords jsonschema checks in super-linear time, checked in linear time.

A tool's schema may come from a server nobody trusts, and its arguments from a model. The
check runs on the event loop, and nothing can interrupt it there: not a timeout, not a
cancel, not a thread (Python's `re` holds the GIL while it matches). So no keyword may take
more than linear time:

- `pattern` and `patternProperties` (and `additionalProperties`, which skips the properties
  a pattern matched) match with RE2, which never backtracks: jsonschema's own keywords use
  `re`, where `^(a+)+$` against 30 characters takes minutes. RE2's syntax is close to the
  ECMA-262 regexes JSON Schema prescribes (`\\d` is ASCII digits), but it has no
  backreferences nor lookaround: `check_schema` (the `regex` format, on RE2) refuses a
  schema with a pattern RE2 cannot compile, and a pattern the metaschema does not reach
  (draft 4's `patternProperties` keys) fails the call that meets it.
- `unevaluatedProperties` matches `patternProperties` with `re` deep inside jsonschema: a
  schema that has both is refused (`refuse_backtracking`).
- `uniqueItems` compares items by a canonical key (linear), not pairwise (quadratic for
  objects and arrays).
- Every keyword counts as a step, and a check may take `STEPS` plus `PER_CHARACTER` per
  character of the arguments (`errors_within`): a few lines of `anyOf` over `$ref`s double
  the work at each level (2**30 steps for 30 levels), which no keyword alone can see.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Iterator, Mapping
from typing import Any

import re2
from jsonschema import FormatChecker, ValidationError
from jsonschema.validators import extend

from helikon.core.quoting import cut, quoted

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would write each refused pattern to stderr


STEPS = 1000
"""Keyword steps any check may take, besides `PER_CHARACTER` per character of the arguments."""
PER_CHARACTER = 10
"""Keyword steps a check may take per character of the arguments: generous for a union of
object schemas over an array of small objects (about 7), a bound for a schema that fans out."""

_left: contextvars.ContextVar[list[int]] = contextvars.ContextVar("helikon_schema_steps")


class TooCostly(Exception):
    """The check took more steps than its arguments allow: the schema is too costly."""


class UnsafePattern(ValueError):
    """A schema's pattern RE2 cannot compile: it cannot be matched in linear time."""

    def __init__(self, pattern: str, reason: str) -> None:
        super().__init__(f"RE2 cannot compile the pattern {quoted(pattern)}: {reason}")


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any:
    """`pattern` compiled by RE2.

    Raises:
        UnsafePattern: RE2 refuses it (a backreference, a lookaround, a repetition over 1000).
    """
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise UnsafePattern(pattern, cut(text)) from None


@functools.cache
def linear(validator_class: Any) -> Any:
    """`validator_class` with the keywords above replaced by their linear versions, and
    every keyword counting its steps."""
    originals = validator_class.VALIDATORS
    keywords = {
        **originals,
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _without_matched(originals["additionalProperties"]),
        "uniqueItems": _unique_items,
    }
    counted = {k: _counted(v) for k, v in keywords.items() if k in originals}
    return extend(validator_class, counted)


def errors_within(validator: Any, instance: Any, arguments: str) -> list[Any]:
    """Every error of `instance` (parsed from `arguments`) by `validator`, a `linear` one.

    Raises:
        TooCostly: the check took over `STEPS` plus `PER_CHARACTER` per character of
            `arguments`.
    """
    token = _left.set([STEPS + PER_CHARACTER * len(arguments)])
    try:
        return list(validator.iter_errors(instance))
    finally:
        _left.reset(token)


def _counted(keyword: Any) -> Any:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        left = _left.get(None)
        if left is not None:
            left[0] -= 1
            if left[0] < 0:
                raise TooCostly(
                    f"the check took over {STEPS} steps plus {PER_CHARACTER} per character "
                    "checked: the schema is too costly to check"
                )
        return keyword(validator, value, instance, schema)

    return counted


def regex_checker() -> Any:
    """A format checker for `check_schema` whose `regex` format is compiled by RE2."""
    checker = FormatChecker()
    checker.checks("regex", raises=UnsafePattern)(compiled)
    return checker


def refuse_backtracking(schema: Any) -> str | None:
    """Why jsonschema would match `schema` with `re` after all, or None."""
    keys = set(_keys(schema))
    if {"unevaluatedProperties", "patternProperties"} <= keys:
        return "it has both unevaluatedProperties and patternProperties"
    return None


def _keys(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        each = stack.pop()
        if isinstance(each, Mapping):
            yield from (key for key in each if isinstance(key, str))
            stack.extend(each.values())
        elif isinstance(each, list):
            stack.extend(each)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not compiled(pattern).search(instance):
        yield ValidationError(f"{quoted(instance)} does not match {quoted(pattern)}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        matcher = compiled(pattern)
        for key, value in instance.items():
            if matcher.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _without_matched(original: Any) -> Any:
    """jsonschema's `additionalProperties`, given only the properties no pattern matched."""

    def additional_properties(
        validator: Any, allowed: Any, instance: Any, schema: Any
    ) -> Iterator[Any]:
        patterns = schema.get("patternProperties")
        if not patterns or not validator.is_type(instance, "object"):
            yield from original(validator, allowed, instance, schema)
            return
        matchers = [compiled(pattern) for pattern in patterns]
        rest = {k: v for k, v in instance.items() if not any(m.search(k) for m in matchers)}
        plain = {k: v for k, v in schema.items() if k != "patternProperties"}
        yield from original(validator, allowed, rest, plain)

    return additional_properties


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _canonical(item)
        if key in seen:
            yield ValidationError(f"{quoted(instance)} has non-unique elements")
            return
        seen.add(key)


def _canonical(value: Any) -> Any:
    """A hashable key equal for JSON-equal values: 1 and 1.0 alike, true and 1 not."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, list):
        return ("array", tuple(_canonical(each) for each in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))
    return ("value", value)  # a str, an int, a float
