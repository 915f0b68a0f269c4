"""helikon.trace: what `TraceWriter` writes of a run, and `read_trace` reads back.

Tracing must never change a run's outcome: a traced run streams exactly what the same run
untraced streams, whatever text it carries.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from driver_support import drain, ends_once

from helikon import Agent, RunCompleted, ScriptedModel, ToolCall, tool
from helikon.trace import Sinks, TracedRun, TraceWriter, TransitionRecord, read_trace

# A JSON wire delivers "\ud800" escapes, which json.loads turns into lone surrogates: text
# with no UTF-8 form, in model text and in what tools return.
HIGH, LOW = json.loads('"\\ud800"'), json.loads('"\\udfff"')


@tool
def fetch_page(url: str) -> str:
    """Fetch a page whose text was cut in the middle of a character."""
    return f"page {url}: broken {LOW} byte"


def surrogate_agent() -> Agent:
    calls = [ToolCall("c1", "fetch_page", json.dumps({"url": "x"}))]
    model = ScriptedModel([calls, f"bad {HIGH} text, café"])
    return Agent("reader", model, tools=[fetch_page])


async def test_a_traced_run_with_lone_surrogates_streams_what_the_untraced_run_does(
    tmp_path: Path,
) -> None:
    untraced = await drain(surrogate_agent().run("read", run_id="r1"))
    path = tmp_path / "run.jsonl"
    traced = await drain(surrogate_agent().run("read", run_id="r1", trace=path))

    assert traced == untraced
    assert ends_once(traced, RunCompleted).output.text == f"bad {HIGH} text, café"


async def test_read_trace_reads_back_the_lone_surrogates_it_wrote(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    events = await drain(surrogate_agent().run("read", run_id="r1", trace=path))

    path.read_text(encoding="utf-8")  # the file is valid UTF-8 text
    trace = read_trace(path)

    assert trace.events() == events
    appended = [item for line in trace.transitions() for item in line.appends]
    assert f"page x: broken {LOW} byte" in [getattr(item, "content", None) for item in appended]


# -- a sink that fails ---------------------------------------------------------------------


class BrokenSink:
    """Records what reaches it; raises on the first call to `breaks` (or on every call)."""

    def __init__(self, breaks: str) -> None:
        self.breaks = breaks
        self.calls: list[str] = []

    def _reached(self, name: str) -> None:
        self.calls.append(name)
        if self.breaks in (name, "every call"):
            raise OSError(f"disk full in {name}")

    def started(self, run: TracedRun) -> None:
        self._reached("started")

    def transition(self, run: TracedRun, record: TransitionRecord) -> None:
        self._reached("transition")

    def effect(self, run: TracedRun, event: Any) -> None:
        self._reached("effect")


def tool_agent() -> Agent:
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    helper = Agent("helper", ScriptedModel(["helped"]))
    calls = [
        ToolCall("c1", "lookup", '{"q": "a"}'),
        ToolCall("c2", "helper", '{"input": "help"}'),
    ]
    return Agent("worker", ScriptedModel([calls, "all done"]), tools=[lookup, helper.as_tool()])


@pytest.mark.parametrize("breaks", ["started", "transition", "effect", "every call"])
async def test_a_sink_that_raises_never_changes_the_run_and_is_reported_once(
    breaks: str, caplog: pytest.LogCaptureFixture
) -> None:
    untraced = await drain(tool_agent().run("go", run_id="r1"))
    sink = BrokenSink(breaks)

    with caplog.at_level(logging.ERROR, logger="helikon.trace"):
        traced = await drain(tool_agent().run("go", run_id="r1", trace=sink))

    assert traced == untraced
    assert ends_once(traced, RunCompleted).output.text == "all done"
    assert sink.calls[-1] == breaks if breaks != "every call" else sink.calls == ["started"]
    reports = [record for record in caplog.records if record.name == "helikon.trace"]
    assert len(reports) == 1, "reported once, for the run and the runs nested in it"
    assert f"disk full in {sink.calls[-1]}" in str(reports[0].exc_info[1])  # type: ignore[index]


async def test_sinks_guard_each_sink_so_one_that_fails_does_not_silence_another(
    caplog: pytest.LogCaptureFixture,
) -> None:
    alone = BrokenSink("never")
    await drain(tool_agent().run("go", run_id="r1", trace=alone))
    broken, kept = BrokenSink("every call"), BrokenSink("never")

    with caplog.at_level(logging.ERROR, logger="helikon.trace"):
        await drain(tool_agent().run("go", run_id="r1", trace=Sinks(broken, kept)))

    assert broken.calls == ["started"]
    assert kept.calls == alone.calls and "transition" in kept.calls
    assert len([record for record in caplog.records if record.name == "helikon.trace"]) == 1


async def test_a_trace_file_that_fails_to_close_does_not_fail_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_close(self: TraceWriter) -> None:
        self._file.close()
        raise OSError("no space left on device")

    monkeypatch.setattr(TraceWriter, "close", broken_close)
    with caplog.at_level(logging.ERROR, logger="helikon.trace"):
        result = await tool_agent().run("go", trace=tmp_path / "t.jsonl").collect()

    assert result.final_output == "all done"
    assert [r.name for r in caplog.records if r.name == "helikon.trace"] == ["helikon.trace"]
