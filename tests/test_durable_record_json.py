"""A record is written part by part (`helikon.durable.rows.record_json`): the bytes must be
`dumps(record)`'s, for every kind of step, or a stored run would read back other bytes than
it was signed over by an older helikon (and two helikons would write one run differently)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties import RUNS, Run, runs, wire_texts

from helikon import DEFAULT_TABLE
from helikon.core.codec import dumps, loads
from helikon.core.events import ToolCallItem
from helikon.core.items import AssistantMessage, ToolCall, ToolResult
from helikon.core.state import ExecuteTools, ExecutingTools, ModelResponse, TransitionOutcome
from helikon.core.transition import Match
from helikon.durable.records import StepRecord, step_record
from helikon.durable.rows import record_json

ROW = DEFAULT_TABLE.rows[0]


@RUNS
@given(runs())
def test_a_record_is_written_as_dumps_writes_it(run: Run) -> None:
    for seq, step in enumerate(run.steps, start=1):
        checked = tuple((f"guard_{n}", n % 2 == 0) for n in range(seq % 4))
        record = step_record(seq, step.inp, Match(ROW, checked), step.outcome)
        text = record_json(record)
        assert text == dumps(record)
        assert loads(StepRecord, text) == record


@settings(max_examples=100, deadline=None)
@given(wire_texts, st.integers(min_value=1, max_value=2**32 - 1))
def test_a_record_with_any_text_is_written_as_dumps_writes_it(text: str, seq: int) -> None:
    call = ToolCall("c0", "search", text)
    outcome = TransitionOutcome(
        ExecutingTools((call,), 0),
        (ToolCallItem(call),),
        ExecuteTools((call,)),
        (AssistantMessage(text), call, ToolResult("c0", text)),
    )
    record = step_record(seq, ModelResponse((call,)), Match(ROW, (("g", True),)), outcome)
    assert record_json(record) == dumps(record)  # a lone surrogate takes dumps' own way
    assert loads(StepRecord, record_json(record)) == record
