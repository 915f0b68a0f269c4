"""Approving and rejecting a stored suspended run in the studio (`helikon studio --store URL
RUN_ID --chart CHART`): the page shows the calls the store says the run waits on; a decision
goes through `agent.resume(run_id, decisions, store=store)`, bound to the call id, the
arguments hash and the suspension, once; the run goes on in the studio and the page follows
its records. Through the API and in Chromium.

The stored run is the teller's (`store_drivers.teller`): its `transfer` tool needs approval
and appends a line to a log each time it runs, so a test counts the transfers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from browser_support import Browser
from store_drivers import TRANSFER, teller
from store_support import Backend
from test_studio import (
    CURRENT,
    Client,
    needs_chromium,
    read_event,
    screenshot_to,
    serve,
    studio_args,
)
from test_studio_store import suspended_teller

from helikon import Agent, ScriptedModel, tool
from helikon.cli import main
from helikon.cli.studio import open_runs, stored_session
from helikon.core.items import ToolResult
from helikon.durable import RunStore, open_store
from helikon.models.base import ModelInput
from helikon.studio.server import StudioServer
from helikon.studio.stored import StoredRuns

ROOT = Path(__file__).resolve().parent.parent
PAYMENTS = "charts/approval_gated.py"
SPENT = "a decision is spent once"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def telling(log: Path) -> Agent:
    """The teller, its last answer saying what the model was given for the transfer."""

    def told(request: ModelInput) -> str:
        (result,) = [i for i in request.items if isinstance(i, ToolResult)]
        return f"The bank said: {result.content}"

    return dataclasses.replace(teller(log), model=ScriptedModel([[TRANSFER], told]))


@contextmanager
def suspended_studio(
    url: str, tmp_path: Path, *, chart: bool = True
) -> Iterator[tuple[StudioServer, RunStore, Path]]:
    """The teller's run r1 suspended for approval in the store at `url`, a studio on it,
    a store of the test's own, and the teller's transfer log; closed after."""
    log = tmp_path / "transfers.log"
    suspended_teller(url, log)
    server, store = studio(url, log, chart=chart)
    try:
        yield server, store, log
    finally:
        server.close()
        store.close()


def studio(url: str, log: Path, *, chart: bool = True) -> tuple[StudioServer, RunStore]:
    """A studio on the store's run r1 (as `--store URL r1 [--chart CHART]`), and a store of
    the test's own to look at what happened."""
    runs = (
        StoredRuns(open_store(url), lambda: (teller(log), None), lambda: (telling(log), None))
        if chart
        else StoredRuns(open_store(url))
    )
    return serve(runs.session("r1"), runs=runs), open_store(url)


def decision(state: dict[str, Any], approved: bool) -> dict[str, Any]:
    (pending,) = state["pending"]
    keys = ("call_id", "arguments_hash", "seq")
    return {"decisions": [{**{k: pending[k] for k in keys}, "approved": approved}]}


def follow_to_end(client: Client) -> dict[str, Any]:
    """The snapshots of the client's event stream, until the stored run has ended."""
    stream = client.stream()
    try:
        state = read_event(stream)
        while state["busy"] or state["stored"]["following"]:
            state = read_event(stream)
        return state
    finally:
        stream.connection.close()  # type: ignore[attr-defined]


def test_an_approval_resumes_the_stored_run_and_the_studio_follows_it(
    url: str, tmp_path: Path
) -> None:
    with suspended_studio(url, tmp_path) as (server, store, log):
        client = Client(server)
        shown = client.get()
        assert shown["position"] == 0  # the replay's start: the store's pending, all the same
        (pending,) = shown["pending"]
        assert (pending["tool"], pending["call_id"], pending["seq"]) == ("transfer", "t1", 2)
        assert pending["arguments"] == TRANSFER.arguments
        assert pending["asked_by"] == "the permission of tool transfer (ask)"
        assert shown["decide_refused"] is None

        done = client.post("/api/decide", decision(shown, approved=True))
        assert (done["position"], done["phase"], done["pending"]) == (2, "NeedsApproval", [])
        state = follow_to_end(client)
        assert (state["phase"], state["position"], state["recorded"]) == ("Done", 5, 5)
        assert state["stored"] == {"run_id": "r1", "status": "completed", "following": False}
        assert state["conversation"][-1]["content"] == "The bank said: sent 10 to ann"
        assert log.read_text() == "transfer 10 to ann\n"
        assert store.get("r1").info.status == "completed"

        status, data = client.request("POST", "/api/decide", decision(shown, approved=True))
        assert status == 409 and SPENT in data["error"] and "waits for no approval" in data["error"]
        assert log.read_text() == "transfer 10 to ann\n"


