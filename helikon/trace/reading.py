"""Reading traces back: `read_trace` checks every line and names the first bad one."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from helikon.core.codec import from_data
from helikon.core.events import TERMINAL_EVENTS
from helikon.trace.lines import (
    TRACE_VERSION,
    EffectTrace,
    TraceError,
    TraceHeader,
    TraceLine,
    TransitionTrace,
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
