"""The effects a chart's effect phases run: named async callables, their small context, and
what running one yields.

An effect is the user's own IO (a retrieval, a code step, an HTTP call) that a custom phase
needs between two transitions. It is a plain registered async callable with a name: it takes
an `EffectContext` (JSON-able: the run, the step, the arguments the chart's action chose, an
idempotency key) and returns a JSON value. Nothing else crosses, so the same callable can be
run by the driver here or by a Temporal activity.

The driver runs it (`helikon.run.effects`) and feeds its result back as an `EffectResult`
input, traced and replayable like a model response. With a run store, the effect is recorded
before it starts and its result when it returns, like a tool call; a run resumed after a
crash reuses a finished effect's result, and an effect in flight at the crash runs again only
when it is `idempotent` (with the same idempotency key), else the run fails with
`EffectFailed(interrupted=True)`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from pydantic import JsonValue

from helikon.core.errors import EffectFailed

EffectFn = Callable[["EffectContext"], Awaitable[JsonValue]]


@dataclass(frozen=True, slots=True)
class EffectContext:
    """What an effect is given: all plain data, so it can cross a process boundary.

    Args:
        run_id: the run the effect belongs to.
        seq: the step that asked for it (the transition's seq).
        effect: the effect's name.
        args: the arguments the chart's action chose (JSON).
        idempotency_key: `{run_id}:{seq}:{effect}`, the same when a resumed run runs the
            effect again: pass it on to a service that deduplicates requests.
    """

    run_id: str
    seq: int
    effect: str
    args: JsonValue
    idempotency_key: str

    @classmethod
    def of(cls, run_id: str, seq: int, effect: str, args: JsonValue) -> EffectContext:
        return cls(run_id, seq, effect, args, idempotency_key(run_id, seq, effect))


def idempotency_key(run_id: str, seq: int, effect: str) -> str:
    """The key an effect's runs share, on the first try and after a resume."""
    return f"{run_id}:{seq}:{effect}"


@dataclass(frozen=True, slots=True)
class Effect:
    """A named effect: `fn(context)` returns its JSON result.

    Args:
        name: the name a chart's effect phase runs it by (`phase(..., effect=name)`).
        fn: the async callable.
        idempotent: running it twice with the same idempotency key does no harm, so a run
            resumed while it was in flight runs it again (else the run fails, interrupted).
    """

    name: str
    fn: EffectFn
    idempotent: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"an effect's name must be an identifier, got {self.name!r}")

    async def __call__(self, context: EffectContext) -> JsonValue:
        return await self.fn(context)


@overload
def effect(fn: EffectFn, /) -> Effect: ...
@overload
def effect(
    *, name: str | None = None, idempotent: bool = False
) -> Callable[[EffectFn], Effect]: ...


def effect(
    fn: EffectFn | None = None, /, *, name: str | None = None, idempotent: bool = False
) -> Effect | Callable[[EffectFn], Effect]:
    """Make an async function an `Effect`, named after it unless `name` is given; bare
    (`@effect`) or with options (`@effect(idempotent=True)`)."""

    def wrap(function: EffectFn) -> Effect:
        return Effect(name or function.__name__, function, idempotent)

    return wrap if fn is None else wrap(fn)


def effects_by_name(effects: Sequence[Effect]) -> dict[str, Effect]:
    """The agent's effects keyed by name.

    Raises:
        ValueError: two effects share a name, or one is not an `Effect`.
    """
    named: dict[str, Effect] = {}
    for each in effects:
        if not isinstance(each, Effect):
            raise ValueError(f"{each!r} is not an Effect: make it one with @effect")
        if each.name in named:
            raise ValueError(f"two effects are named {each.name!r}")
        named[each.name] = each
    return named


def missing_effects(chart_effects: Mapping[str, str], effects: Mapping[str, Effect]) -> list[str]:
    """The effects the chart's phases run that the agent does not register, as
    `phase runs name` lines (empty when none is missing)."""
    return [
        f"phase {phase} runs effect {name!r}"
        for phase, name in chart_effects.items()
        if name not in effects
    ]


def as_json(effect_name: str, output: Any) -> tuple[JsonValue, str] | EffectFailed:
    """`output` as a JSON value and its text, or why it is not JSON (an object that is not
    plain data, NaN or an infinity, a key that is not text). Tuples read back as lists."""
    try:
        text = json.dumps(output, sort_keys=True, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        return EffectFailed(effect_name, f"returned a value that is not JSON: {exc}")
    key = _key_not_text(output)
    if key is not None:
        return EffectFailed(
            effect_name, f"returned a value that is not JSON: key {key!r} is not text"
        )
    value: JsonValue = json.loads(text)
    return value, text


def _key_not_text(value: Any) -> Any:
    """A dict key somewhere in `value` that is not a string (json.dumps would convert it)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return key
            found = _key_not_text(item)
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for item in value:
            found = _key_not_text(item)
            if found is not None:
                return found
    return None


__all__ = [
    "Effect",
    "EffectContext",
    "EffectFn",
    "as_json",
    "effect",
    "effects_by_name",
    "idempotency_key",
    "missing_effects",
]