def test_a_rejection_resumes_the_stored_run_and_the_model_is_told(url: str, tmp_path: Path) -> None:
    with suspended_studio(url, tmp_path) as (server, store, log):
        client = Client(server)
        client.post("/api/decide", decision(client.get(), approved=False))
        state = follow_to_end(client)
        told = "The bank said: rejected in helikon studio: transfer"
        assert (state["phase"], state["conversation"][-1]["content"]) == ("Done", told)
        assert not log.exists()  # the transfer never ran
        events = [e.type for e in store.events("r1")]
        assert "permission_denied" in events and events[-1] == "run_completed"


def test_hostile_decisions_are_refused_and_change_nothing(url: str, tmp_path: Path) -> None:
    with suspended_studio(url, tmp_path) as (server, store, log):
        client = Client(server)
        good = decision(client.get(), approved=True)["decisions"][0]
        for body, message in (
            ({**good, "call_id": "t9"}, "no call 't9' is waiting for approval"),
            ({**good, "arguments_hash": "0" * 64}, "quotes arguments hash 000000000000"),
            ({**good, "seq": 1}, "at suspension 1, not run 'r1' at suspension 2"),
            ({**good, "seq": None}, "names the suspension it answers"),
            ({**good, "seq": True}, "each decision is"),
            ({**good, "approved": "yes"}, "each decision is"),
        ):
            status, data = client.request("POST", "/api/decide", {"decisions": [body]})
            assert status == 400 and message in data["error"], (body, data)
        for body, message in (({"decisions": []}, "non-empty list"), ({}, "non-empty list")):
            status, data = client.request("POST", "/api/decide", body)
            assert status == 400 and message in data["error"], (body, data)
        status, data = client.request("POST", "/api/decide", b'{"decisions": [')
        assert status == 400 and "the body is not JSON" in data["error"]
        two = {"decisions": [{**good, "approved": True}, {**good, "approved": False}]}
        status, data = client.request("POST", "/api/decide", two)
        assert status == 400 and "two decisions for call 't1'" in data["error"]

        assert store.get("r1").info.status == "suspended"  # nothing changed
        assert [r.call.call_id for r in store.pending("r1")] == ["t1"]
        after = client.get()
        assert after["pending"][0]["call_id"] == "t1" and after["busy"] is None
        assert not log.exists()


def test_a_decision_is_taken_once_across_browser_sessions(url: str, tmp_path: Path) -> None:
    with suspended_studio(url, tmp_path) as (server, _store, log):
        first, second = Client(server), Client(server)
        body = decision(second.get(), approved=False)  # what the second page was shown
        first.post("/api/decide", decision(first.get(), approved=True))
        status, data = second.request("POST", "/api/decide", body)
        assert status == 409 and SPENT in data["error"], data
        followed = follow_to_end(second)  # the second page's replay takes the records too
        assert (followed["position"], followed["recorded"]) == (0, 5)
        assert second.post("/api/continue")["phase"] == "Done"
        assert log.read_text() == "transfer 10 to ann\n"


def test_a_browser_session_opened_after_the_decision_shows_the_run_as_stored_now(
    backend: Backend, tmp_path: Path
) -> None:
    with suspended_studio(backend.url, tmp_path) as (server, store, _log):
        first = Client(server)
        first.post("/api/decide", decision(first.get(), approved=True))
        assert follow_to_end(first)["stored"]["status"] == "completed"
        later = Client(server)  # a new page: a copy of the replay, made after the decision
        shown = later.get()
        assert (shown["recorded"], shown["pending"]) == (5, [])
        assert shown["stored"] == {"run_id": "r1", "status": "completed", "following": False}
        done = later.post("/api/continue")
        assert (done["phase"], done["position"]) == ("Done", 5)
        assert store.get("r1").info.status == "completed"


