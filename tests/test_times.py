"""Times: every trace line, stored record and stored event carries its wall-clock time (UTC,
ISO 8601), and the step a model call, a tool batch or a chart effect produced the input of
carries how long it ran (the monotonic clock). One clock source (`helikon.trace.times`),
which these tests fix; the pure core never reads it. Old traces and stored runs without
times still read; replay comparisons ignore times.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helikon import Agent, RunResultStreaming, ScriptedModel, ToolCall, tool
from helikon.cli.loading import load_module
from helikon.cli.runs.reading import show_timeline
from helikon.core.codec import dumps, loads
from helikon.core.events import AgentEvent, ToolOutputItem, stamp
from helikon.core.items import ToolResult
from helikon.debug import Debugger
from helikon.debug.view import step_line
from helikon.durable import SqliteRunStore
from helikon.durable.as_trace import stored_trace
from helikon.export import extract_trace, trace_to_html
from helikon.export.trace_view import ToolCallView
from helikon.run.driver import Run
from helikon.studio.view import step_summary
from helikon.trace import (
    EffectTrace,
    StepTime,
    SystemClock,
    TickingClock,
    TraceError,
    TraceWriter,
    TransitionTrace,
    clock,
    read_trace,
    using_clock,
)
from helikon.trace.times import CallTime, duration_text, gap, iso, parse_iso, time_text

CHARTS = Path(__file__).resolve().parents[1] / "charts"
PAYMENTS = load_module(str(CHARTS / "approval_gated.py"))
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class SplitClock:
    """Wall time that stands still; a monotonic clock 2 seconds a read: durations come
    from the monotonic clock alone."""

    def __init__(self) -> None:
        self.ticks = 0.0

    def wall(self) -> float:
        return START

    def monotonic(self) -> float:
        self.ticks += 2.0
        return self.ticks


@tool(read_only=True)
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def agent() -> Agent:
    calls = [ToolCall("c1", "lookup", '{"q": "a"}')]
    return Agent("worker", ScriptedModel([calls, "all done"]), tools=[lookup])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteRunStore]:
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as opened:
        yield opened


# ---------------------------------------------------------------- the clock and its texts


def test_times_are_written_as_utc_iso_8601_to_the_millisecond() -> None:
    assert iso(START + 0.25) == "2026-01-01T00:00:00.250Z"
    assert parse_iso("2026-01-01T00:00:00.250Z") == START + 0.25
    assert parse_iso("not a time") is None
    assert time_text("2026-01-01T01:02:03.004Z") == "01:02:03.004"
    assert time_text("2026-01-01T01:02:03.004Z", date=True) == "2026-01-01 01:02:03.004 UTC"
    assert time_text("\x1b[2J" * 20) == ("\x1b[2J" * 20)[:40]  # shown as it is, cut
    assert gap("2026-01-01T00:00:00.000Z", "2026-01-01T02:05:00.000Z") == 7500.0
    assert gap(None, "2026-01-01T00:00:00.000Z") is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.25, "250 ms"),
        (1.25, "1.25 s"),
        (185, "3 min 5 s"),
        (7500, "2 h 5 min"),
        (93600, "1 d 2 h"),
    ],
)
def test_durations_read_in_the_unit_that_fits(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_a_fixed_clock_is_used_inside_its_block_only() -> None:
    before = clock()  # the suite's (tests/conftest.py)
    ticking = TickingClock(START, 0.5)
    with using_clock(ticking) as chosen:
        assert clock() is chosen is ticking
        assert (clock().wall(), clock().monotonic()) == (START + 0.5, START + 1.0)
    assert clock() is before
    assert SystemClock().wall() > START  # the default: the system's


# ---------------------------------------------------------------- traces


async def test_every_trace_line_carries_its_time_and_effects_their_duration(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    with using_clock(TickingClock(START)):
        await agent().run("go", trace=path).collect()
    trace = read_trace(path)

    assert trace.header.at is not None and parse_iso(trace.header.at) is not None
    effects = [line for line in trace.lines if not isinstance(line, TransitionTrace)]
    assert effects and all(parse_iso(line.at or "") is not None for line in effects)  # type: ignore[union-attr]
    steps = trace.transitions()
    assert all(step.time is not None for step in steps)
    took = {step.input.kind: step.time.took for step in steps if step.time is not None}
    assert took["start"] is None  # no effect produced the run's input
    assert took["model_response"] is not None and took["model_response"] > 0
    assert took["tool_results"] is not None and took["tool_results"] > 0
    ats = [parse_iso(step.time.at) for step in steps if step.time is not None]
    assert ats == sorted(ats) and len(set(ats)) == len(ats)


async def test_durations_come_from_the_monotonic_clock(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with using_clock(SplitClock()):
        await agent().run("go", trace=path).collect()
    steps = read_trace(path).transitions()

    assert {step.time.at for step in steps if step.time} == {"2026-01-01T00:00:00.000Z"}
    # a model call: its start and end; the tool batch: those, and its call's own two reads
    assert [step.time.took for step in steps if step.time][1:] == [2.0, 6.0, 2.0]


async def test_a_trace_written_before_times_reads_without_them(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with using_clock(TickingClock(START)):
        await agent().run("go", trace=path).collect()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps(_untimed(line)) + "\n" for line in lines))

    trace = read_trace(old)

    assert trace.header.at is None
    assert [step.time for step in trace.transitions()] == [None] * len(trace.transitions())
    assert "started" not in trace_to_html(trace, svg=False).split("<main>")[0]


@pytest.mark.parametrize("took", [1e308, -1.0, "NaN"])
async def test_a_trace_lines_hostile_duration_is_refused_naming_it(
    tmp_path: Path, took: Any
) -> None:
    """A duration read is never trusted: one too large (a turn's total overflowed a float
    and the HTML trace failed on it), negative or not a number is refused on reading."""
    path = tmp_path / "run.jsonl"
    with using_clock(TickingClock(START)):
        await agent().run("go", trace=path).collect()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    step = next(line for line in lines if isinstance(line.get("time"), dict))
    step["time"]["took"] = took
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text("".join(json.dumps(line) + "\n" for line in lines))

    with pytest.raises(TraceError, match=r"not a valid trace line: transition\.time\.took"):
        read_trace(hostile)


def _untimed(line: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in line.items() if key not in ("at", "time")}


async def test_each_tool_call_carries_its_own_duration_beside_its_result(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    with using_clock(SplitClock()):  # 2 s a read: the call's two reads inside the batch's
        await agent().run("go", trace=path).collect()
    trace = read_trace(path)
    steps = trace.transitions()
    results = next(step for step in steps if step.input.kind == "tool_results")

    assert results.time is not None
    assert results.time.calls == (CallTime("c1", 2.0),)  # the call alone
    assert results.time.took == 6.0  # the batch: its start, the call's two reads, its end
    assert all(not step.time.calls for step in steps if step is not results and step.time)
    assert '"calls"' not in path.read_text().splitlines()[2]  # no calls: written as before
    call = next(
        entry
        for turn in extract_trace(trace).root.turns
        for entry in turn.entries
        if isinstance(entry, ToolCallView)
    )
    assert call.took == 2.0
    html = trace_to_html(trace, svg=False)
    assert (
        '<span class="badge executed">executed</span><span class="muted">took 2.00 s</span>' in html
    )


async def test_runs_show_prints_each_calls_duration_beside_its_result(
    store: SqliteRunStore, capsys: pytest.CaptureFixture[str]
) -> None:
    with using_clock(SplitClock()):
        await agent().run("go", store=store, run_id="r1").collect()
    show_timeline(store.get("r1"), 100)

    assert "  ↳ executed: found a  (took 2.00 s)" in capsys.readouterr().out


async def test_every_streamed_event_carries_when_the_run_streamed_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    with using_clock(TickingClock(START)):
        events = [event async for event in agent().run("go", trace=path)]
    ats = [event.at for event in events]
    assert None not in ats and ats == sorted(ats)  # type: ignore[type-var]

    written: list[tuple[Any, str | None]] = []  # each event of the trace, its time there
    for line in read_trace(path).lines:
        if isinstance(line, EffectTrace):  # an effect's event: when the effect emitted it
            written.append((line.event, line.at))
        elif isinstance(line, TransitionTrace):  # a step's events: when it was applied
            written += [(event, line.time.at if line.time else None) for event in line.events]
    assert [event for event, _ in written] == events  # the stream, in its order
    assert [at for _, at in written] == [iso(at) for at in ats if at is not None]


def test_an_events_time_is_no_part_of_its_value_nor_of_its_json() -> None:
    stamped = ToolOutputItem(ToolResult("c1", "found a"))
    stamp(stamped, START)
    plain = ToolOutputItem(ToolResult("c1", "found a"))

    assert (stamped.at, plain.at) == (START, None)
    assert stamped == plain and hash(stamped) == hash(plain) and repr(stamped) == repr(plain)
    assert dumps(stamped, AgentEvent) == dumps(plain, AgentEvent)  # no "at": formats unchanged
    assert loads(AgentEvent, dumps(stamped, AgentEvent)).at is None


async def test_the_trace_and_the_store_write_the_time_each_event_was_stamped_with(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    with using_clock(TickingClock(START)):
        result = await agent().run("go", trace=path, store=store, run_id="r1").collect()
    streamed = {
        iso(event.at)
        for event in result.events
        if event.at is not None and event.type not in ("token_delta", "tool_call_delta")
    }
    traced = {line.at for line in read_trace(path).lines if isinstance(line, EffectTrace)}
    stored = {effect.at for effect in store.get("r1").effects}

    assert stored and stored <= traced <= {iso(event.at or 0.0) for event in result.events}
    assert stored <= streamed


# ---------------------------------------------------------------- stores


async def test_stored_records_carry_the_times_the_trace_has(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    with using_clock(TickingClock(START)):
        await agent().run("go", store=store, run_id="r1", trace=path).collect()
    stored = store.get("r1")

    assert [record.time for record in stored.records] == [
        step.time for step in read_trace(path).transitions()
    ]
    assert all(parse_iso(effect.at or "") is not None for effect in stored.effects)
    assert not any(record.time and record.time.resumed for record in stored.records)


async def test_a_resumed_stored_run_marks_its_resumption_and_the_pause(
    store: SqliteRunStore,
) -> None:
    with using_clock(TickingClock(START)):
        first = (
            await PAYMENTS.agent(ScriptedModel(list(PAYMENTS.script())))
            .run(PAYMENTS.EXAMPLE_INPUT, store=store, run_id="r1")
            .collect()
        )
    assert first.suspended
    decisions = [request.approve() for request in store.pending("r1")]
    with using_clock(TickingClock(START + 3 * 3600 + 30)):  # decided three hours later
        model = ScriptedModel(list(PAYMENTS.script()))
        await PAYMENTS.agent(model).resume("r1", decisions, store=store).collect()

    times = [record.time for record in store.get("r1").records]
    resumed = [time.resumed for time in times if time is not None]
    assert resumed.count(True) == 1 and resumed.index(True) == len(first_records(times))
    view = extract_trace(stored_trace(store, "r1"))
    steps = [step for turn in view.root.turns for step in turn.steps]
    marks = [step.resumption for step in steps if step.resumption]
    assert len(marks) == 1 and marks[0] == "resumed after 3 h 0 min"
    assert "resumed after 3 h 0 min" in trace_to_html(stored_trace(store, "r1"), svg=False)


def first_records(times: list[StepTime | None]) -> list[StepTime]:
    """The records the first driver wrote: those before the one marked resumed."""
    found: list[StepTime] = []
    for time in times:
        if time is None or time.resumed:
            break
        found.append(time)
    return found


async def test_a_run_resumed_from_a_snapshot_marks_its_first_step_resumed(
    tmp_path: Path,
) -> None:
    first = (
        await PAYMENTS.agent(ScriptedModel(list(PAYMENTS.script())))
        .run(PAYMENTS.EXAMPLE_INPUT)
        .collect()
    )
    assert first.suspended and first.snapshot is not None
    decisions = [request.approve() for request in first.pending]
    path = tmp_path / "resumed.jsonl"
    resumed = PAYMENTS.agent(ScriptedModel(list(PAYMENTS.script())[1:]))
    with TraceWriter(path) as sink:
        run = Run.from_snapshot(resumed, first.snapshot, decisions, trace=sink)
        await RunResultStreaming(run).collect()
    trace = read_trace(path)

    marks = [step.time.resumed for step in trace.transitions() if step.time]
    assert marks[0] is True and marks.count(True) == 1  # its first step, as a store marks it
    assert "&#9208; resumed</span>" in trace_to_html(trace, svg=False)
    debugger = Debugger.replay(trace, resumed)
    while await debugger.step() is not None:
        pass
    lines = [step_line(step) for step in debugger.history]
    assert lines[0].endswith("  ⏵ resumed") and sum(" ⏵ resumed" in line for line in lines) == 1


async def test_a_stored_runs_resumption_is_marked_in_its_live_trace_too(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    first = (
        await PAYMENTS.agent(ScriptedModel(list(PAYMENTS.script())))
        .run(PAYMENTS.EXAMPLE_INPUT, store=store, run_id="r1")
        .collect()
    )
    decisions = [request.approve() for request in store.pending("r1")]
    path = tmp_path / "resumed.jsonl"
    model = ScriptedModel(list(PAYMENTS.script()))
    await PAYMENTS.agent(model).resume("r1", decisions, store=store, trace=path).collect()

    assert first.suspended
    marks = [step.time.resumed for step in read_trace(path).transitions() if step.time]
    assert marks[0] is True and marks.count(True) == 1


# ---------------------------------------------------------------- replays ignore times


async def test_a_replay_keeps_the_times_it_replays_and_saves_them(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with using_clock(TickingClock(START)):
        await agent().run("go", trace=path, run_id="r1").collect()
    with using_clock(TickingClock(START + 999)):  # replayed later: same steps, other times
        debugger = Debugger.replay(read_trace(path), agent())
        while await debugger.step() is not None:
            pass
        saved = io.StringIO()
        debugger.save_trace(saved)

    assert all(step.divergence is None for step in debugger.history)
    assert saved.getvalue() == path.read_text()


# ---------------------------------------------------------------- shown


async def test_the_debugger_and_the_studio_show_each_steps_time_and_duration(
    store: SqliteRunStore,
) -> None:
    with using_clock(TickingClock(START)):
        first = (
            await PAYMENTS.agent(ScriptedModel(list(PAYMENTS.script())))
            .run(PAYMENTS.EXAMPLE_INPUT, store=store, run_id="r1")
            .collect()
        )
    decisions = [request.approve() for request in first.pending] if first.suspended else []
    with using_clock(TickingClock(START + 3600)):
        model = ScriptedModel(list(PAYMENTS.script()))
        await PAYMENTS.agent(model).resume("r1", decisions, store=store).collect()
    debugger = Debugger.replay(stored_trace(store, "r1"))
    while await debugger.step() is not None:
        pass

    lines = [step_line(step) for step in debugger.history]
    assert lines[0].endswith("on start · row 4 start_turn · at 00:00:00.500")
    # the model call's: its start, its two deltas' stamps (`AgentEvent.at`), its end
    assert lines[1].endswith(" · at 00:00:01.750, after 750 ms")
    assert [line.endswith("  ⏵ resumed") for line in lines].count(True) == 1
    shown = [step_summary(step) for step in debugger.history]
    assert shown[0] | {"events": None} == shown[0] | {
        "events": None,
        "at": "00:00:00.500",
        "took": None,
        "resumed": False,
    }
    assert shown[1]["took"] == "750 ms"
    assert [entry["resumed"] for entry in shown].count(True) == 1
