"""Reading traces back: `read_trace` checks every line and names the first bad one."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from helikon.core.codec import from_data
from helikon.core.events import TERMINAL_EVENTS
from helikon.core.quoting import cut, quoted
from helikon.core.table import ChartData, TransitionTable
from helikon.trace.lines import (
    TRACE_VERSION,
    EffectTrace,
    RunTrace,
    TraceError,
    TraceHeader,
    TraceLine,
    TransitionTrace,
)

Line = RunTrace | TransitionTrace | EffectTrace
"""A trace line after the header: a nested run's opening, a transition, or an effect."""


@dataclass
class Trace:
    """A trace read back: its header, its lines in order, and the charts its runs ran on.

    `charts` holds every chart the trace recorded, by digest; `chart_of` names each run's.
    """

    header: TraceHeader
    lines: list[Line]
    charts: dict[str, ChartData] = field(default_factory=dict)
    chart_of: dict[str, str] = field(default_factory=dict)

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
            if isinstance(line, RunTrace) or (run_id is not None and line.run_id != run_id):
                continue
            found = [line.event] if isinstance(line, EffectTrace) else list(line.events)
            if run_id is None and line.run_id != root:
                found = [event for event in found if event.type not in TERMINAL_EVENTS]
            events.extend(found)
        return events

    @property
    def runs(self) -> dict[str, RunTrace]:
        """The nested runs' opening lines, by run id."""
        return {line.run_id: line for line in self.lines if isinstance(line, RunTrace)}

    def nested(self, run_id: str) -> Trace:
        """The trace of nested run `run_id` alone, as if it had been traced by itself: its
        lines and its own nested runs' (a handoff target's, an agent as a tool's).

        Raises:
            TraceError: the trace opens no nested run `run_id`.
        """
        opened = self.runs.get(run_id)
        if opened is None:
            raise TraceError(f"the trace opens no nested run {quoted(run_id)}")
        header = TraceHeader(
            opened.agent,
            run_id,
            opened.chart,
            opened.chart_digest,
            self.header.helikon_version,
            self.charts[self.chart_of[run_id]],
        )

        def inside(line_run: str) -> bool:
            return line_run == run_id or line_run.startswith(run_id + "/")

        lines = [
            line
            for line in self.lines
            if inside(line.run_id) and not (isinstance(line, RunTrace) and line.run_id == run_id)
        ]
        chart_of = {run: digest for run, digest in self.chart_of.items() if inside(run)}
        return Trace(header, lines, self.charts, chart_of)

    def table(self, run_id: str | None = None) -> TransitionTable:
        """The chart run `run_id` (default: the root) ran on, rebuilt from the trace's record:
        it draws and shows rows; it cannot run (`TransitionTable.runnable` is False)."""
        if run_id is None or run_id == self.header.run_id:
            return self.header.table.table()
        return self.charts[self.chart_of[run_id]].table()


def read_trace(source: str | Path | Iterable[str]) -> Trace:
    """Read a trace file (or its lines), checking every line.

    Nothing in a trace is executed or imported. Every transition's row is checked against
    the chart the trace recorded for its run, so a trace whose rows, charts or digests were
    edited is refused, as is a line that is not JSON, nests too deeply, or fails validation.

    Raises:
        TraceError: the file is missing, empty, of another version, or a line is not valid;
            the message names the line and the field.
    """
    name = str(source) if isinstance(source, (str, Path)) else "<trace>"
    reader = _Reader(name)
    for number, text in _numbered(source, name):
        if text.strip():
            reader.add(number, text)
    return reader.finish()


