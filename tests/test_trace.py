"""helikon.trace: what `TraceWriter` writes of a run, and `read_trace` reads back.

Tracing must never change a run's outcome: a traced run streams exactly what the same run
untraced streams, whatever text it carries.
"""

from __future__ import annotations

import json
from pathlib import Path

from driver_support import drain, ends_once

from helikon import Agent, RunCompleted, ScriptedModel, ToolCall, tool
from helikon.trace import read_trace

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
