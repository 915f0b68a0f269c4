"""What both OpenAI wire formats share when building a request from a `ModelInput`.

The conversation's wire forms are built incrementally (`WireLog`): when the items are the
driver's `Window` onto a run's append-only log, each item is converted once, the result is
kept in the log's memo, and a call copies out the slice it sends. Any other sequence of items
is converted whole, by the same code, so both paths send the same body.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from typing import Generic, TypeVar

import openai

from helikon.core.items import CompactionSummary, Item, ModelSettings
from helikon.core.state import ModelRequest
from helikon.models.window import Window

T = TypeVar("T")
W = TypeVar("W")

SUMMARY_PREFIX = "Summary of the conversation so far:\n"


def model_view(items: Sequence[Item]) -> Sequence[Item]:
    """The items the model sees: from the latest compaction summary on, if there is one."""
    for index in range(len(items) - 1, -1, -1):
        if isinstance(items[index], CompactionSummary):
            return items[index:]
    return items


class WireLog(Generic[W]):
    """The wire forms of a log's items, in order, each item converted once (`extend`).

    `forms[at[p]]` is the first form that position `p` of the log added (a position that adds
    none, or joins the form before it, maps to the next one); `summaries` are the positions
    of the compaction summaries. A subclass says how an item becomes forms (`add`), and
    whether the forms of a position can change once later items are added (`joins`: then a
    window that ends before the log converted so far is not served from it).
    """

    joins = False

    def __init__(self) -> None:
        self.forms: list[W] = []
        self.at: list[int] = []
        self.summaries: list[int] = []

    def add(self, item: Item) -> None:
        raise NotImplementedError

    def extend(self, items: Iterable[Item]) -> None:
        at, forms, add = self.at, self.forms, self.add
        for item in items:
            if isinstance(item, CompactionSummary):
                self.summaries.append(len(at))
            at.append(len(forms))
            add(item)

    def view(self, window: Window) -> list[W] | None:
        """The forms of what the model sees of `window` (from its latest summary on), or
        None when this log cannot say (the caller then converts the window whole)."""
        converted, end = len(self.at), window.end
        if converted < end:
            self.extend(window.since(converted))
        elif converted > end and self.joins:
            return None
        first = bisect_left(self.summaries, end) - 1
        summary = self.summaries[first] if first >= 0 else -1
        start = summary if summary >= window.start else window.start
        if self.joins and start != summary and start != 0:
            return None  # forms before `start` may have taken in items from it on
        return self.forms[self._index(start) : self._index(end)]

    def _index(self, position: int) -> int:
        """Where the forms of `position` begin (the end of the forms, past the log's end)."""
        return self.at[position] if position < len(self.at) else len(self.forms)


def wire_forms(items: Sequence[Item], key: str, new_log: Callable[[], WireLog[W]]) -> list[W]:
    """The wire forms of the items the model sees (`model_view`), a new list.

    When `items` is a `Window`, the forms come from the `WireLog` kept in its memo under
    `key` (made by `new_log` on first use), so each item of the run is converted once.
    """
    if isinstance(items, Window):
        log = items.memo.get(key)
        if not isinstance(log, WireLog):
            log = items.memo[key] = new_log()
        forms = log.view(items)
        if forms is not None:
            return forms
    whole = new_log()
    whole.extend(model_view(items))
    return whole.forms


def extra_instruction(request: ModelRequest) -> str | None:
    """The instruction appended after the conversation: the request's prompt, repair errors."""
    parts: list[str] = []
    if request.prompt:
        parts.append(request.prompt)
    if request.repair_errors:
        errors = "; ".join(request.repair_errors)
        parts.append(
            f"Your previous answer did not validate: {errors}. "
            "Answer again with JSON that matches the schema."
        )
    return "\n\n".join(parts) or None


def merged(settings: ModelSettings, defaults: ModelSettings) -> ModelSettings:
    """`settings`, with each field it leaves unset taken from `defaults`."""
    values = {}
    for name in (f.name for f in fields(ModelSettings)):
        own = getattr(settings, name)
        values[name] = own if own is not None else getattr(defaults, name)
    return ModelSettings(**values)


def as_given(name: str, conversation: Sequence[object]) -> dict[str, object]:
    """`extra_body` for a call: the conversation under its parameter's `name`, sent as is.

    The client walks every typed parameter against its declared type on each call, every
    message against every message type of the union (about 60 ms of CPU for 400 messages
    on the machine bench/request.py ran on, growing with the conversation), an identity
    for the plain JSON helikon builds. `extra_body` goes into the request body as given,
    over the typed parameters, so the body on the wire is the same, without that walk.
    """
    return {name: conversation}


def given(value: T | None) -> T | openai.Omit:
    """`value`, or the client's "leave it out" marker when it is None."""
    return openai.omit if value is None else value
