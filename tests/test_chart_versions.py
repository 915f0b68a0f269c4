"""Chart versions (helikon.run.chart_versions): the package
keeps the default chart at every digest runs were recorded on, as data; a stored run, a
snapshot or a Temporal run recorded on an older default chart resumes on its own version,
and a run recorded on any other chart is refused as before, naming both digests.

The package keeps two versions: a15a890f… (before the output guardrails' check became the
CheckingOutput phase) and today's. A synthetic older default chart is also made here (the
default chart without its duplicate-call check, kept in a directory of the test's own), to
test versions the package does not ship.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_drivers import TRANSFER, teller

from helikon import (
    DEFAULT_TABLE,
    Agent,
    OutputGuardrail,
    ScriptedModel,
    compile_chart,
    extend,
    to,
)
from helikon.core.approvals import ApprovalRequest
from helikon.core.chart.compile import read_chart
from helikon.core.chart.document import spec_data, spec_from_data
from helikon.core.chart.dsl import AGENT_LOOP
from helikon.core.chart.spec import ChartSpec
from helikon.core.errors import ChartDefinitionError
from helikon.debug import Debugger, DebuggerError
from helikon.durable import open_store
from helikon.run import chart_versions as versions
from helikon.run import legacy
from helikon.run.chart_versions import KEPT, ChartVersions, kept_document, on_recorded_chart
from helikon.run.snapshot import SnapshotMismatch
from helikon.temporal import AgentRegistry
from helikon.temporal.activities import HelikonActivities
from helikon.temporal.messages import Step, Writes
from helikon.temporal.registry import UnknownAgent
from helikon.trace import read_trace

DEFAULT_DIGEST = "ce4ffbf8ef40ab555817b8525e39eafe43f873fc3f21f4745e2f5b0ed74a3612"
OUTPUT_ROWS = "7e19d021c917228d124629ece46f5002ce4fe975faf780591aaf93901c17e289"
"""The default chart with the output guardrails' check as a phase, the input's a loop rule."""
BEFORE_ROWS = "a15a890f46b8db54dcc30c6ee1ef999b0043416dd10967089e9a5b426babbb53"
"""The default chart before the output guardrails' check was a phase of it."""


def older_default() -> ChartSpec:
    """A synthetic older default chart: today's without the duplicate-call check."""
    spec = read_chart(AGENT_LOOP)
    rows = tuple(row for row in spec.rows if row.action != "fail_duplicate_calls")
    return replace(spec, rows=rows)


OLDER = compile_chart(older_default())


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ChartVersions:
    """The versions helikon ships, and the older one, in a directory of the test's own."""
    for path in KEPT.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / f"{OLDER.digest}.json").write_text(kept_document(older_default()))
    found = ChartVersions(tmp_path)
    monkeypatch.setattr(versions, "DEFAULT_VERSIONS", found)
    return found


# ---------------------------------------------------------------- what the package keeps


def test_the_package_keeps_every_default_chart_version_by_digest() -> None:
    """A change to the default chart's rows adds its new version here (kept_document)."""
    kept = tuple(sorted((BEFORE_ROWS, OUTPUT_ROWS, DEFAULT_DIGEST)))
    assert versions.DEFAULT_VERSIONS.digests() == kept
    assert DEFAULT_TABLE.digest in versions.DEFAULT_VERSIONS.digests()
    for digest in versions.DEFAULT_VERSIONS.digests():
        table = versions.DEFAULT_VERSIONS.table(digest)
        assert table is not None and table.digest == digest


def test_a_kept_version_is_a_chart_document_not_code() -> None:
    text = (KEPT / f"{DEFAULT_DIGEST}.json").read_text()
    assert text == kept_document(read_chart(AGENT_LOOP))
    data = json.loads(text)
    assert data["helikon_chart"] == 1 and data["name"] == "AgentLoopChart"
    assert [e["input"] for e in data["everywhere"]] == ["cancel", "fail"]
    assert spec_from_data(data) == read_chart(AGENT_LOOP)
    assert versions.DEFAULT_VERSIONS.table("0" * 64) is None


def test_a_kept_file_that_does_not_compile_to_its_digest_is_refused(tmp_path: Path) -> None:
    (tmp_path / f"{'0' * 64}.json").write_text(kept_document(older_default()))
    with pytest.raises(ChartDefinitionError, match=f"compiles to chart {OLDER.digest}"):
        ChartVersions(tmp_path).table("0" * 64)


