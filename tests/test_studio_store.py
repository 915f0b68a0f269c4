"""Stored runs as time travel: `helikon debug --store URL RUN_ID` (through a pipe, as a real
process) and `helikon studio --store URL [RUN_ID]` (its API, and the page in Chromium): a
stored run opens with no trace file, the studio lists the store's runs to pick one, and a
run still going is followed as its records land. And nested runs in the studio: step into
a handoff target and out, by mouse and keyboard.

The stored runs are the teller's (`store_drivers.teller`): it suspends for approval, so a
test resumes it while the studio watches, and counts the transfers its tool made.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from browser_support import Browser
from store_drivers import resume_approved, teller
from test_debug_repl import record_triage
from test_studio import (
    CURRENT,
    Client,
    budget_session,
    needs_chromium,
    read_event,
    screenshot_to,
    serve,
    studio_args,
)

from helikon.cli.studio import open_session
from helikon.core.quoting import quoted
from helikon.durable import RunStore, open_store
from helikon.studio import ThreadedDebugger
from helikon.studio.stored import StoredRuns

ROOT = Path(__file__).resolve().parent.parent


def suspended_teller(url: str, log: Path, run_id: str = "r1") -> None:
    store = open_store(url)
    try:
        result = asyncio.run(teller(log).run("pay ann 10", store=store, run_id=run_id).collect())
        assert result.suspended
    finally:
        store.close()


def resume(url: str, log: Path, run_id: str = "r1") -> None:
    store = open_store(url)
    try:
        assert asyncio.run(resume_approved(store, run_id, log)) == "completed"
    finally:
        store.close()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def debug(url: str, *argv: str, commands: str) -> subprocess.CompletedProcess[str]:
    """`helikon debug --store URL ...` as a real process, its commands piped in."""
    return subprocess.run(
        [sys.executable, "-m", "helikon", "debug", "--store", url, *argv],
        input=commands,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_debug_steps_a_stored_run_through_a_pipe(url: str, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    suspended_teller(url, log)
    resume(url, log)
    done = debug(url, "r1", commands="continue\nback 2\nstep\nquit\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "replay of run r1 of " in out and "(5 steps, as recorded)" in out
    assert "✓ the run completed: Sent." in out
    assert "#4 " in out.split("(hdb) step")[-1]  # back two steps, then the fourth again
    assert log.read_text() == "transfer 10 to ann\n"  # the replay ran no tool


def test_debug_refuses_what_the_store_lacks_in_one_line(url: str, tmp_path: Path) -> None:
    suspended_teller(url, tmp_path / "transfers.log")
    for argv, message in (
        (["nowhere"], "no run 'nowhere'"),
        ([], "name the stored run to debug"),
        (["r1", "--trace", "t.jsonl"], "not both"),
    ):
        failed = debug(url, *argv, commands="")
        assert failed.returncode == 2
        (line,) = failed.stderr.splitlines()
        assert line.startswith("helikon: ") and message in line, line


def test_the_studio_lists_the_stores_runs_and_opens_one(url: str, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    suspended_teller(url, log, "r1")
    suspended_teller(url, log, "r2")
    resume(url, log, "r2")
    runs = StoredRuns(open_store(url))
    server = serve(runs.session(runs.newest()), runs=runs)
    try:
        client = Client(server)
        listed = client.get("/api/runs")["runs"]
        assert {(r["run_id"], r["status"], r["agent"], r["phase"]) for r in listed} == {
            ("r1", "suspended", "teller", "NeedsApproval"),
            ("r2", "completed", "teller", "Done"),
        }
        assert client.get()["run_id"] == listed[0]["run_id"]
        opened = client.post("/api/open", {"run_id": "r1"})
        assert (opened["run_id"], opened["recorded"], opened["stored"]["status"]) == (
            "r1",
            2,
            "suspended",
        )
        assert client.get()["run_id"] == "r1"
        for body, answer in (
            ({"run_id": "r9"}, (404, "no run 'r9' in the store (nested runs open in theirs)")),
            ({"run_id": "r" * 5000}, (404, f"no run {quoted('r' * 5000)} in the store (nested")),
            ({"run_id": ["r1"]}, (400, "run_id is the id of a run in the store (a string), not")),
            ({}, (400, "run_id is the id of a run in the store (a string), not None")),
        ):
            status, data = client.request("POST", "/api/open", body)
            assert (status, data["error"][: len(answer[1])]) == answer, body
        assert client.get()["run_id"] == "r1"  # none of them switched the page
        assert log.read_text() == "transfer 10 to ann\n"  # only r2's resume ran it
    finally:
        server.close()


def test_a_studio_without_a_store_lists_no_runs() -> None:
    server = serve(budget_session())
    try:
        status, data = Client(server).request("GET", "/api/runs")
        assert status == 404 and "no run store" in data["error"]
    finally:
        server.close()


def test_the_studio_follows_a_stored_run_as_its_records_land(url: str, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    suspended_teller(url, log)
    runs = StoredRuns(open_store(url))
    server = serve(runs.session("r1"), runs=runs)
    try:
        client = Client(server)
        at_end = client.post("/api/continue")
        assert (at_end["position"], at_end["phase"], at_end["stored"]["following"]) == (
            2,
            "NeedsApproval",
            True,
        )
        resume(url, log)
        stream = client.stream()
        try:
            state = read_event(stream)
            while state["phase"] != "Done":
                state = read_event(stream)
        finally:
            stream.connection.close()  # type: ignore[attr-defined]
        assert (state["position"], state["recorded"], state["stored"]) == (
            5,
            5,
            {"run_id": "r1", "status": "completed", "following": False},
        )
        assert log.read_text() == "transfer 10 to ann\n"
    finally:
        server.close()


@needs_chromium
def test_the_page_picks_a_stored_run_and_follows_it(url: str, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    suspended_teller(url, log, "r1")
    suspended_teller(url, log, "r2")
    store: RunStore = open_store(url)
    runs = StoredRuns(store)
    server = serve(runs.session("r2"), runs=runs)
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(server.url)
        page.wait_for("document.querySelectorAll('#runs tbody tr').length === 2")
        assert page.evaluate("document.querySelector('#runs tr.current').dataset.runId") == "r2"
        page.click("#runs tr[data-run-id='r1'] button.open")
        page.wait_for("document.querySelector('#runs tr.current')?.dataset.runId === 'r1'")
        assert page.evaluate("window.helikonStudio.latest().run_id") == "r1"
        page.click("#continue")
        page.wait_for(f"{CURRENT} === 'NeedsApproval'")
        assert "following" in page.evaluate("document.getElementById('following').textContent")

        resume(url, log, "r1")  # another process drives the run on: the page follows it
        page.wait_for(f"{CURRENT} === 'Done'")
        page.wait_for("document.getElementById('position').textContent === 'step 5 of 5'")
        page.wait_for("document.getElementById('following').textContent === 'completed'")
        page.wait_for(
            "document.querySelector(\"#runs tr[data-run-id='r1'] td.status\")"
            ".textContent === 'completed'"
        )
        assert page.console_errors() == []
        assert all(url.startswith(server.url) for url in page.requested_urls())
        assert log.read_text() == "transfer 10 to ann\n"
    finally:
        browser.close()
        server.close()


# ---------------------------------------------------------------- nested runs


def triage_session(tmp_path: Path) -> ThreadedDebugger:
    trace = tmp_path / "triage.jsonl"
    record_triage(trace)
    return open_session(studio_args(trace=str(trace)))


def test_the_api_steps_into_a_nested_run_and_out(tmp_path: Path) -> None:
    server = serve(triage_session(tmp_path))
    try:
        client = Client(server)
        assert client.get()["breadcrumb"] == [{"run_id": client.get()["run_id"], "agent": "triage"}]
        client.post("/api/step")
        status, data = client.request("POST", "/api/step_in", {})
        assert status == 404 and "no nested run began after step 1" in data["error"]
        at_handoff = client.post("/api/step")
        (child,) = at_handoff["nested_runs"]
        inside = client.post("/api/step_in", {"run_id": child})
        assert [c["agent"] for c in inside["breadcrumb"]] == ["triage", "billing"]
        assert (inside["run_id"], inside["recorded"], inside["position"]) == (child, 4, 0)
        assert inside["diagram"]["svg"] and "ExecutingTools" in inside["diagram"]["svg"]
        done = client.post("/api/continue")
        assert done["conversation"][-1]["content"].startswith("Invoice INV-1042 was paid twice")
        assert len(done["history"]) == 4
        assert client.request("POST", "/api/step_out", {"to": 5})[0] == 400
        out = client.post("/api/step_out", {})
        assert (out["run_id"], out["position"], len(out["breadcrumb"])) == (
            at_handoff["run_id"],
            2,
            1,
        )
        assert client.request("POST", "/api/step_out", {})[0] == 400
    finally:
        server.close()


@needs_chromium
def test_the_page_steps_into_a_nested_run_by_mouse_and_keyboard(tmp_path: Path) -> None:
    server = serve(triage_session(tmp_path))
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(server.url, width=1440, height=1100)
        page.wait_for(f"{CURRENT} === 'CallingModel'")
        page.press("s")
        page.wait_for("document.getElementById('position').textContent === 'step 1 of 3'")
        assert page.evaluate("document.getElementById('step-in').disabled")
        page.click("#step")
        page.wait_for("document.querySelector('#nested button.step-into') !== null")
        page.click("#nested button.step-into")
        page.wait_for("document.querySelectorAll('#breadcrumb li').length === 2")
        page.wait_for("document.getElementById('position').textContent === 'step 0 of 4'")
        assert "billing" in page.evaluate("document.getElementById('agent').textContent")

        # A breakpoint on the nested run's phase, toggled by keyboard, and continue by 'c'.
        page.press("c")
        page.wait_for("document.getElementById('status').textContent === 'finished'")
        assert "refunded 49.00 EUR" in page.evaluate(
            "document.getElementById('conversation').textContent"
        )
        assert page.evaluate("document.querySelectorAll('#timeline .moment').length") == 5
        page.press("b")
        page.press("b")
        page.wait_for("document.getElementById('position').textContent === 'step 2 of 4'")
        page.wait_for(f"{CURRENT} === 'ExecutingTools'")
        page.press("t")
        page.wait_for("document.querySelectorAll('#breakpoints li').length === 1")
        page.press("t")
        page.wait_for("document.querySelectorAll('#breakpoints li').length === 0")
        screenshot_to(page, "studio-nested.png", tmp_path)

        page.press("o")  # out to triage, where it was
        page.wait_for("document.querySelectorAll('#breadcrumb li').length === 1")
        page.wait_for("document.getElementById('position').textContent === 'step 2 of 3'")
        assert "triage" in page.evaluate("document.getElementById('agent').textContent")
        page.press("i")  # and in again, by keyboard
        page.wait_for("document.getElementById('position').textContent === 'step 0 of 4'")
        assert page.console_errors() == []
    finally:
        browser.close()
        server.close()


# ---------------------------------------------------------------- forks into the store


def teller_runs(url: str, log: Path) -> StoredRuns:
    """The store's runs, with the teller as the agent to compute edited steps on."""
    return StoredRuns(open_store(url), lambda: (teller(log), None))


