"""The listeners' port (`helikon.run.listening`): every report of a run reaches its
listeners in the one documented order (in process, the journal, the trace, the spans), and
the listeners that persist or export get values redacted once, at the port, while the
in-process ones get the run's own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from helikon import Agent, RunConfig, ScriptedModel, ToolCall, tool
from helikon.core.codec import dumps
from helikon.core.events import DELTAS
from helikon.core.items import ToolResult
from helikon.debug import Debugger
from helikon.durable import SqliteRunStore
from helikon.run.driver import Run
from helikon.run.journal import Journal

Told = list[tuple[str, str, Any]]  # (listener, report, value), in the order told


def said(value: Any) -> str:
    return dumps(value, Any)


class Local:
    """An in-process listener (`Run.listen`)."""

    def __init__(self, told: Told) -> None:
        self.told = told

    def started(self, run: Any) -> None:
        self.told.append(("local", "started", None))

    def transition(self, run: Any, record: Any) -> None:
        self.told.append(("local", "transition", record))

    def effect(self, run: Any, event: Any) -> None:
        self.told.append(("local", "effect", event))

    def ended(self, run: Any) -> None:
        self.told.append(("local", "ended", run.state.phase))


class Sink(Local):
    """A trace sink: told as a trace is."""

    def started(self, run: Any) -> None:
        self.told.append(("trace", "started", None))

    def transition(self, run: Any, record: Any) -> None:
        self.told.append(("trace", "transition", record))

    def effect(self, run: Any, event: Any) -> None:
        self.told.append(("trace", "effect", event))


class Spans:
    """An observer (`helikon.run.observing.RunObserver`) that opens no span."""

    def __init__(self, told: Told) -> None:
        self.told = told

    def begin(self) -> None:
        return None

    def transition(self, record: Any) -> None:
        self.told.append(("spans", "transition", record))

    def chat(self, request: Any) -> None:
        return None

    def action(self, action: Any) -> None:
        return None

    def tool_call(
        self, call: ToolCall, invoke: Callable[[], Awaitable[ToolResult]]
    ) -> Awaitable[ToolResult]:
        return invoke()

    def nested(self, child: Any) -> Spans:
        return self

    def end(self) -> None:
        return None


def hide(text: str) -> str:
    return text.replace("4111", "[card]")


@tool
async def charge(card: str) -> str:
    """Charge a card."""
    return f"charged {card}"


async def told_by_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redact: Any) -> Told:
    """Everything a run with all four kinds of listener told them, in order."""
    told: Told = []
    step, effect = Journal.step, Journal.effect

    async def committed(journal: Journal, seq: int, inp: Any, match: Any, outcome: Any, *a: Any):
        told.append(("journal", "transition", (inp, outcome)))
        await step(journal, seq, inp, match, outcome, *a)

    def kept(journal: Journal, after_seq: int, event: Any) -> None:
        told.append(("journal", "effect", event))
        effect(journal, after_seq, event)

    monkeypatch.setattr(Journal, "step", committed)
    monkeypatch.setattr(Journal, "effect", kept)
    model = ScriptedModel([[ToolCall("c1", "charge", '{"card": "4111"}')], "Charged 4111."])
    agent = Agent("shop", model, tools=[charge], config=RunConfig(redact=redact))
    with SqliteRunStore(tmp_path / "runs.db") as store:
        run = Run(agent, input="my card is 4111", run_id="r1", store=store, trace=Sink(told))
        run.listen(Local(told))
        run.observer = Spans(told)
        events = [event async for event in run.stream()]
    assert events[-1].type == "run_completed"
    return told


def order(told: Told, report: str, value: Callable[[Any], bool] = lambda _: True) -> list[Any]:
    """Who was told each `report`, in runs of one value each: [[who, who, ...], ...]."""
    runs: list[list[str]] = []
    for who, what, told_value in told:
        if what != report or not value(told_value):
            continue
        if who == "local":
            runs.append([])
        runs[-1].append(who)
    return runs


async def test_every_report_reaches_the_listeners_in_the_documented_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told = await told_by_a_run(tmp_path, monkeypatch, hide)

    transitions = order(told, "transition")
    assert len(transitions) == 4  # start, the tool calls, their results, the answer
    # the journal's commit is awaited once every listener was told, before the effect
    assert all(run == ["local", "trace", "spans", "journal"] for run in transitions)
    events = order(told, "effect", lambda event: not isinstance(event, DELTAS))
    assert events and all(run == ["local", "journal", "trace"] for run in events)
    assert order(told, "started") == [["local", "trace"]]
    assert [value for who, what, value in told if what == "ended"] == ["Done"]


async def test_persisting_listeners_get_redacted_values_and_in_process_ones_raw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told = await told_by_a_run(tmp_path, monkeypatch, hide)

    local = [said(value) for who, _, value in told if who == "local"]
    assert any("4111" in text for text in local)  # the run's own values, whole
    assert any('"token_delta"' in text and "4111" in text for text in local)
    for listener in ("journal", "trace", "spans"):
        texts = [said(value) for who, _, value in told if who == listener]
        assert texts and not [text for text in texts if "4111" in text], listener
        if listener != "spans":  # the spans are told transitions only
            assert any("[card]" in text for text in texts), listener
    # a redacting run's deltas go to the in-process listeners only
    persisted = [value for who, what, value in told if who != "local" and what == "effect"]
    assert persisted and not [event for event in persisted if isinstance(event, DELTAS)]


async def test_without_redact_every_listener_gets_the_same_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told = await told_by_a_run(tmp_path, monkeypatch, None)

    records = [value for who, what, value in told if what == "transition" and who != "journal"]
    assert len({id(record) for record in records}) == 4  # one record a step, for all three
    deltas = [who for who, what, value in told if isinstance(value, DELTAS)]
    assert set(deltas) == {"local", "journal", "trace"}  # (the journal keeps none)


def test_a_run_without_listeners_has_no_fan_out() -> None:
    run = Run(Agent("quiet", ScriptedModel(["hi"])))
    assert run.listeners is None
    run.listen(Local([]))
    assert run.listeners is not None


async def test_a_debugger_keeps_nested_runs_raw_and_saves_them_redacted(tmp_path: Path) -> None:
    """The debugger's recorder listens in process: a nested run's lines are the run's own;
    its saved trace redacts them, and keeps no deltas, as the port does for a trace."""
    config = RunConfig(redact=hide)
    helper = Agent("helper", ScriptedModel(["the pin is 4111"]), config=config)
    asked = ToolCall("c1", "helper", '{"input": "the pin?"}')
    boss = Agent("boss", ScriptedModel([[asked], "done"]), tools=[helper.as_tool()], config=config)
    debugger = Debugger.live(boss, "go")

    await debugger.continue_()

    nested = [line for effect in debugger.produced.values() for line in effect.lines]
    assert any(line.run_id != debugger.run.run_id and "4111" in said(line) for line in nested)
    assert any(isinstance(getattr(line, "event", None), DELTAS) for line in nested)
    saved = tmp_path / "saved.jsonl"
    debugger.save_trace(saved)
    text = saved.read_text()
    assert "the pin is [card]" in text and "4111" not in text and '"token_delta"' not in text


async def test_the_port_redacts_once_however_many_listeners_persist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run told to a journal, a trace and spans asks the hook exactly what a run told to
    its journal alone asks: each record and event is redacted once, for all three."""
    hooked: list[str] = []

    def counted(text: str) -> str:
        hooked.append(text)
        return hide(text)

    await told_by_a_run(tmp_path / "all", monkeypatch, counted)
    with_all, hooked[:] = list(hooked), []
    model = ScriptedModel([[ToolCall("c1", "charge", '{"card": "4111"}')], "Charged 4111."])
    agent = Agent("shop", model, tools=[charge], config=RunConfig(redact=counted))
    with SqliteRunStore(tmp_path / "alone.db") as store:
        await agent.run("my card is 4111", run_id="r1", store=store).collect()
    assert with_all and sorted(with_all) == sorted(hooked)
