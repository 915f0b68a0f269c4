"""How a run ends: `RunResult`, and `RunResultStreaming`, the event stream that collects it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from helikon.core.errors import RunError
from helikon.core.events import AgentEvent, RunCompleted, RunFailed, RunSuspended
from helikon.core.items import ZERO_USAGE, Usage
from helikon.run.driver import Run
from helikon.run.snapshot import RunSnapshot
from helikon.trace import TraceSink, TraceWriter
from helikon.trace.guarded import GuardedSink


def open_trace(trace: Any) -> tuple[TraceSink | None, Any]:
    """(the sink, what to close at the end) for a sink or a path given as `trace=`.

    A path's writer is guarded (`GuardedSink`), closing it included: a trace file that
    cannot be written or closed never fails the run.
    """
    if isinstance(trace, (str, Path)):
        writer = GuardedSink(TraceWriter(trace), owned=True)
        return writer, writer
    return trace, None


@dataclass(frozen=True)
class RunResult:
    """How a run ended.

    `final_output` is the final text, `output` the `FinalOutput` (text, typed value, usage),
    `events` every event streamed. A suspended run has `pending` approval requests and a
    `snapshot` to resume from, and no output.
    """

    final_output: str | None
    events: tuple[AgentEvent, ...]
    usage: Usage
    output: Any = None
    pending: tuple[Any, ...] = ()
    snapshot: RunSnapshot | None = None

    @property
    def suspended(self) -> bool:
        return self.snapshot is not None


@dataclass
class RunResultStreaming:
    """A run's event stream: iterate it (`async for event in result`), or `collect()` it."""

    source: Run | AsyncIterator[AgentEvent] | RunResultStreaming
    events: list[AgentEvent] = field(default_factory=list)
    timeout: float | None = None
    closing: Any = None  # closed when the stream ends (a trace file the run writes)

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[AgentEvent]:
        source = self.source
        if isinstance(source, RunResultStreaming):
            source = source.source
        stream = source.stream() if isinstance(source, Run) else source
        if self.timeout is not None and isinstance(source, Run):
            source.expire_after(self.timeout)
        try:
            async with aclosing(stream) as events:  # type: ignore[type-var]
                async for event in events:
                    self.events.append(event)
                    yield event
        finally:
            if isinstance(source, Run):
                source.close()
            if self.closing is not None:
                self.closing.close()

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the run: it ends with `RunFailed(Cancelled(reason))`."""
        if self.run is not None:
            self.run.cancel(reason)

    @property
    def run(self) -> Run | None:
        source = self.source
        if isinstance(source, RunResultStreaming):
            return source.run
        return source if isinstance(source, Run) else None

    async def collect(self) -> RunResult:
        """Run to the end and return the `RunResult`.

        Raises:
            RunError: the run failed; `.error` is the `AgentError`.
        """
        async for _ in self:
            pass
        last = self.events[-1] if self.events else None
        if isinstance(last, RunFailed):
            raise RunError(last.error, self.run.usage if self.run is not None else None)
        run = self.run
        if isinstance(last, RunSuspended):
            usage = run.usage if run else ZERO_USAGE
            snapshot = run.snapshot() if run else None
            return RunResult(None, tuple(self.events), usage, None, last.pending, snapshot)
        if not isinstance(last, RunCompleted):
            raise RuntimeError("the run's stream ended without RunCompleted or RunFailed")
        output = last.output
        return RunResult(output.text, tuple(self.events), output.usage, output)

    async def collect_typed(self, output_type: type[Any]) -> Any:
        """Run to the end and return the output validated as `output_type`.

        The typed value of a run with an output type; for a plain-text run, its final text
        (so `collect_typed(str)` works on any run that completed).

        Raises:
            RunError: the run failed.
            ValueError: the run suspended for approval and has no output yet.
            pydantic.ValidationError: the output is not a valid `output_type`.
        """
        result = await self.collect()
        if result.output is None:
            raise ValueError("the run suspended for approval; it has no output yet")
        output = result.output
        value = output.value if output.value is not None else output.text
        return TypeAdapter(output_type).validate_python(value)
