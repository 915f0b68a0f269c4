"""JSON for every loop value, through pydantic: validation at the boundary, exact round trips.

The values themselves are frozen dataclasses, built directly inside the pure core; here
pydantic checks what comes from outside (files, stores, providers) and serializes what goes
out. `dumps(x)` then `loads(Type, text)` gives back a value equal to `x`.

Text from a JSON wire can hold lone surrogates (`"\\ud800"` decodes to one), which have no
UTF-8 form, so pydantic cannot write them. A value holding one is written by the `json`
module instead, with every non-ASCII character escaped (`\\ud800`, `\\u00e9`): the line is
ASCII, valid UTF-8 anywhere, and reads back as the same text. Every other value is written as
before, byte for byte. (A high surrogate followed by a low one reads back as the character
the pair encodes: JSON spells both the same; a wire never delivers such a pair.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from helikon.core.errors import AgentError
from helikon.core.events import AgentEvent
from helikon.core.items import Item
from helikon.core.state import LoopState, NextAction, TransitionInput, TransitionOutcome

T = TypeVar("T")

STATE: TypeAdapter[Any] = TypeAdapter(LoopState)
INPUT: TypeAdapter[Any] = TypeAdapter(TransitionInput)
ACTION: TypeAdapter[Any] = TypeAdapter(NextAction)
EVENT: TypeAdapter[Any] = TypeAdapter(AgentEvent)
ITEM: TypeAdapter[Any] = TypeAdapter(Item)
ERROR: TypeAdapter[Any] = TypeAdapter(AgentError)
OUTCOME: TypeAdapter[TransitionOutcome] = TypeAdapter(TransitionOutcome)


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def adapter(kind: Any) -> TypeAdapter[Any]:
    """The (cached) adapter for a type or a union such as `LoopState`."""
    found = _ADAPTERS.get(kind)
    if found is None:
        found = _ADAPTERS[kind] = TypeAdapter(kind)
    return found


_ENCODERS: dict[Any, Callable[..., bytes]] = {}


def encoded(value: Any, kind: Any = None) -> bytes:
    """`value` as compact JSON (UTF-8), by its own type unless `kind` is given: `dumps`
    without the lone-surrogate fallback (it raises `PydanticSerializationError`), through
    the serializer itself (`TypeAdapter.dump_json` is a Python call more per value).

    A value written as its own type costs about a third of the same value written as a
    member of a union (pydantic builds a union member as Python data, then encodes that):
    the same bytes, so hot paths write a union-typed part by its own type."""
    chosen = type(value) if kind is None else kind
    found = _ENCODERS.get(chosen)
    if found is None:
        found = _ENCODERS[chosen] = adapter(chosen).serializer.to_json
    return found(value, by_alias=True)


def dumps(value: Any, kind: Any = None) -> str:
    """`value` as compact JSON; `kind` (a type or union) defaults to the value's own type."""
    chosen = type(value) if kind is None else kind
    try:
        return encoded(value, chosen).decode()
    except PydanticSerializationError:
        # A lone surrogate, most likely: pydantic writes UTF-8 only. If the value cannot be
        # serialized at all, `to_data` raises the same error again.
        data = to_data(value, chosen)
        return json.dumps(data, ensure_ascii=True, separators=(",", ":"))


def to_data(value: Any, kind: Any = None) -> Any:
    """`value` as JSON-able Python data (dicts, lists, strings, numbers)."""
    return adapter(type(value) if kind is None else kind).dump_python(
        value, mode="json", by_alias=True
    )


def loads(kind: Any, text: str | bytes) -> Any:
    """Validate JSON text as `kind` (for example `LoopState` or `AgentEvent`).

    Raises:
        pydantic.ValidationError: the text is not a valid `kind`; the error names the field.
    """
    try:
        return adapter(kind).validate_json(text)
    except ValidationError as refused:
        # pydantic's parser refuses a lone surrogate's escape; the json module reads it.
        source = text if isinstance(text, str) else text.decode("utf-8", "replace")
        if _SURROGATE_ESCAPE.search(source) is None:
            raise
        try:
            data = json.loads(text)
        except ValueError:
            raise refused from None
    return from_data(kind, data)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def from_data(kind: Any, data: Any) -> Any:
    """Validate JSON-able Python data as `kind`."""
    return adapter(kind).validate_python(data)
