"""The observer a run reports its spans to: `RunObserver`, and `observer_for`, which gives
a run its own (OpenTelemetry's, `helikon.otel`) or None.

The observer is one of a run's listeners (`helikon.run.listening`): the port tells it when
the run begins and ends and of each transition (its record redacted when the run redacts),
last of all the listeners. Its effect hooks are no reports, and the driver asks it directly:
around each model call, handoff and approval, and around each tool call. A run without an
observer pays one `is None` test at each. `helikon.otel` is imported here only,
lazily, and only when `opentelemetry-api` is installed (the `otel` extra); without it, or
without a tracer provider (`RunConfig(tracer_provider=...)`, else a global one), a run has
no observer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from helikon.core.items import ToolCall, ToolResult

__all__ = ["Ending", "RunObserver", "observer_for"]


class Ending(Protocol):
    """An effect's open span: `end` closes it with the effect's outcome (its next input)."""

    def end(self, outcome: Any) -> None: ...


class RunObserver(Protocol):
    """What a run reports to (`helikon.otel.RunSpans` is one); it never raises."""

    def begin(self) -> None: ...
    def transition(self, record: Any) -> None: ...
    def chat(self, request: Any) -> Ending | None: ...
    def action(self, action: Any) -> Ending | None: ...
    def tool_call(
        self, call: ToolCall, invoke: Callable[[], Awaitable[ToolResult]]
    ) -> Awaitable[ToolResult]: ...
    def nested(self, child: Any) -> RunObserver: ...
    def end(self) -> None: ...


_factory: Callable[[Any], RunObserver | None] | None = None
_loaded = False


def observer_for(run: Any) -> RunObserver | None:
    """`run`'s observer: its OpenTelemetry spans when the `otel` extra is installed and the
    run has a tracer provider; else None."""
    factory = _factory if _loaded else _load()
    return factory(run) if factory is not None else None


def _load() -> Callable[[Any], RunObserver | None] | None:
    global _factory, _loaded
    _loaded = True
    try:
        from helikon.otel import observer_for as spans_for
    except ModuleNotFoundError as exc:
        if exc.name != "opentelemetry":  # helikon.otel names the extra it lacks so
            raise
        return None
    _factory = spans_for
    return _factory
