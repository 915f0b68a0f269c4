"""`Window`: what the driver passes as `ModelInput.items`, a view onto an append-only log.

A run's conversation only grows (`helikon.run.conversation.Conversation`), so the item at a
position of its log never changes. A window is the log between two positions, made without
copying, and it carries the log's `memo`: a dict every window onto that log shares, where a
model adapter keeps what it derived from the items (their wire forms, each built once), so a
long run does not pay for converting its whole history on every call. The memo lives and
dies with the conversation; no adapter needs a cache of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from helikon.core.items import Item


class Window(Sequence[Item]):
    """Items `start` up to `end` of an append-only log.

    Args:
        log: the log; only ever appended to, as long as any window onto it is in use.
        start: the first position in the window.
        end: the position after the last one in the window.
        memo: what adapters derived from the log's items, shared by every window onto it
            (a new, empty one when None: nothing is then shared).
    """

    __slots__ = ("_end", "_log", "_memo", "_start")

    def __init__(
        self, log: list[Item], start: int, end: int, memo: dict[str, Any] | None = None
    ) -> None:
        self._log, self._start, self._end = log, start, end
        self._memo = {} if memo is None else memo

    @property
    def start(self) -> int:
        """The window's first position in the log."""
        return self._start

    @property
    def end(self) -> int:
        """The position in the log after the window's last item."""
        return self._end

    @property
    def memo(self) -> dict[str, Any]:
        """The log's memo: adapters keep derived forms of its items here, under their own key."""
        return self._memo

    def since(self, position: int) -> list[Item]:
        """The log's items from `position` (which may be before `start`) to the window's end."""
        return self._log[position : self._end]

    def __len__(self) -> int:
        return self._end - self._start

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        if isinstance(index, slice):
            return tuple(self._log[self._start : self._end][index])
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError(index)
        return self._log[self._start + position]

    def __iter__(self) -> Iterator[Item]:
        return iter(self._log[self._start : self._end])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Window({list(self)!r})"
