"""The studio's live mode steps into a nested run as it runs (`Debugger.step_in_live`): the
step-in button offers the run the next step would start, the breadcrumb and the chart are
the nested run's, its steps are released one at a time, and stepping out completes the
outer step. Closing the studio with a run held cancels it cleanly."""

from __future__ import annotations

from pathlib import Path

from browser_support import Browser
from test_studio import CURRENT, Client, needs_chromium, screenshot_to, serve

from helikon.cli.loading import load_module
from helikon.debug.debugger import Debugger
from helikon.models.scripted import ScriptedModel
from helikon.studio import ThreadedDebugger

ROOT = Path(__file__).resolve().parent.parent
TRIAGE = load_module(str(ROOT / "charts" / "triage.py"))
REFUND = "Invoice INV-1042 was paid twice; I have refunded 49.00 EUR to your card."


def triage_live() -> Debugger:
    agent = TRIAGE.agent(ScriptedModel(list(TRIAGE.script())))
    return Debugger.live(agent, TRIAGE.EXAMPLE_INPUT, run_id="r")


def test_the_api_steps_into_a_handoff_target_while_it_runs() -> None:
    debugger = triage_live()
    server = serve(ThreadedDebugger(debugger))
    try:
        client = Client(server)
        assert client.post("/api/step")["nested_runs"] == ["r/2"]  # what the next step starts
        inside = client.post("/api/step_in", {})
        assert [c["agent"] for c in inside["breadcrumb"]] == ["triage", "billing"]
        assert (inside["run_id"], inside["position"], inside["phase"]) == ("r/2", 0, "CallingModel")
        assert inside["diagram"]["svg"] and "ExecutingTools" in inside["diagram"]["svg"]
        assert debugger.in_flight  # the handoff's step waits on billing
        one = client.post("/api/step")
        assert (one["position"], len(one["history"])) == (1, 1)
        done = client.post("/api/continue")
        assert done["conversation"][-1]["content"] == REFUND
        assert len(done["history"]) == 4
        out = client.post("/api/step_out", {})
        assert (out["run_id"], out["position"], len(out["breadcrumb"])) == ("r", 2, 1)
        assert out["nested_runs"] == ["r/2"]  # now as recorded: step in replays it
        assert not debugger.in_flight
        end = client.post("/api/continue")
        assert end["phase"] == "Done"
    finally:
        server.close()


def test_closing_the_studio_with_a_run_held_cancels_it() -> None:
    debugger = triage_live()
    session = ThreadedDebugger(debugger)
    server = serve(session)
    try:
        client = Client(server)
        client.post("/api/step")
        client.post("/api/step_in", {})
        client.post("/api/step")
    finally:
        server.close()
    assert not debugger.in_flight
    assert debugger.next_input.kind == "cancel"  # the handoff's step took the cancellation
    assert [s.state_after.phase for s in debugger.history] == ["CallingModel", "ApplyingHandoff"]


@needs_chromium
def test_the_page_steps_into_a_handoff_target_live(tmp_path: Path) -> None:
    server = serve(ThreadedDebugger(triage_live()))
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(server.url, width=1440, height=1100)
        page.wait_for(f"{CURRENT} === 'CallingModel'")
        page.press("s")
        page.wait_for("document.querySelector('#nested button.step-into') !== null")
        assert page.evaluate("document.querySelector('#nested button').dataset.runId") == "r/2"
        page.click("#nested button.step-into")
        page.wait_for("document.querySelectorAll('#breadcrumb li').length === 2")
        page.wait_for("document.getElementById('position').textContent === 'step 0'")
        assert "billing" in page.evaluate("document.getElementById('agent').textContent")
        page.press("s")  # one of billing's transitions, released as it runs
        page.wait_for("document.getElementById('position').textContent === 'step 1'")
        page.press("s")
        page.wait_for("document.getElementById('position').textContent === 'step 2'")
        page.wait_for(f"{CURRENT} === 'ExecutingTools'")
        screenshot_to(page, "studio-nested-live.png", tmp_path)
        page.press("o")  # out: billing runs to its end, and the handoff's step completes
        page.wait_for("document.querySelectorAll('#breadcrumb li').length === 1")
        page.wait_for("document.getElementById('position').textContent === 'step 2'")
        assert "triage" in page.evaluate("document.getElementById('agent').textContent")
        assert "refunded 49.00 EUR" in page.evaluate(
            "document.getElementById('timeline').textContent"
        )
        assert page.console_errors() == []
    finally:
        browser.close()
        server.close()
