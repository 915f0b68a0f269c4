"""JSON for every loop value, through pydantic: validation at the boundary, exact round trips.

The values themselves are frozen dataclasses, built directly inside the pure core; here
pydantic checks what comes from outside (files, stores, providers) and serializes what goes
out. `dumps(x)` then `loads(Type, text)` gives back a value equal to `x`.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter

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


def dumps(value: Any, kind: Any = None) -> str:
    """`value` as compact JSON; `kind` (a type or union) defaults to the value's own type."""
    chosen = type(value) if kind is None else kind
    return adapter(chosen).dump_json(value, by_alias=True).decode()


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
    return adapter(kind).validate_json(text)


def from_data(kind: Any, data: Any) -> Any:
    """Validate JSON-able Python data as `kind`."""
    return adapter(kind).validate_python(data)