def test_a_run_another_owner_leases_is_refused_by_name(url: str, tmp_path: Path) -> None:
    with suspended_studio(url, tmp_path) as (server, store, log):
        client = Client(server)
        shown = client.get()
        asyncio.run(store.claim("r1", "worker-7:4242", 60))
        status, data = client.request("POST", "/api/decide", decision(shown, approved=True))
        assert status == 409 and "driven by worker-7:4242" in data["error"], data
        assert "nothing was decided" in data["error"]
        assert [r.call.call_id for r in store.pending("r1")] == ["t1"]
        assert store.get("r1").decisions == ()
        assert not log.exists()


def test_without_a_chart_the_studio_decides_nothing(url: str, tmp_path: Path) -> None:
    with suspended_studio(url, tmp_path, chart=False) as (server, store, log):
        client = Client(server)
        shown = client.get()
        assert shown["pending"][0]["call_id"] == "t1"
        assert "--chart CHART" in shown["decide_refused"]
        status, data = client.request("POST", "/api/decide", decision(shown, approved=True))
        assert status == 400 and "--chart CHART" in data["error"]
        assert store.get("r1").info.status == "suspended" and not log.exists()


def stuck_teller(log: Path) -> Agent:
    """The teller, whose transfer, once begun, never ends by itself."""

    @tool(needs_approval=True)
    async def transfer(to: str, amount: int) -> str:
        """Move money to someone."""
        log.write_text(f"transfer {amount} to {to} began\n")
        await asyncio.Event().wait()
        return "unreachable"

    return Agent("teller", ScriptedModel([[TRANSFER], "Sent."]), tools=[transfer])


