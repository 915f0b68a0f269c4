"""A stored run as a trace (`helikon.durable.as_trace`): the trace a run's store gives is the
trace the run wrote as it ran, but for the deltas a store never keeps; `read_trace`, the
debugger and `helikon trace` read it; a store that does not check out is refused.

Every run here is a real scripted run in a real SQLite store, with a fixed run id, traced to
a file at the same time, so the two can be compared line for line.
"""

from __future__ import annotations

import dataclasses
import io
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helikon import Agent, ScriptedModel, ToolCall, tool
from helikon.cli import main
from helikon.cli.loading import load_module
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.events import RunSuspended
from helikon.core.state import TERMINATE, CallingModel, Start
from helikon.debug import Debugger
from helikon.durable import SqliteRunStore, StoreCorrupt, export_trace
from helikon.durable.as_trace import trace_lines, transition_line
from helikon.durable.records import StepRecord
from helikon.export import trace_to_markdown
from helikon.trace import EffectTrace, Trace, TransitionTrace, read_trace

CHARTS = Path(__file__).resolve().parents[1] / "charts"
TRIAGE = load_module(str(CHARTS / "triage.py"))
PAYMENTS = load_module(str(CHARTS / "approval_gated.py"))
DELTAS = {"token_delta", "reasoning_delta", "tool_call_delta"}


def without_deltas(trace: Trace) -> list[Any]:
    """The trace's lines but deltas, with the times the store stamps on its own (events',
    as it wrote them; a run's opening, as it created it) left out: a record's time is the
    one the trace wrote, compared as it is."""
    return [
        untimed(line)
        for line in trace.lines
        if not (isinstance(line, EffectTrace) and line.event.type in DELTAS)
    ]


def untimed(line: Any) -> Any:
    return line if isinstance(line, TransitionTrace) else dataclasses.replace(line, at=None)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteRunStore]:
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as opened:
        yield opened


async def traced_run(agent: Agent, text: str, store: SqliteRunStore, tmp_path: Path) -> Trace:
    """Run `agent` as run r1 in `store`, tracing it; the trace it wrote."""
    live = tmp_path / "live.jsonl"
    await agent.run(text, store=store, run_id="r1", trace=live).collect()
    return read_trace(live)


def exported(store: SqliteRunStore, tmp_path: Path, run_id: str = "r1") -> Trace:
    path = tmp_path / "exported.jsonl"
    written = export_trace(store, run_id, path)
    assert written == len(path.read_text().splitlines())
    return read_trace(path)


def triage_agent() -> Agent:
    agent: Agent = TRIAGE.agent(ScriptedModel(list(TRIAGE.script())))
    return agent


def payments_agent() -> Agent:
    """The approval-gated agent, on a fresh copy of its script (as a new process has)."""
    agent: Agent = PAYMENTS.agent(ScriptedModel(list(PAYMENTS.script())))
    return agent


def tool_agent() -> Agent:
    """An agent that runs a tool and another agent as a tool in one batch."""

    @tool(read_only=True)
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    helper = Agent("helper", ScriptedModel(["helped"]))
    calls = [ToolCall("c1", "lookup", '{"q": "a"}'), ToolCall("c2", "helper", '{"input": "x"}')]
    return Agent("worker", ScriptedModel([calls, "all done"]), tools=[lookup, helper.as_tool()])


# ---------------------------------------------------------------- the same trace


