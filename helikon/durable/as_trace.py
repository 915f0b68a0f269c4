"""A stored run as a trace: what `helikon runs export` writes, so every tool that reads a
trace (`read_trace`, `helikon trace`, `helikon debug --trace`, `helikon studio --trace`)
reads a run from a store.

Theory of operation: a store keeps less than a trace shows, and nothing it lacks is made
up. A record has no state before: it is the previous record's state after, and a run's
first is its chart's initial state (every run, nested ones too, starts at turn 0 with no
usage). A record names its row by index: the row's ends and action come from the chart the
store keeps for the run, with the guards the record checked. Deltas were never stored, so
the trace has none. Runs nested in the run (handoff targets, agents as tools; nested in
those, too) are placed where the parent's stream had them: the driver names a handoff's
target `<run>/<seq>` and an agent called as a tool `<run>/<seq>:<call_id>`, `seq` being
the parent's record after which it ran, so a child's lines follow that record and the
events effects produced after it.

Named `as_trace` rather than `export`: `helikon.export` is the package of renderers (DOT,
HTML, ...), a layer above this one; this module only turns store values into trace values.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

from helikon._version import __version__
from helikon.core.chart.actions import model_phase
from helikon.core.codec import dumps, loads
from helikon.core.items import ZERO_USAGE
from helikon.core.quoting import cut, quoted
from helikon.core.state import LoopState
from helikon.core.table import ChartData
from helikon.durable.records import StepRecord, StoreCorrupt, StoredRun
from helikon.durable.store import RunStore
from helikon.trace import (
    EffectTrace,
    RowTrace,
    RunTrace,
    Trace,
    TraceHeader,
    TraceLine,
    TraceWriter,
    TransitionTrace,
    read_trace,
)
from helikon.trace.times import iso

TraceLines = list[TraceHeader | RunTrace | TransitionTrace | EffectTrace]


def export_trace(store: RunStore, run_id: str, target: str | Path | IO[str]) -> int:
    """Write the stored run `run_id` (with the runs nested in it) as a trace file.

    The lines are made, and every row checked, before `target` is opened, so a run that
    cannot be exported leaves no file behind.

    Args:
        store: the store that holds the run.
        run_id: a run of the store, usually a top-level one (a nested run exports alone).
        target: a path, or an open text file (left open).

    Returns:
        How many lines were written.

    Raises:
        RunNotFound: no such run.
        StoreCorrupt: a row does not check out, a run's chart is missing or is not the one
            its header names, or a record names a row its chart lacks.
    """
    lines = trace_lines(store, run_id)
    with TraceWriter(target) as writer:
        for line in lines:
            writer.write(line)
    return len(lines)


def trace_lines(store: RunStore, run_id: str) -> TraceLines:
    """The trace of the stored run `run_id`: its header, then its lines and its nested
    runs' in stream order (see the module docstring).

    Raises:
        RunNotFound, StoreCorrupt: as `export_trace`.
    """
    root = store.get(run_id)
    chart = chart_of(root)
    header = TraceHeader(
        root.header.agent,
        run_id,
        root.header.chart,
        root.header.chart_digest,
        __version__,
        chart,
        tools=root.header.tools,
        at=created(root),
    )
    lines: TraceLines = [header]
    _Exporter(store, lines, root.header.chart_digest).add(root, chart)
    return lines


def stored_trace(store: RunStore, run_id: str) -> Trace:
    """The stored run `run_id` as a trace read back: what `helikon debug --store` and
    `helikon studio --store` step through, with no trace file.

    The lines go through `read_trace` as a file's would, so every check it makes (each row
    against its run's chart, each chart against its digest) holds for a store's rows too.

    Raises:
        RunNotFound, StoreCorrupt: as `export_trace`.
        TraceError: the lines do not read back as a trace (a row no check above caught).
    """
    return read_trace(dumps(line, TraceLine) for line in trace_lines(store, run_id))


def chart_of(stored: StoredRun) -> ChartData:
    """The chart a stored run ran on, as the store keeps it, checked against its header.

    Raises:
        StoreCorrupt: the store holds no chart for the run, or another one.
    """
    run, digest = stored.header.run_id, stored.header.chart_digest
    if stored.chart_data is None:
        raise StoreCorrupt(f"run {quoted(run)}: the store holds no chart {digest[:12]} for it")
    try:
        data: ChartData = loads(ChartData, stored.chart_data)
    except ValueError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StoreCorrupt(
            f"run {quoted(run)}: its chart is not a valid ChartData: {cut(first)}"
        ) from None
    problems = data.problems()
    if problems or data.digest != digest:
        why = problems[0] if problems else f"its digest is {data.digest[:12]}"
        raise StoreCorrupt(
            f"run {quoted(run)}: the chart kept for it is not chart {digest[:12]}: {why}"
        )
    return data


def run_line(stored: StoredRun, chart: ChartData, recorded: set[str]) -> RunTrace:
    """The line that opens a nested run; its chart is recorded the first time the trace
    meets its digest (`recorded` is updated)."""
    header = stored.header
    table = None if header.chart_digest in recorded else chart
    recorded.add(header.chart_digest)
    return RunTrace(
        header.run_id,
        header.agent,
        header.chart,
        header.chart_digest,
        table,
        header.tools,
        created(stored),
    )


def created(stored: StoredRun) -> str | None:
    """When the store created a run (its own clock), as a trace writes times; None for a
    row whose time is no time."""
    try:
        return iso(float(stored.info.created_at))
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def transition_line(
    run_id: str, record: StepRecord, before: LoopState, chart: ChartData
) -> TransitionTrace:
    """One record as a trace's transition: `before` is the state the record started from.

    Raises:
        StoreCorrupt: the record names a row the chart lacks.
    """
    if not 0 <= record.row < len(chart.rows):
        raise StoreCorrupt(
            f"run {quoted(run_id)}: record {record.seq} names row {record.row}, which chart "
            f"{quoted(chart.name)} lacks"
        )
    row = chart.rows[record.row]
    return TransitionTrace(
        run_id,
        record.seq,
        before,
        record.input,
        RowTrace(row.index, row.source, row.input_kind, row.target, row.action, record.checked),
        record.state_after,
        record.events,
        record.next_action,
        record.appends,
        record.time,
    )


# ---------------------------------------------------------------- placing nested runs


class _Exporter:
    """Appends a run's lines, and in their places its nested runs', to `lines`."""

    def __init__(self, store: RunStore, lines: TraceLines, root_digest: str) -> None:
        self.store = store
        self.lines = lines
        self.recorded = {root_digest}
        self.seen: set[str] = set()
        self.children: dict[tuple[str, int], list[str]] = {}
        nested = [info for info in store.runs(include_nested=True) if info.parent_run_id]
        for info in sorted(nested, key=lambda info: (info.created_at, info.run_id)):
            parent = info.parent_run_id or ""
            slot = (parent, after_seq(parent, info.run_id))
            self.children.setdefault(slot, []).append(info.run_id)

    def add(self, stored: StoredRun, chart: ChartData) -> None:
        run_id = stored.header.run_id
        self.seen.add(run_id)
        effects: dict[int, list[EffectTrace]] = {}
        for effect in stored.effects:
            line = EffectTrace(run_id, effect.after_seq, effect.event, effect.at)
            effects.setdefault(effect.after_seq, []).append(line)
        self.lines.extend(effects.pop(0, []))
        self.nested(run_id, 0)
        before: LoopState = model_phase(chart.initial, 0, ZERO_USAGE)
        for record in stored.records:
            self.lines.append(transition_line(run_id, record, before, chart))
            self.lines.extend(effects.pop(record.seq, []))
            self.nested(run_id, record.seq)
            before = record.state_after
        for rest in effects.values():  # after a seq no record has: written as the run stopped
            self.lines.extend(rest)
        # Nested runs whose id names no record of this run: after its end.
        for slot in sorted(slot for slot in self.children if slot[0] == run_id):
            self.nested(*slot)

    def nested(self, parent: str, seq: int) -> None:
        """Add the runs nested in `parent` after its record `seq`."""
        for run_id in self.children.pop((parent, seq), []):
            child = self.store.get(run_id)
            if run_id in self.seen:
                raise StoreCorrupt(
                    f"run {quoted(run_id)} is listed as nested in a run nested in it"
                )
            if child.header.parent_run_id != parent:
                raise StoreCorrupt(
                    f"run {quoted(run_id)} is listed as nested in {quoted(parent)}, but its "
                    f"header says {quoted(child.header.parent_run_id)}"
                )
            chart = chart_of(child)
            self.lines.append(run_line(child, chart, self.recorded))
            self.add(child, chart)


def after_seq(parent: str, child: str) -> int:
    """The parent's seq a child's id names (`<parent>/<seq>`, `<parent>/<seq>:<call_id>`),
    or -1 when it names none."""
    prefix = parent + "/"
    step = child[len(prefix) :].partition(":")[0] if child.startswith(prefix) else ""
    return int(step) if step.isascii() and step.isdigit() else -1