def test_closing_the_studio_cancels_the_run_it_resumed(url: str, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    store = open_store(url)
    try:
        assert asyncio.run(
            stuck_teller(log).run("pay ann 10", store=store, run_id="r1").collect()
        ).suspended
        runs = StoredRuns(open_store(url), None, lambda: (stuck_teller(log), None))
        server = serve(runs.session("r1"), runs=runs)
        try:
            client = Client(server)
            client.post("/api/decide", decision(client.get(), approved=True))
            deadline = time.monotonic() + 15
            while not log.exists():  # the transfer has begun
                assert time.monotonic() < deadline, "the approved transfer never began"
                time.sleep(0.01)
        finally:
            server.close()
        stored = store.get("r1")
        assert stored.info.status == "failed" and stored.info.lease_owner is None
        assert stored.records[-1].state_after.error.kind == "cancelled"
        assert "helikon studio stopped" in stored.records[-1].state_after.error.reason
        assert [e.type for e in store.events("r1")][-1] == "run_failed"
    finally:
        store.close()


def test_the_cli_resumes_with_the_agent_of_its_chart(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`helikon studio --store URL r1 --chart charts/approval_gated.py --offline`: the
    decided run goes on with the chart's agent, on its script, after the calls it made."""
    monkeypatch.chdir(ROOT)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):  # --offline, and the chart's script
        monkeypatch.delenv(name, raising=False)
    assert main(["run", PAYMENTS, "--offline", "--store", url, "--run-id", "r1"]) == 0
    capsys.readouterr()
    runs = open_runs(studio_args(store=url, chart_option=PAYMENTS))
    server = serve(stored_session(runs, "r1"), runs=runs)
    try:
        client = Client(server)
        shown = client.get()
        assert shown["pending"][0]["asked_by"] == (
            "the per-call policy (these arguments need approval)"
        )
        client.post("/api/decide", decision(shown, approved=True))
        state = follow_to_end(client)
        assert state["phase"] == "Done" and state["stored"]["status"] == "completed"
        assert "500.00 EUR moved from checking to savings" in state["conversation"][-1]["content"]
    finally:
        server.close()


# ---------------------------------------------------------------- in Chromium

PENDING = "#pending tr[data-call-id='t1']"


def wait_for_pending(page: Any) -> None:
    """Until the page shows the pending call, laid out: the store's runs listed above it
    (a click lands where the button is once they no longer move it)."""
    page.wait_for("!document.getElementById('approvals').hidden")
    page.wait_for("document.querySelectorAll('#runs tbody tr').length === 1")


@needs_chromium
def test_the_page_approves_a_stored_run_and_follows_it_to_its_end(url: str, tmp_path: Path) -> None:
    with (
        suspended_studio(url, tmp_path) as (server, _store, log),
        closing(Browser(tmp_path / "profile")) as browser,
    ):
        page = browser.page(server.url, width=1440, height=1200)
        wait_for_pending(page)
        title = page.evaluate("document.getElementById('approvals-title').textContent")
        assert title == "Stored run r1 waits for approval"
        row = page.evaluate(f'document.querySelector("{PENDING}").textContent')
        assert "transfer" in row and '"amount": 10' in row and "permission of tool" in row
        screenshot_to(page, "studio-stored-approval.png", tmp_path)
        page.click(f"{PENDING} button.approve")
        page.wait_for(f"{CURRENT} === 'Done'")
        page.wait_for("document.getElementById('position').textContent === 'step 5 of 5'")
        page.wait_for("document.getElementById('following').textContent === 'completed'")
        assert page.evaluate("document.getElementById('approvals').hidden")
        assert "The bank said: sent 10 to ann" in page.evaluate(
            "document.getElementById('conversation').textContent"
        )
        assert log.read_text() == "transfer 10 to ann\n"
        assert page.console_errors() == []


@needs_chromium
def test_the_page_rejects_a_stored_run_and_the_model_is_told(url: str, tmp_path: Path) -> None:
    with (
        suspended_studio(url, tmp_path) as (server, _store, log),
        closing(Browser(tmp_path / "profile")) as browser,
    ):
        page = browser.page(server.url, width=1440, height=1200)
        wait_for_pending(page)
        page.click(f"{PENDING} button.reject")
        page.wait_for("document.getElementById('following').textContent === 'completed'")
        page.wait_for(f"{CURRENT} === 'Done'")
        assert "The bank said: rejected in helikon studio: transfer" in page.evaluate(
            "document.getElementById('conversation').textContent"
        )
        assert not log.exists()
        assert page.console_errors() == []


@needs_chromium
def test_the_page_refuses_a_second_decision(url: str, tmp_path: Path) -> None:
    with (
        suspended_studio(url, tmp_path) as (server, _store, log),
        closing(Browser(tmp_path / "profile")) as browser,
    ):
        first = browser.page(server.url)
        second = browser.page(server.url, isolated=True)  # another browser session
        for page in (first, second):
            wait_for_pending(page)
        shown = second.evaluate("window.helikonStudio.latest()")
        first.click(f"{PENDING} button.approve")
        second.click(f"{PENDING} button.reject")  # its page still shows the call
        second.wait_for("!document.getElementById('error').hidden")
        assert SPENT in second.evaluate("document.getElementById('error').textContent")
        first.wait_for("document.getElementById('following').textContent === 'completed'")
        # The second page's replay takes the records of the run the first decided.
        second.wait_for("document.getElementById('position').textContent === 'step 0 of 5'")
        second.press("c")
        second.wait_for(f"{CURRENT} === 'Done'")

        assert first.console_errors() == []

        replayed = json.dumps(decision(shown, approved=False))  # a POST replayed by a script
        answer = first.evaluate(
            "fetch('/api/decide', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            f" body: {json.dumps(replayed)}}}).then(async (r) => [r.status, await r.json()])"
        )
        assert answer[0] == 409 and SPENT in answer[1]["error"]
        assert log.read_text() == "transfer 10 to ann\n"  # approved once, never rejected
        assert "rejected" not in first.evaluate(
            "document.getElementById('conversation').textContent"
        )


@needs_chromium
def test_the_page_without_a_chart_says_to_give_one(url: str, tmp_path: Path) -> None:
    with (
        suspended_studio(url, tmp_path, chart=False) as (server, _store, _log),
        closing(Browser(tmp_path / "profile")) as browser,
    ):
        page = browser.page(server.url)
        wait_for_pending(page)
        assert page.evaluate(f'document.querySelector("{PENDING} button.approve").disabled')
        assert "--chart CHART" in page.evaluate(
            "document.getElementById('approvals-note').textContent"
        )
        assert page.console_errors() == []
