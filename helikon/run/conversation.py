"""The run's conversation: an append-only log, and fixed windows onto it for the model.

A model call sees the conversation from the latest `CompactionSummary` on (the summary
included). `Conversation.window()` returns that as a `Window`: a read-only sequence over the
log between two positions, made without copying. The log only grows, so a window never
changes after it is made; a long run does not pay for copying its history every turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from helikon.core.items import CompactionSummary, Item


class Window(Sequence[Item]):
    """Items `start` up to `end` of an append-only log."""

    __slots__ = ("_end", "_log", "_start")

    def __init__(self, log: list[Item], start: int, end: int) -> None:
        self._log, self._start, self._end = log, start, end

    def __len__(self) -> int:
        return self._end - self._start

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        if isinstance(index, slice):
            return tuple(self)[index]
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError(index)
        return self._log[self._start + position]

    def __iter__(self) -> Iterator[Item]:
        log = self._log
        for position in range(self._start, self._end):
            yield log[position]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Window({list(self)!r})"


class Conversation:
    """The full log of a run's items, in order; nothing is ever removed."""

    __slots__ = ("_items", "_view_start")

    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._items: list[Item] = []
        self._view_start = 0
        self.extend(items)

    def extend(self, items: Iterable[Item]) -> None:
        for item in items:
            if type(item) is CompactionSummary:
                self._view_start = len(self._items)
            self._items.append(item)

    def window(self) -> Window:
        """What the model sees now: from the latest compaction summary to the end."""
        return Window(self._items, self._view_start, len(self._items))

    def items(self) -> tuple[Item, ...]:
        """A copy of the whole log."""
        return tuple(self._items)

    def __len__(self) -> int:
        return len(self._items)
