"""`@value`: the loop's immutable values, frozen for the type checker and cheap to build.

Every state, input, action, event, item and error is a `@value` class: a slotted dataclass
that mypy treats as frozen (assigning a field is a type error). At run time, immutability is
enforced only when HELIKON_STRICT_VALUES=1 is set (the test suite sets it), because
`dataclass(frozen=True)` builds each field through `object.__setattr__`, which measured about
four times the cost of a plain slotted `__init__` here, and `transition` builds several values
per step (bench/transition.py). Either way the values compare by field, hash, and round-trip
through JSON with pydantic (helikon.core.codec).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

STRICT_VALUES = os.environ.get("HELIKON_STRICT_VALUES", "") not in ("", "0")


@overload
def value(cls: type[T], /) -> type[T]: ...
@overload
def value(*, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, eq_default=True)
def value(cls: Any = None, /, *, kw_only: bool = False) -> Any:
    """Make `cls` an immutable value (see the module docstring)."""

    def wrap(c: type[T]) -> type[T]:
        return dataclass(
            c, frozen=STRICT_VALUES, slots=True, unsafe_hash=not STRICT_VALUES, kw_only=kw_only
        )

    return wrap if cls is None else wrap(cls)