def test_a_chart_document_round_trips_a_composed_chart() -> None:
    from charts.retrieve_answer import RetrieveAnswerChart  # an effect phase, awaits, prompts

    spec = RetrieveAnswerChart
    again = spec_from_data(json.loads(json.dumps(spec_data(spec))))
    assert again == spec
    assert compile_chart(replace(again, actions=spec.actions)).digest == compile_chart(spec).digest
    with pytest.raises(ChartDefinitionError, match="not a helikon chart document"):
        spec_from_data({"name": "x"})


GUARDED = [(r.source, r.input_kind, r.action) for r in read_chart(AGENT_LOOP).rows if r.guards]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(GUARDED), unique=True, max_size=6), st.booleans())
def test_any_composed_chart_round_trips_as_a_document_with_its_digest(
    dropped: list[tuple[str, str, str]], planning: bool
) -> None:
    """Drop some guarded rows (and maybe add a phase): the spec read back from its document
    equals it, and compiles to the same table, or is refused with the same problems."""
    draft = extend(AGENT_LOOP, "Drawn")
    if planning:
        draft.phase("Planning", initial=True, prompt="Plan.")
        draft.rows("Planning", "start", to("Planning", on="enter_phase"))
        draft.rows("Planning", "model_response", to("CallingModel", on="keep_reply"))
    for source, kind, action in dropped:
        if not (planning and source == "CallingModel" and kind == "start"):
            draft.drop(source, kind, f"{action} -> {_target(source, kind, action)}")
    spec = draft.build()
    again = spec_from_data(json.loads(kept_document(spec)))
    assert again == spec
    try:
        table = compile_chart(spec)
    except ChartDefinitionError as refused:
        with pytest.raises(ChartDefinitionError) as also:
            compile_chart(again)
        assert str(also.value) == str(refused)
    else:
        assert compile_chart(again).digest == table.digest


def _target(source: str, kind: str, action: str) -> str:
    spec = read_chart(AGENT_LOOP)
    return next(
        r.target for r in spec.rows if (r.source, r.input_kind, r.action) == (source, kind, action)
    )


# ---------------------------------------------------------------- which chart a run resumes on


def test_a_run_of_the_default_chart_resumes_on_the_version_it_was_recorded_on(
    kept: ChartVersions, tmp_path: Path
) -> None:
    agent = teller(tmp_path / "log")
    assert on_recorded_chart(agent, DEFAULT_DIGEST) is agent
    assert on_recorded_chart(agent, "") is agent
    older = on_recorded_chart(agent, OLDER.digest)
    assert older.chart is not None and older.chart.digest == OLDER.digest
    assert (older.name, older.tools) == (agent.name, agent.tools)
    # An unkept digest, or an agent on a chart of its own: no other version; the checks refuse.
    assert on_recorded_chart(agent, "f" * 64) is agent
    custom = teller(tmp_path / "log", chart=compile_chart(replace(older_default(), name="Mine")))
    assert on_recorded_chart(custom, OLDER.digest) is custom


