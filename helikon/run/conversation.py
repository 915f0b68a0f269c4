"""The run's conversation: an append-only log, and fixed windows onto it for the model.

A model call sees the conversation from the latest `CompactionSummary` on (the summary
included). `Conversation.window()` returns that as a `Window` (`helikon.models.window`): a
read-only sequence over the log between two positions, made without copying, carrying the
log's memo, where a model adapter keeps each item's wire form once it has built it. The log
only grows, so a window never changes after it is made; a long run pays neither for copying
its history nor for converting it again every turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from helikon.core.items import CompactionSummary, Item
from helikon.models.window import Window

__all__ = ["Conversation", "Window"]


class Conversation:
    """The full log of a run's items, in order; nothing is ever removed."""

    __slots__ = ("_items", "_memo", "_view_start")

    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._items: list[Item] = []
        self._memo: dict[str, Any] = {}
        self._view_start = 0
        self.extend(items)

    def extend(self, items: Iterable[Item]) -> None:
        for item in items:
            if type(item) is CompactionSummary:
                self._view_start = len(self._items)
            self._items.append(item)

    def window(self) -> Window:
        """What the model sees now: from the latest compaction summary to the end."""
        return Window(self._items, self._view_start, len(self._items), self._memo)

    def items(self) -> tuple[Item, ...]:
        """A copy of the whole log."""
        return tuple(self._items)

    def __len__(self) -> int:
        return len(self._items)