async def test_a_handoff_run_exports_as_the_trace_it_wrote(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    live = await traced_run(triage_agent(), TRIAGE.EXAMPLE_INPUT, store, tmp_path)

    trace = exported(store, tmp_path)

    assert untimed(trace.header) == untimed(live.header)
    assert without_deltas(trace) == without_deltas(live)
    assert all(line.time is not None for line in trace.transitions())
    assert set(trace.runs) == {"r1/2"}  # the handoff target, after the parent's record 2
    assert trace.events() == [e for e in live.events() if e.type not in DELTAS]


async def test_an_agent_called_as_a_tool_exports_where_it_ran(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    live = await traced_run(tool_agent(), "go", store, tmp_path)

    trace = exported(store, tmp_path)

    assert set(trace.runs) == {"r1/2:c2"}
    assert without_deltas(trace) == without_deltas(live)


async def test_a_suspended_run_exports_up_to_its_suspension(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    live = await traced_run(payments_agent(), PAYMENTS.EXAMPLE_INPUT, store, tmp_path)

    trace = exported(store, tmp_path)

    assert without_deltas(trace) == without_deltas(live)
    assert isinstance(trace.events()[-1], RunSuspended)


async def test_a_nested_run_exports_alone_as_its_own_trace(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    live = await traced_run(triage_agent(), TRIAGE.EXAMPLE_INPUT, store, tmp_path)

    trace = exported(store, tmp_path, "r1/2")

    assert (trace.header.agent, trace.header.run_id) == ("billing", "r1/2")
    assert trace.transitions() == live.transitions("r1/2")


# ---------------------------------------------------------------- what reads it


async def test_the_debugger_replays_an_exported_run_to_its_end(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    await traced_run(triage_agent(), TRIAGE.EXAMPLE_INPUT, store, tmp_path)
    trace = exported(store, tmp_path)
    head = store.get("r1").records[-1].state_after

    for debugger in (
        Debugger.replay(trace),  # the steps as recorded, nothing imported
        Debugger.replay(trace, TRIAGE.agent(ScriptedModel([]))),  # each step computed again
    ):
        while await debugger.step() is not None:
            pass
        assert debugger.finished
        assert debugger.state == head
        assert all(step.divergence is None for step in debugger.history)


async def test_helikon_trace_renders_an_exported_run(
    store: SqliteRunStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await traced_run(triage_agent(), TRIAGE.EXAMPLE_INPUT, store, tmp_path)
    path = tmp_path / "r1.jsonl"
    export_trace(store, "r1", path)

    assert main(["trace", str(path), "-f", "md"]) == 0

    out = capsys.readouterr().out
    assert out == trace_to_markdown(read_trace(path))
    assert "billing" in out and "I have refunded 49.00 EUR" in out


async def test_an_open_file_is_written_and_left_open(store: SqliteRunStore, tmp_path: Path) -> None:
    await traced_run(triage_agent(), TRIAGE.EXAMPLE_INPUT, store, tmp_path)
    out = io.StringIO()

    export_trace(store, "r1", out)

    assert not out.closed
    assert read_trace(out.getvalue().splitlines()).lines == exported(store, tmp_path).lines


async def test_a_run_resumed_after_its_suspension_replays_through_it(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    await traced_run(payments_agent(), PAYMENTS.EXAMPLE_INPUT, store, tmp_path)
    decisions = [request.approve() for request in store.pending("r1")]
    await payments_agent().resume("r1", decisions, store=store).collect()
    trace = exported(store, tmp_path)
    types = [event.type for event in trace.events()]
    assert types.index("run_suspended") < types.index("run_completed") == len(types) - 1

    debugger = Debugger.replay(trace, PAYMENTS.agent(ScriptedModel([])))
    while await debugger.step() is not None:
        pass

    assert debugger.state == store.get("r1").records[-1].state_after
    assert debugger.state.phase == "Done"
    assert all(step.divergence is None for step in debugger.history)


# ---------------------------------------------------------------- a store that does not check


def edit(store: SqliteRunStore, statement: str, *args: Any) -> None:
    with sqlite3.connect(store.path) as db:
        db.execute(statement, args)


def test_a_record_naming_a_row_its_chart_lacks_is_refused() -> None:
    chart = DEFAULT_TABLE.data()
    record = StepRecord(1, Start(()), len(chart.rows), (), CallingModel(), TERMINATE, (), ())

    with pytest.raises(StoreCorrupt, match=f"names row {len(chart.rows)}"):
        transition_line("r1", record, CallingModel(), chart)


async def test_an_edited_chart_is_refused_and_writes_no_file(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    await traced_run(triage_agent(), TRIAGE.EXAMPLE_INPUT, store, tmp_path)
    edit(store, "UPDATE charts SET data = replace(data, '\"Done\"', '\"Dome\"')")
    path = tmp_path / "never.jsonl"

    with pytest.raises(StoreCorrupt, match=r"the stored chart .* hashes to"):  # get() checks it
        export_trace(store, "r1", path)
    assert not path.exists()


async def test_a_missing_chart_is_refused(store: SqliteRunStore, tmp_path: Path) -> None:
    await traced_run(triage_agent(), TRIAGE.EXAMPLE_INPUT, store, tmp_path)
    edit(store, "DELETE FROM charts")

    with pytest.raises(StoreCorrupt, match="holds no chart"):
        trace_lines(store, "r1")


async def test_a_run_listed_under_another_parent_is_refused(
    store: SqliteRunStore, tmp_path: Path
) -> None:
    await traced_run(triage_agent(), TRIAGE.EXAMPLE_INPUT, store, tmp_path)
    await tool_agent().run("go", store=store, run_id="r2").collect()
    edit(store, "UPDATE runs SET parent_run_id = 'r2' WHERE run_id = 'r1/2'")

    with pytest.raises(StoreCorrupt, match="its header says 'r1'"):
        trace_lines(store, "r2")
