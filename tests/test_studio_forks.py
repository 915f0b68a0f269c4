"""Forks in the studio: fork a replay (on its chart) after any step with an edited model
answer (text, tool calls) or tool result, see the fork beside the original (which steps
differ, where the paths diverge, drawn on the chart), and go back to the original. Through
the API and in Chromium.

The run is the budget assistant's, recorded by `helikon run --trace`: asked about
groceries it calls its tools at step 2 and answers at step 4.

The drawn comparison has golden files in tests/golden/: `studio_compare.dot` (the DOT
text, byte for byte) and `studio_compare.svg.txt` (each SVG element the comparison
classes, with its title). After an intended change, regenerate them and review the diff:

    HELIKON_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_studio_forks.py
"""

from __future__ import annotations

import asyncio
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from browser_support import Browser
from store_support import Backend
from test_studio import (
    BUDGET,
    GROCERIES,
    Client,
    needs_chromium,
    record,
    screenshot_to,
    serve,
    studio_args,
)

from helikon.cli.loading import load_module
from helikon.cli.studio import open_session
from helikon.core.state import EffectResult
from helikon.export import chart_to_dot
from helikon.models.scripted import ScriptedModel
from helikon.studio import ThreadedDebugger
from helikon.studio.diagram import COMPARE_CLASSES, Diagram, compare_marks
from helikon.studio.stored import StoredRuns

RETRIEVE = Path(__file__).resolve().parent.parent / "charts" / "retrieve_answer.py"
ANSWER = "You have 90.00 EUR of your 400 EUR groceries budget left."
GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("HELIKON_UPDATE_GOLDEN") == "1"
SVG = "{http://www.w3.org/2000/svg}"


def budget_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> ThreadedDebugger:
    trace = record(tmp_path, GROCERIES)
    capsys.readouterr()
    return open_session(studio_args(trace=str(trace), chart_option=str(BUDGET)))


