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

from helikon import Agent, ScriptedModel, ToolCall, tool
from helikon.cli.loading import load_module
from helikon.debug import Debugger
from helikon.debug.view import step_line
from helikon.durable import SqliteRunStore
from helikon.durable.as_trace import stored_trace
from helikon.export import extract_trace, trace_to_html
from helikon.studio.view import step_summary
from helikon.trace import (
    StepTime,
    SystemClock,
    TickingClock,
    TransitionTrace,
    clock,
    read_trace,
    using_clock,
)
from helikon.trace.times import duration_text, gap, iso, parse_iso, time_text

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
    assert [step.time.took for step in steps if step.time][1:] == [2.0, 2.0, 2.0]


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


def _untimed(line: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in line.items() if key not in ("at", "time")}


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
    assert lines[1].endswith(" · at 00:00:01.250, after 250 ms")  # the model call's
    assert [line.endswith("  ⏵ resumed") for line in lines].count(True) == 1
    shown = [step_summary(step) for step in debugger.history]
    assert shown[0] | {"events": None} == shown[0] | {
        "events": None,
        "at": "00:00:00.500",
        "took": None,
        "resumed": False,
    }
    assert shown[1]["took"] == "250 ms"
    assert [entry["resumed"] for entry in shown].count(True) == 1
