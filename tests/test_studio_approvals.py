"""Approvals in the studio: a live run that suspends shows its pending calls (tool,
arguments, the rule that asked), and Approve / Reject answer them as `agent.resume` does
(bound to the call id and arguments hash of this suspension, once); the run continues.

The run is the approval-gated payments chart's: moving 500 EUR needs approval.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from browser_support import Browser
from test_studio import CURRENT, Client, needs_chromium, serve

from helikon.cli.loading import load_module
from helikon.debug.debugger import Debugger
from helikon.models.scripted import ScriptedModel
from helikon.studio import ThreadedDebugger

ROOT = Path(__file__).resolve().parent.parent
PAYMENTS = ROOT / "charts" / "approval_gated.py"
MOVED = "moved 500.00 EUR from checking to savings"


def payments_session() -> ThreadedDebugger:
    module = load_module(str(PAYMENTS))
    agent = module.agent(ScriptedModel(list(module.script())))
    return ThreadedDebugger(Debugger.live(agent, module.EXAMPLE_INPUT))


def tool_results(state: dict[str, Any]) -> list[str]:
    return [item["content"] for item in state["conversation"] if item["type"] == "tool_result"]


def test_a_suspended_run_shows_its_pending_calls_and_an_approval_continues_it() -> None:
    server = serve(payments_session())
    try:
        client = Client(server)
        suspended = client.post("/api/continue")
        assert suspended["stop"]["reason"] == "suspended"
        (pending,) = suspended["pending"]
        assert (pending["tool"], pending["call_id"]) == ("transfer", "call_transfer")
        assert '"amount": 500' in pending["arguments"]
        assert pending["asked_by"] == "the per-call policy (these arguments need approval)"

        decision = {key: pending[key] for key in ("call_id", "arguments_hash")}
        for bad, message in (
            ({**decision, "arguments_hash": "0" * 64, "approved": True}, "arguments hash"),
            ({**decision, "call_id": "call_other", "approved": True}, "no call 'call_other'"),
            ({**decision, "approved": "yes"}, "each decision is"),
        ):
            status, data = client.request("POST", "/api/decide", {"decisions": [bad]})
            assert status == 400 and message in data["error"], data
        assert client.get()["pending"] == [pending]  # refused: still waiting, nothing ran

        done = client.post("/api/decide", {"decisions": [{**decision, "approved": True}]})
        assert (done["phase"], done["pending"]) == ("Done", [])
        assert MOVED in tool_results(done)[-1]
        again = client.request(
            "POST", "/api/decide", {"decisions": [{**decision, "approved": True}]}
        )
        assert again[0] == 400 and "not suspended" in again[1]["error"]  # spent once

        # Rewound to the suspension, the decision is the record: stepping reuses it.
        client.post("/api/rewind", {"to": suspended["position"]})
        assert (
            client.request("POST", "/api/decide", {"decisions": [{**decision, "approved": False}]})[
                0
            ]
            == 400
        )
        assert MOVED in tool_results(client.post("/api/continue"))[-1]
    finally:
        server.close()


def test_a_rejection_continues_the_run_without_the_call() -> None:
    server = serve(payments_session())
    try:
        client = Client(server)
        (pending,) = client.post("/api/continue")["pending"]
        decision = {"call_id": pending["call_id"], "arguments_hash": pending["arguments_hash"]}
        done = client.post("/api/decide", {"decisions": [{**decision, "approved": False}]})
        assert done["pending"] == [] and done["finished"]
        assert not any(MOVED in text for text in tool_results(done))
    finally:
        server.close()


@needs_chromium
def test_the_page_approves_and_rejects_pending_calls(tmp_path: Path) -> None:
    for button, moved in (("approve", True), ("reject", False)):
        server = serve(payments_session())
        browser = Browser(tmp_path / f"profile-{button}")
        try:
            page = browser.page(server.url)
            page.wait_for(f"{CURRENT} === 'CallingModel'")
            page.click("#continue")
            page.wait_for("!document.getElementById('approvals').hidden")
            row = "#pending tr[data-call-id='call_transfer']"
            assert "transfer" in page.evaluate(f'document.querySelector("{row}").textContent')
            assert "per-call policy" in page.evaluate(
                f'document.querySelector("{row}").textContent'
            )
            page.click(f"{row} button.{button}")
            page.wait_for("document.getElementById('status').textContent === 'finished'")
            assert page.evaluate("document.getElementById('approvals').hidden")
            shown = page.evaluate("document.getElementById('conversation').textContent")
            assert (MOVED in shown) is moved
            assert page.console_errors() == []
        finally:
            browser.close()
            server.close()