def test_a_fork_with_an_edited_answer_is_shown_beside_the_original(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(budget_replay(tmp_path, capsys))
    try:
        client = Client(server)
        client.post("/api/continue")
        forked = client.post("/api/fork", {"at": 1, "kind": "text", "value": ANSWER})
        assert forked["run_id"].endswith("-fork1") and forked["position"] == 1
        done = client.post("/api/continue")
        assert (done["phase"], done["conversation"][-1]["content"]) == ("Done", ANSWER)
        compare = done["compare"]
        assert (compare["at"], compare["diverged_at"]) == (1, 2)
        assert [s["differs"] for s in compare["steps"]] == [False, True, True, True]
        assert compare["steps"][1]["fork"]["to"] == "Done"
        assert compare["steps"][1]["original"]["to"] == "ExecutingTools"
        assert compare["steps"][3]["fork"] is None

        back = client.post("/api/unfork")
        assert back["compare"] is None and back["position"] == 4  # the original, unchanged
    finally:
        server.close()


def test_forks_of_tool_calls_and_tool_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(budget_replay(tmp_path, capsys))
    try:
        client = Client(server)
        status, data = client.request("POST", "/api/fork", {"at": 1, "kind": "text", "value": "x"})
        assert status == 400 and "cannot fork after step 1: the run has taken 0" in data["error"]
        client.post("/api/continue")
        calls = [{"call_id": "c9", "name": "budget", "arguments": {"category": "groceries"}}]
        client.post(
            "/api/fork",
            {"at": 1, "kind": "calls", "value": json.dumps(calls), "then": [ANSWER]},
        )
        done = client.post("/api/continue")
        results = [i for i in done["conversation"] if i["type"] == "tool_result"]
        assert [r["call_id"] for r in results] == ["c9"]  # the edited call ran, on the tool
        assert done["conversation"][-1]["content"] == ANSWER
        client.post("/api/unfork")

        state = client.post("/api/rewind", {"to": 2})
        first, second = [c["call_id"] for c in state["state"]["calls"]]
        edited = {"at": 2, "kind": "tool", "value": {first: '{"left": 1}'}, "then": [ANSWER]}
        client.post("/api/fork", edited)
        done = client.post("/api/continue")
        results = {
            i["call_id"]: i["content"] for i in done["conversation"] if i["type"] == "tool_result"
        }
        assert results[first] == '{"left": 1}'  # edited; the other call keeps its result
        assert results[second] != '{"left": 1}' and results[second]
        for bad, message in (
            ({"at": 1, "kind": "tool", "value": {"x": "y"}}, "waits for a model answer"),
            ({"at": 1, "kind": "calls", "value": "[]"}, "tool calls are a JSON list"),
            ({"at": 1, "kind": "poem", "value": "x"}, "kind is text, calls, tool or effect"),
            ({"at": True, "kind": "text", "value": "x"}, "at must be a whole number"),
            ({"at": 1, "kind": "text", "value": 3}, "value is a string"),
        ):
            status, data = client.request("POST", "/api/fork", bad)
            assert status == 400 and message in data["error"], (bad, data)
            assert client.get()["position"] == 4  # a refused fork moves nothing
    finally:
        server.close()


def test_a_replay_without_its_chart_cannot_fork(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = record(tmp_path, GROCERIES)
    capsys.readouterr()
    server = serve(open_session(studio_args(trace=str(trace))))
    try:
        client = Client(server)
        client.post("/api/step")
        status, data = client.request(
            "POST", "/api/fork", {"at": 1, "kind": "text", "value": ANSWER}
        )
        assert status == 400 and "--chart CHART" in data["error"]
    finally:
        server.close()


def test_an_effects_result_forks_beside_the_original_and_into_the_store(
    backend: Backend,
) -> None:
    module = load_module(str(RETRIEVE))
    store = backend.open(None)
    asyncio.run(
        module.agent(ScriptedModel(module.script()))
        .run(module.EXAMPLE_INPUT, store=store, run_id="r1")
        .collect()
    )
    runs = StoredRuns(backend.open(None), lambda: (module.agent(ScriptedModel([])), None))
    server = serve(runs.session("r1"), runs=runs)
    try:
        client = Client(server)
        client.post("/api/step")
        nothing = '{"passages": [], "query": ""}'
        status, data = client.request(
            "POST", "/api/fork", {"at": 1, "kind": "effect", "value": "{"}
        )
        assert status == 400 and "an effect's result is a JSON value; got '{'" in data["error"]
        status, data = client.request("POST", "/api/fork", {"at": 1, "kind": "effect", "value": 5})
        assert status == 400 and "the effect edit's value is a string" in data["error"]
        status, data = client.request("POST", "/api/fork", {"at": 1, "kind": "text", "value": "x"})
        assert status == 400 and "waits for an effect's result (`fork effect`)" in data["error"]
        client.post("/api/fork", {"at": 1, "kind": "effect", "value": nothing, "then": ["None."]})
        done = client.post("/api/continue")
        told = [item["content"] for item in done["conversation"]]
        assert told[1:] == [f"Result of retrieve: {nothing}", "None."]
        assert done["compare"]["diverged_at"] == 2
        client.post("/api/unfork")

        edit = {"at": 1, "kind": "effect", "value": nothing}
        fork_id = client.post("/api/fork_stored", edit, expect=201)["run_id"]
        second = store.get(fork_id).records[1]
        assert (second.seq, second.input) == (2, EffectResult("retrieve", json.loads(nothing)))
        assert store.get(fork_id).info.status == "suspended"  # for `runs resume`
    finally:
        server.close()


def classed(svg: str) -> list[str]:
    """Each node and edge of the drawing that a comparison class marks: `kind title:
    classes`, in drawing order."""
    lines = []
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        kind, *classes = group.get("class", "").split()
        title = group.find(f"{SVG}title")
        if kind in ("node", "edge") and classes and title is not None:
            lines.append(f"{kind} {title.text}: {' '.join(classes)}")
    return lines


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.read_text() == text, f"{name} differs: regenerate with HELIKON_UPDATE_GOLDEN=1"


def test_the_comparison_is_drawn_on_the_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = budget_replay(tmp_path, capsys)
    server = serve(session)
    try:
        client = Client(server)
        original = client.post("/api/continue")
        assert "path-" not in original["diagram"]["svg"]  # no fork: no comparison drawn
        client.post("/api/fork", {"at": 1, "kind": "text", "value": ANSWER})
        done = client.post("/api/continue")
        compare = done["compare"]
        table = session.tables[done["chart"]["digest"]]
        dot = chart_to_dot(
            table, Diagram(table).overlay(done["path"], done["phase"], compare_marks(compare))
        )
        golden("studio_compare.dot", dot)
        lines = classed(done["diagram"]["svg"])
        golden("studio_compare.svg.txt", "".join(line + "\n" for line in lines))
        # The start both took; at step 2, where they part leaving CallingModel, the
        # original calls its tools and the fork answers; the original answers at step 4.
        assert "edge CallingModel->CallingModel: path-shared" in lines
        assert "edge CallingModel->ExecutingTools: diverges path-original" in lines
        assert "edge ExecutingTools->CallingModel: path-original" in lines
        assert "edge CallingModel->Done: diverges path-fork path-original" in lines
        assert "node CallingModel: diverged-here path-original path-shared" in lines
        assert "node ExecutingTools: path-original" in lines
        used = {c for line in lines for c in line.split(": ")[1].split()}
        assert used == set(COMPARE_CLASSES)

        back = client.post("/api/unfork")
        assert classed(back["diagram"]["svg"]) == []  # the original alone, unmarked
    finally:
        server.close()


@needs_chromium
def test_the_page_forks_with_an_edited_answer_and_compares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(budget_replay(tmp_path, capsys))
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(server.url, width=1440, height=1400)
        page.wait_for("document.getElementById('position').textContent === 'step 0 of 4'")
        page.click("#continue")
        page.wait_for("document.getElementById('status').textContent === 'finished'")
        page.evaluate(
            "(() => { document.getElementById('fork-at').value = '1';"
            f" document.getElementById('fork-value').value = {json.dumps(ANSWER)}; }})()"
        )
        page.click("#fork-go")
        page.wait_for("!document.getElementById('compare').hidden")
        page.press("c")
        page.wait_for("document.getElementById('status').textContent === 'finished'")
        assert ANSWER in page.evaluate("document.getElementById('conversation').textContent")
        page.wait_for(
            "document.getElementById('diverged').textContent.includes('diverge at step 2')"
        )
        differs = "document.querySelectorAll('#compare-rows tr.differs').length"
        assert page.evaluate(differs) == 3
        # The chart draws both paths, with a legend naming where they part.
        assert not page.evaluate("document.getElementById('compare-legend').hidden")
        assert page.evaluate("document.getElementById('legend-split').textContent") == (
            "where they part: step 2, from CallingModel"
        )
        marked = page.evaluate(
            "Object.fromEntries([...document.querySelectorAll('#diagram g.edge, #diagram g.node')]"
            ".filter((g) => g.querySelector('title'))"
            ".map((g) => [g.querySelector('title').textContent, [...g.classList].sort()]))"
        )
        assert marked["CallingModel->ExecutingTools"] == ["diverges", "edge", "path-original"]
        assert marked["CallingModel->Done"] == ["diverges", "edge", "path-fork", "path-original"]
        assert marked["CallingModel->CallingModel"] == ["edge", "path-shared"]
        assert "diverged-here" in marked["CallingModel"]
        stroke = (
            'getComputedStyle(document.querySelector("#diagram g.edge.path-original'
            ':not(.path-fork) > path")).stroke'
        )
        assert page.evaluate(stroke) == "rgb(230, 81, 0)"  # the original's colour, not grey
        page.evaluate("window.scrollTo(0, 0)")  # the chart, with its legend
        screenshot_to(page, "studio-fork-chart.png", tmp_path)
        page.click("#unfork")
        page.wait_for("document.getElementById('compare').hidden")
        assert page.evaluate("document.getElementById('compare-legend').hidden")
        page.wait_for("document.querySelector('#diagram g.path-original') === null")
        assert page.console_errors() == []
    finally:
        browser.close()
        server.close()
