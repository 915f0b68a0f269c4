"""Traces: every transition of a run, recorded as JSON lines, and read back.

A trace file starts with a versioned `TraceHeader` (agent, chart name and digest, helikon
version) and holds one `TransitionTrace` per transition: the state before, the input, the
row that matched with every guard checked, the state after, the events, the next action and
the appended items. Events that came from effects rather than transitions (token deltas,
`AgentUpdated`, `RunSuspended`, ...) are kept as `EffectTrace` lines, so the full stream can
be rebuilt. Runs nested in a run (handoff targets, agents as tools) write to the same file,
each line naming its `run_id`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, Literal, Protocol

from pydantic import Field, ValidationError

from helikon.core.codec import dumps, from_data
from helikon.core.errors import HelikonError
from helikon.core.events import TERMINAL_EVENTS, AgentEvent
from helikon.core.items import Item
from helikon.core.state import LoopState, NextAction, TransitionInput
from helikon.core.values import value

if TYPE_CHECKING:
    from helikon.run.driver import Run, TransitionRecord

TRACE_VERSION = 1


class TraceError(HelikonError, ValueError):
    """A trace that cannot be read: the message names the file, the line and the problem."""


@value
class TraceHeader:
    agent: str
    run_id: str
    chart: str
    chart_digest: str
    helikon_version: str
    version: int = TRACE_VERSION
    source: str | None = None
    kind: Literal["header"] = field(default="header", init=False)


@value
class RowTrace:
    """The row a transition took: its index and every guard checked, with its value."""

    index: int
    source: str
    input_kind: str
    target: str
    action: str
    checked: tuple[tuple[str, bool], ...]


@value
class TransitionTrace:
    run_id: str
    seq: int
    state_before: LoopState
    input: TransitionInput
    row: RowTrace
    state_after: LoopState
    events: tuple[AgentEvent, ...]
    next_action: NextAction
    appends: tuple[Item, ...]
    kind: Literal["transition"] = field(default="transition", init=False)


@value
class EffectTrace:
    """An event an effect produced between transition `after_seq` and the next."""

    run_id: str
    after_seq: int
    event: AgentEvent
    kind: Literal["effect"] = field(default="effect", init=False)


TraceLine = Annotated[TraceHeader | TransitionTrace | EffectTrace, Field(discriminator="kind")]


class TraceSink(Protocol):
    """Receives a run's trace as it happens (`Run(trace=...)`)."""

    def started(self, run: Run) -> None: ...
    def transition(self, run: Run, record: TransitionRecord) -> None: ...
    def effect(self, run: Run, event: Any) -> None: ...


def header_of(run: Run, source: str | None = None) -> TraceHeader:
    """The header of `run`'s trace; `source` names where its agent is defined (a chart file
    or module), so a debugger can rebuild the agent to replay the trace."""
    from helikon import __version__

    table = run.ctx.table
    return TraceHeader(
        run.agent.name, run.run_id, table.name, table.digest, __version__, source=source
    )


def transition_trace(run: Run, record: TransitionRecord) -> TransitionTrace:
    from helikon.core.transition import match_row

    match = match_row(record.state_before, record.input, run.ctx)
    row = match.row
    outcome = record.outcome
    return TransitionTrace(
        run.run_id,
        record.seq,
        record.state_before,
        record.input,
        RowTrace(row.index, row.source, row.input_kind, row.target, row.action, match.checked),
        outcome.next_state,
        outcome.events,
        outcome.next_action,
        outcome.conversation_appends,
    )


@dataclass
class Trace:
    """A trace read back: its header and its lines in order."""

    header: TraceHeader
    lines: list[TransitionTrace | EffectTrace]

    def transitions(self, run_id: str | None = None) -> list[TransitionTrace]:
        return [
            line
            for line in self.lines
            if isinstance(line, TransitionTrace) and (run_id is None or line.run_id == run_id)
        ]

    def events(self, run_id: str | None = None) -> list[Any]:
        """Events in order: one run's own (`run_id`), or the stream as the root run showed it.

        The root's stream forwards nested runs' events except their terminal one.
        """
        root = self.header.run_id
        events: list[Any] = []
        for line in self.lines:
            if run_id is not None and line.run_id != run_id:
                continue
            found = [line.event] if isinstance(line, EffectTrace) else list(line.events)
            if run_id is None and line.run_id != root:
                found = [event for event in found if event.type not in TERMINAL_EVENTS]
            events.extend(found)
        return events


class TraceWriter:
    """Writes a trace as JSON lines to a path or an open text file; one line per record."""

    def __init__(self, target: str | Path | IO[str], *, source: str | None = None) -> None:
        if isinstance(target, (str, Path)):
            self._file: IO[str] = open(target, "w", encoding="utf-8")  # noqa: SIM115
            self._owned = True
        else:
            self._file, self._owned = target, False
        self._wrote_header = False
        self._last_seq: dict[str, int] = {}
        self.source = source

    def write(self, line: TraceHeader | TransitionTrace | EffectTrace) -> None:
        """Write one line (the debugger writes recorded histories with this)."""
        if isinstance(line, TraceHeader):
            self._wrote_header = True
        self._write(line)

    def _write(self, line: Any) -> None:
        self._file.write(dumps(line, TraceLine) + "\n")
        self._file.flush()

    def started(self, run: Run) -> None:
        if not self._wrote_header:
            self._wrote_header = True
            self._write(header_of(run, self.source))

    def transition(self, run: Run, record: TransitionRecord) -> None:
        self._last_seq[run.run_id] = record.seq
        self._write(transition_trace(run, record))

    def effect(self, run: Run, event: Any) -> None:
        self._write(EffectTrace(run.run_id, self._last_seq.get(run.run_id, run.seq), event))

    def close(self) -> None:
        if self._owned:
            self._file.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trace(source: str | Path | Iterable[str]) -> Trace:
    """Read a trace file (or its lines).

    Raises:
        TraceError: the file is missing, empty, of another version, or a line is not valid;
            the message names the line.
    """
    name = str(source) if isinstance(source, (str, Path)) else "<trace>"
    header: TraceHeader | None = None
    lines: list[TransitionTrace | EffectTrace] = []
    for number, text in _numbered(source, name):
        if not text.strip():
            continue
        try:
            parsed = from_data(TraceLine, json.loads(text))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"]) or "the line"
            raise TraceError(
                f"{name}:{number}: not a valid trace line: {where}: {first['msg']}"
            ) from None
        except ValueError as exc:
            raise TraceError(f"{name}:{number}: not a valid trace line: not JSON ({exc})") from None
        if isinstance(parsed, TraceHeader):
            if header is not None or lines:
                raise TraceError(f"{name}:{number}: a header may only start the trace")
            if parsed.version != TRACE_VERSION:
                raise TraceError(
                    f"{name}:{number}: trace version {parsed.version} is not supported "
                    f"(this helikon reads version {TRACE_VERSION})"
                )
            header = parsed
        elif header is None:
            raise TraceError(f"{name}:{number}: the trace does not start with a header")
        else:
            lines.append(parsed)
    if header is None:
        raise TraceError(f"{name}: empty trace")
    return Trace(header, lines)


def _numbered(source: str | Path | Iterable[str], name: str) -> Iterator[tuple[int, str]]:
    if isinstance(source, (str, Path)):
        try:
            with open(source, encoding="utf-8") as file:
                yield from enumerate(file, start=1)
        except OSError as exc:
            raise TraceError(f"cannot read trace {name}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise TraceError(f"{name}: not a trace: the file is not UTF-8 text") from None
    else:
        yield from enumerate(source, start=1)