def test_the_studio_forks_a_stored_run_into_a_new_stored_run(url: str, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    suspended_teller(url, log)
    resume(url, log)
    runs = teller_runs(url, log)
    server = serve(runs.session("r1"), runs=runs)
    try:
        client = Client(server)
        edit = {"at": 4, "kind": "text", "value": "Not sent after all."}
        forked = client.post("/api/fork_stored", edit, expect=201)
        fork_id = forked["run_id"]
        assert fork_id.startswith("r1-fork4-") and forked["stored"]["run_id"] == fork_id
        assert forked["recorded"] == 5
        listed = {r["run_id"]: r for r in client.get("/api/runs")["runs"]}
        assert (listed[fork_id]["forked_from"], listed[fork_id]["forked_at"]) == ("r1", 4)
        assert listed[fork_id]["status"] == "completed"
        done = client.post("/api/continue")
        assert done["conversation"][-1]["content"] == "Not sent after all."
        status, data = client.request("POST", "/api/fork_stored", {**edit, "at": 2})
        assert status == 400 and "waits for approval decisions" in data["error"]
        assert log.read_text() == "transfer 10 to ann\n"  # the fork ran no tool
    finally:
        server.close()

    runs = StoredRuns(open_store(url))  # without --chart: an edited fork is refused
    server = serve(runs.session("r1"), runs=runs)
    try:
        status, data = Client(server).request(
            "POST", "/api/fork_stored", {"at": 4, "kind": "text", "value": "x"}
        )
        assert status == 400 and "--chart CHART" in data["error"]
    finally:
        server.close()


@needs_chromium
def test_the_stored_runs_list_loading_does_not_move_the_page(url: str, tmp_path: Path) -> None:
    # The list loads after the page's first state: rows that pushed the page down moved the
    # Fork button away between aiming at it and clicking, and the click toggled the checkbox
    # above it instead (the fork test failed so, now and then).
    log = tmp_path / "transfers.log"
    for run_id in ("r1", "r2", "r3"):
        suspended_teller(url, log, run_id)
    runs = teller_runs(url, log)
    server = serve(runs.session("r1"), runs=runs)
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(server.url, width=1440, height=1400)
        page.wait_for("document.querySelectorAll('#runs tbody tr').length === 3")
        moved = page.evaluate(
            "(async () => { const top = () => document.getElementById('fork-go')"
            ".getBoundingClientRect().top + window.scrollY;"
            " document.querySelector('#runs tbody').replaceChildren(); const empty = top();"
            " await window.helikonStudio.loadRuns(); return top() - empty; })()"
        )
        assert moved == 0
    finally:
        browser.close()
        server.close()


def test_the_page_forks_a_stored_run_into_the_store(url: str, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    suspended_teller(url, log)
    resume(url, log)
    runs = teller_runs(url, log)
    server = serve(runs.session("r1"), runs=runs)
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(server.url, width=1440, height=1400)
        page.wait_for("!document.getElementById('fork-store-label').hidden")
        page.evaluate(
            "(() => { document.getElementById('fork-at').value = '4';"
            " document.getElementById('fork-value').value = 'Not sent after all.';"
            " document.getElementById('fork-store').checked = true; })()"
        )
        page.click("#fork-go")
        page.wait_for("window.helikonStudio?.latest()?.run_id?.startsWith('r1-fork4-')")
        page.wait_for("document.querySelectorAll('#runs tbody tr').length === 2")
        assert "fork of r1 at 4" in page.evaluate(
            "document.querySelector('#runs tr.current').textContent"
        )
        page.press("c")
        page.wait_for("document.getElementById('status').textContent === 'finished'")
        assert "Not sent after all." in page.evaluate(
            "document.getElementById('conversation').textContent"
        )
        assert page.console_errors() == []
        assert log.read_text() == "transfer 10 to ann\n"
    finally:
        browser.close()
        server.close()