class _Reader:
    def __init__(self, name: str) -> None:
        self.name = name
        self.header: TraceHeader | None = None
        self.lines: list[Line] = []
        self.charts: dict[str, ChartData] = {}
        self.chart_of: dict[str, str] = {}

    def fail(self, number: int, problem: str) -> TraceError:
        return TraceError(f"{self.name}:{number}: {problem}")

    def add(self, number: int, text: str) -> None:
        parsed = self.parse(number, text)
        if isinstance(parsed, TraceHeader):
            if self.header is not None:
                raise self.fail(number, "a header may only start the trace")
            self.header = parsed
            self.chart_of[parsed.run_id] = self.chart(number, "header", parsed.table, parsed)
        elif self.header is None:
            raise self.fail(number, "the trace does not start with a header")
        elif isinstance(parsed, RunTrace):
            self.open_run(number, parsed)
        else:
            if parsed.run_id not in self.chart_of:
                raise self.fail(number, f"run_id: run {quoted(parsed.run_id)} was never opened")
            if isinstance(parsed, TransitionTrace):
                self.check_row(number, parsed)
            self.lines.append(parsed)

    def parse(self, number: int, text: str) -> Any:
        try:
            data = json.loads(text)
        except RecursionError:
            raise self.fail(number, "not a valid trace line: nested too deeply") from None
        except ValueError as exc:
            raise self.fail(number, f"not a valid trace line: not JSON ({cut(str(exc))})") from None
        if not isinstance(data, dict):
            raise self.fail(number, "not a valid trace line: not a JSON object")
        if self.header is None and data.get("kind") == "header":
            version = data.get("version")
            if version != TRACE_VERSION:
                raise self.fail(
                    number,
                    f"trace version {quoted(version)} is not supported (this helikon reads version "
                    f"{TRACE_VERSION}; record the run again)",
                )
        try:
            return from_data(TraceLine, data)
        except RecursionError:
            raise self.fail(number, "not a valid trace line: nested too deeply") from None
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = cut(".".join(str(part) for part in first["loc"])) or "the line"
            raise self.fail(
                number, f"not a valid trace line: {where}: {cut(first['msg'])}"
            ) from None

    def chart(self, number: int, field: str, data: ChartData | None, line: Any) -> str:
        """Record the chart a header or run line names; its digest."""
        digest: str = line.chart_digest
        if data is None:
            if digest not in self.charts:
                raise self.fail(
                    number, f"{field}.chart_digest: chart {digest[:12]} was never recorded"
                )
            return digest
        problems = data.problems()
        if problems:
            raise self.fail(number, f"{field}.table: not a chart: {problems[0]}")
        if data.digest != digest:
            raise self.fail(
                number,
                f"{field}.table: the recorded chart's digest is {data.digest[:12]}, not "
                f"{digest[:12]}: the trace was edited",
            )
        self.charts.setdefault(digest, data)
        return digest

    def open_run(self, number: int, line: RunTrace) -> None:
        digest = self.chart(number, "run", line.table, line)
        if self.chart_of.setdefault(line.run_id, digest) != digest:
            raise self.fail(
                number, f"run_id: run {quoted(line.run_id)} was opened before on another chart"
            )
        self.lines.append(line)

    def check_row(self, number: int, line: TransitionTrace) -> None:
        chart = self.charts[self.chart_of[line.run_id]]
        row = line.row
        if not 0 <= row.index < len(chart.rows):
            raise self.fail(
                number,
                f"row.index: {row.index} is not a row of chart {quoted(chart.name)} "
                f"(it has rows 0 to {len(chart.rows) - 1})",
            )
        expected = chart.rows[row.index]
        recorded = (row.source, row.input_kind, row.target, row.action)
        if recorded != (expected.source, expected.input_kind, expected.target, expected.action):
            raise self.fail(
                number,
                f"row: row {row.index} of chart {quoted(chart.name)} is {_step(expected)}, "
                f"not {_step(row)}",
            )
        phases = (line.state_before.phase, line.input.kind, line.state_after.phase)
        if phases != (row.source, row.input_kind, row.target) and not _guardrail_refused(line):
            done = f"{cut(phases[0])} -{cut(phases[1])}-> {cut(phases[2])}"
            raise self.fail(
                number,
                f"state_before/input/state_after: {done} is not what row {row.index} does "
                f"({_step(row)})",
            )

    def finish(self) -> Trace:
        if self.header is None:
            raise TraceError(f"{self.name}: empty trace")
        return Trace(self.header, self.lines, self.charts, self.chart_of)


def _step(row: Any) -> str:
    """A row as `source -input-> target`, each name cut short (the trace may hold any)."""
    return f"{cut(row.source)} -{cut(row.input_kind)}-> {cut(row.target)}"


def _guardrail_refused(line: TransitionTrace) -> bool:
    """An output guardrail turned this completing step into a failure (the row went to
    Done; the driver's guardrail made the outcome Failed, as the contract says)."""
    error = getattr(line.state_after, "error", None)
    kinds = ("guardrail_tripped", "guardrail_failed")
    return (
        line.row.target == "Done"
        and line.state_after.phase == "Failed"
        and getattr(error, "kind", None) in kinds
        and getattr(error, "stage", None) == "output"
    )


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