async def test_a_stored_run_on_an_older_default_chart_resumes_on_it(
    kept: ChartVersions, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        started = teller(log, chart=OLDER).run("pay ann 10", store=store, run_id="r1")
        assert (await started.collect()).suspended
        assert store.get("r1").header.chart_digest == OLDER.digest
        decision = ApprovalRequest.for_call(TRANSFER).bound("r1", 2).approve()
        result = await teller(log).resume("r1", [decision], store=store).collect()
        assert result.final_output == "Sent."
        assert log.read_text() == "transfer 10 to ann\n"
        assert store.get("r1").header.chart_digest == OLDER.digest  # it finished on it


async def test_a_stored_run_on_a_chart_not_kept_is_refused_naming_both_digests(
    tmp_path: Path,
) -> None:
    log = tmp_path / "transfers.log"
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        started = teller(log, chart=OLDER).run("pay ann 10", store=store, run_id="r1")
        assert (await started.collect()).suspended
        decision = ApprovalRequest.for_call(TRANSFER).bound("r1", 2).approve()
        with pytest.raises(SnapshotMismatch) as refused:
            teller(log).resume("r1", [decision], store=store)
        assert f"old {OLDER.digest}, new {DEFAULT_DIGEST}" in str(refused.value)
        assert not log.exists()


async def test_a_snapshot_on_an_older_default_chart_resumes_on_it(
    kept: ChartVersions, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    suspended = await teller(log, chart=OLDER).run("pay ann 10").collect()
    assert suspended.snapshot is not None and suspended.snapshot.chart == OLDER.digest
    decision = suspended.pending[0].approve()
    fresh = replace(teller(log), model=ScriptedModel(["Sent."]))  # the model's next answer
    resumed = await fresh.resume(suspended.snapshot, decisions=[decision]).collect()
    assert resumed.final_output == "Sent." and log.read_text() == "transfer 10 to ann\n"


async def test_a_snapshot_on_a_chart_not_kept_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    suspended = await teller(log, chart=OLDER).run("pay ann 10").collect()
    assert suspended.snapshot is not None
    with pytest.raises(SnapshotMismatch, match=f"taken on chart {OLDER.digest[:12]}"):
        teller(log).resume(suspended.snapshot, decisions=[suspended.pending[0].approve()])


async def greeting_trace(tmp_path: Path) -> Path:
    """A trace of a run of `greeter` on the older default chart."""
    trace = tmp_path / "run.jsonl"
    await Agent("greeter", ScriptedModel(["Hello."]), chart=OLDER).run("hi", trace=trace).collect()
    return trace


async def test_the_debugger_replays_a_trace_of_an_older_default_chart_on_it(
    kept: ChartVersions, tmp_path: Path
) -> None:
    trace = read_trace(await greeting_trace(tmp_path))
    assert trace.header.chart_digest == OLDER.digest
    debugger = Debugger.replay(trace, Agent("greeter", ScriptedModel([])))  # today's chart
    assert debugger.run.ctx.table.digest == OLDER.digest
    while await debugger.step() is not None:
        pass
    assert [step.divergence for step in debugger.history] == [None, None]
    assert debugger.state.phase == "Done"


async def test_the_debugger_refuses_a_trace_of_a_chart_not_kept_naming_both_digests(
    tmp_path: Path,
) -> None:
    trace = read_trace(await greeting_trace(tmp_path))
    with pytest.raises(DebuggerError) as refused:
        Debugger.replay(trace, Agent("greeter", ScriptedModel([])))
    assert f"chart {OLDER.digest[:12]}" in str(refused.value)
    assert f"on {DEFAULT_DIGEST[:12]}" in str(refused.value)


def test_a_temporal_worker_runs_a_history_of_an_older_default_chart_on_it(
    kept: ChartVersions, tmp_path: Path
) -> None:
    registry = AgentRegistry([teller(tmp_path / "log")])
    assert registry.facts("teller", chart=DEFAULT_DIGEST).digest == DEFAULT_DIGEST
    assert registry.facts("teller", chart=OLDER.digest).digest == OLDER.digest
    assert registry.facts("teller").digest == DEFAULT_DIGEST  # the cached facts are today's
    with pytest.raises(UnknownAgent, match=f"asks for chart {'f' * 12}"):
        registry.facts("teller", chart="f" * 64)


async def test_the_temporal_writer_extends_a_stored_run_on_its_kept_version(
    kept: ChartVersions, tmp_path: Path
) -> None:
    """The writer rebuilds a stored run's records on the chart its header names, when that
    is a kept version; without it the write is refused as another run's (RunDiverged, which
    the activity raises as a non-retryable ApplicationError)."""
    log = tmp_path / "transfers.log"
    decision = ApprovalRequest.for_call(TRANSFER).bound("r1", 2).approve()
    with open_store(f"sqlite:///{tmp_path / 'local.db'}") as local:
        await teller(log, chart=OLDER).run("pay ann 10", store=local, run_id="r1").collect()
        resumed = teller(log, chart=OLDER).resume("r1", [decision], store=local)
        assert (await resumed.collect()).final_output == "Sent."
        steps = [Step(r.seq, r.input, r.row) for r in local.get("r1").records]
    with open_store(f"sqlite:///{tmp_path / 'temporal.db'}") as store:
        await teller(log, chart=OLDER).run("pay ann 10", store=store, run_id="r1").collect()
        activities = HelikonActivities(AgentRegistry([teller(log)]), store)
        written = await activities._write(Writes("r1", "teller", steps=tuple(steps[2:])))
        assert written is not None and written.header.chart_digest == OLDER.digest
        assert [r.seq for r in store.get("r1").records] == [s.seq for s in steps]
        assert store.get("r1").info.status == "completed"


# ---------------------------------------------------------------- the output guardrails' versions


def refusing_teller(log: Path, **options: Any) -> Agent:
    """`teller` with an output guardrail that refuses its answer ("Sent.")."""
    guard = OutputGuardrail("no_sent", lambda output, _: output.text == "Sent.")
    return replace(teller(log, **options), output_guardrails=(guard,))


def test_the_version_before_guardrail_rows_has_no_checking_phase() -> None:
    before = versions.DEFAULT_VERSIONS.table(BEFORE_ROWS)
    assert before is not None and "CheckingOutput" not in before.dispatch
    assert "CheckingOutput" in DEFAULT_TABLE.dispatch
    assert legacy.rewrites(before) and not legacy.rewrites(DEFAULT_TABLE)


async def test_a_stored_run_before_guardrail_rows_resumes_with_the_old_rewrite(
    tmp_path: Path,
) -> None:
    """Suspended on a15a890f…, resumed by today's helikon: the answer is checked by the old
    rule (the completing step rewritten), with the events a run on it always had."""
    log = tmp_path / "transfers.log"
    before = versions.DEFAULT_VERSIONS.table(BEFORE_ROWS)
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        started = refusing_teller(log, chart=before).run("pay ann 10", store=store, run_id="r1")
        assert (await started.collect()).suspended
        decision = ApprovalRequest.for_call(TRANSFER).bound("r1", 2).approve()
        stream = refusing_teller(log).resume("r1", [decision], store=store)
        events = [event async for event in stream]
        stored = store.get("r1")
    assert [e.type for e in events[-3:]] == ["message_output", "guardrail_triggered", "run_failed"]
    assert stored.header.chart_digest == BEFORE_ROWS
    phases = [record.state_after.phase for record in stored.records]
    assert phases[-1] == "Failed" and "CheckingOutput" not in phases
    assert stored.records[-1].input.kind == "model_response"  # the completing step, rewritten


async def test_a_run_on_todays_chart_checks_its_answer_in_a_phase(tmp_path: Path) -> None:
    """The same run on today's chart: the same events, the check a step of its own."""
    log = tmp_path / "transfers.log"
    trace = tmp_path / "run.jsonl"
    agent = replace(refusing_teller(log), model=ScriptedModel(["Sent."]))
    events = [event async for event in agent.run("pay ann 10", trace=trace)]
    assert [e.type for e in events[-3:]] == ["message_output", "guardrail_triggered", "run_failed"]
    steps = read_trace(trace).transitions()
    assert [step.state_after.phase for step in steps][-2:] == ["CheckingOutput", "Failed"]
    assert steps[-1].input.kind == "guardrail_verdict"


@pytest.mark.parametrize("trips", [False, True])
async def test_the_debugger_replays_a_guardrail_check_of_a15a890f_by_the_old_rule(
    trips: bool, tmp_path: Path
) -> None:
    """A trace of a15a890f… has no CheckingOutput step: its replay, by today's helikon, takes
    the completing step's verdict from the recording (helikon.run.legacy) and runs no
    guardrail again."""
    checks: list[str] = []

    def check(output: Any, context: Any) -> bool:
        checks.append(output.text)
        return trips

    def agent(**options: Any) -> Agent:
        guard = OutputGuardrail("polite", check)
        return Agent("guarded", ScriptedModel(["Fine."]), output_guardrails=[guard], **options)

    trace = tmp_path / "run.jsonl"
    before = versions.DEFAULT_VERSIONS.table(BEFORE_ROWS)
    _ = [event async for event in agent(chart=before).run("hi", trace=trace)]
    assert checks == ["Fine."]
    debugger = Debugger.replay(read_trace(trace), agent())
    assert debugger.run.ctx.table.digest == BEFORE_ROWS
    while await debugger.step() is not None:
        pass
    steps = list(debugger.history)
    assert [step.divergence for step in steps] == [None, None]
    assert steps[-1].state_after.phase == ("Failed" if trips else "Done")
    assert checks == ["Fine."]
