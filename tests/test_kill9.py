"""kill -9 trials: a durable run killed at random moments, resumed in a fresh process each
time, until it is done. Nothing that finished runs twice; nothing is lost or corrupt.

Each trial starts `tests/kill9_driver.py` (three tools a turn in parallel: one with side
effects, one idempotent, one read-only), kills it with SIGKILL a random while after it is
ready, and resumes the run in a new process, until the run completes. At the end:

- the conversation equals an uninterrupted run's, except that a call of the side-effecting
  tool in flight at a kill has the "interrupted" result;
- every call has exactly one result;
- no finished call ran twice, and no call of the side-effecting tool ran twice at all;
- the idempotent tool's effects (deduplicated by its key) happened exactly once per call;
- every row of the store checks out (signatures, the record chain).

`pytest tests/test_kill9.py --trials N` runs more trials (each is killed up to 5 times).

A resume killed right after its approval decision was committed, before the record it leads
to (`tests/kill9_decide.py`, on SQLite and PostgreSQL), leaves the decision spent and the run
suspended: the call is no longer pending, `runs show` says so, and `runs resume` (whatever
it is told to decide) or `runs recover` goes on with the recorded decision.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from store_support import KEY, Backend

from helikon.cli import main
from helikon.core.items import ToolCall, ToolResult
from helikon.durable import SqliteRunStore, StoredRun, open_store
from helikon.durable.views import pending_of

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "kill9_driver.py"
KILLS_PER_TRIAL = 5
ROUNDS = 8  # as tests/kill9_driver.py scripts it


def start(store: Path, run_id: str, effects: Path, fresh: bool) -> subprocess.Popen[str]:
    args = [sys.executable, str(DRIVER), str(store), run_id, str(effects)]
    return subprocess.Popen(
        [*args, "--fresh"] if fresh else args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE.parent,
    )


def drive(store: Path, run_id: str, effects: Path, rng: random.Random) -> int:
    """Run to completion, killing the driver up to KILLS_PER_TRIAL times; the kills made."""
    kills = 0
    fresh = True
    for _ in range(KILLS_PER_TRIAL + 3):
        process = start(store, run_id, effects, fresh)
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.strip() == "ready", process.communicate()[1]
        if kills < KILLS_PER_TRIAL:
            try:
                process.wait(timeout=rng.uniform(0.02, 0.35))
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.communicate()  # reaps it and closes both pipes
                kills += 1
                fresh = False
                continue
        _, errors = process.communicate(timeout=120)
        if process.returncode == 0:
            return kills
        assert not fresh or "already" not in errors, errors
        raise AssertionError(f"the driver failed:\n{errors}")
    raise AssertionError("the run did not complete")


def uninterrupted(tmp_path: Path) -> list[Any]:
    folder = tmp_path / "reference"
    folder.mkdir()
    done = start(folder / "s.db", "reference", folder, fresh=True)
    _, errors = done.communicate(timeout=120)
    assert done.returncode == 0, errors
    with SqliteRunStore(folder / "s.db") as store:
        return [item for record in store.get("reference").records for item in record.appends]


def trial_count(config: pytest.Config) -> int:
    return int(config.getoption("--trials"))


def test_a_run_killed_at_random_moments_ends_as_if_it_never_was(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    reference = uninterrupted(tmp_path)
    rng = random.Random(9)
    total_kills = 0
    for trial in range(trial_count(pytestconfig)):
        folder = tmp_path / f"trial{trial}"
        folder.mkdir()
        run_id = f"trial-{trial}"
        total_kills += drive(folder / "s.db", run_id, folder, rng)
        with SqliteRunStore(folder / "s.db") as store:
            stored = store.get(run_id)  # every signature and the record chain checked
            conversation = [item for record in stored.records for item in record.appends]
            calls = stored.calls
        assert stored.info.status == "completed"
        check_conversation(conversation, reference)
        check_results(conversation)
        check_effects(folder, run_id, calls)
    print(f"\nkill -9 trials: {trial_count(pytestconfig)} runs, {total_kills} kills")
    wanted = 50 if trial_count(pytestconfig) >= 12 else 2 * trial_count(pytestconfig)
    assert total_kills >= wanted, f"only {total_kills} kills landed mid-run"


def check_conversation(conversation: list[Any], reference: list[Any]) -> None:
    """Equal to the uninterrupted run's, but for interrupted `note` results."""
    assert len(conversation) == len(reference)
    for got, want in zip(conversation, reference, strict=True):
        if got == want:
            continue
        assert isinstance(got, ToolResult) and got.call_id == "a", (got, want)
        assert got.content.startswith("error: interrupted:"), got


def check_results(conversation: list[Any]) -> None:
    calls = [item for item in conversation if isinstance(item, ToolCall)]
    results = [item for item in conversation if isinstance(item, ToolResult)]
    assert len(calls) == len(results)
    # Call ids repeat across turns: each turn's three calls are followed by three results.
    for start in range(0, len(conversation) - 1):
        item = conversation[start]
        if isinstance(item, ToolCall) and item.call_id == "a":
            batch = conversation[start : start + 6]
            ids = [x.call_id for x in batch if isinstance(x, ToolResult)]
            assert sorted(ids) == ["a", "b", "c"], batch


def check_effects(folder: Path, run_id: str, calls: Any) -> None:
    notes = Counter((folder / "note.log").read_text().split())
    stamps = Counter((folder / "stamp.log").read_text().split())
    assert all(count == 1 for count in notes.values()), notes  # never twice, finished or not
    assert all(count == 1 for count in stamps.values()), stamps  # deduplicated: once a call
    assert len(stamps) == ROUNDS, stamps  # every stamp call took effect
    for call in calls:
        ran = f"{run_id}:{call.seq}:{call.call_id}" in notes
        if call.call_id == "a" and call.finished:
            interrupted = call.result.content.startswith("error: interrupted")
            assert ran or interrupted, f"note of step {call.seq} has a result but never ran"


# ---------------------------------------------------------------- killed after a decision

DECIDE_DRIVER = HERE / "kill9_decide.py"
PAYMENTS = str(HERE.parent / "charts" / "approval_gated.py")


def helikon(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """`helikon ARGV` in this process; what it printed (it must succeed)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    return out


def killed_after_deciding(url: str) -> StoredRun:
    """A suspended payment run `r1`, then a `runs resume --approve all` killed with SIGKILL
    right after its decision was committed; the run as the store holds it then."""
    argv = ["runs", "resume", "r1", "--chart", PAYMENTS, "--approve", "all", "--offline"]
    killed = subprocess.run(
        [sys.executable, str(DECIDE_DRIVER), *argv, "--store", url],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = open_store(url)
    try:
        return store.get("r1")
    finally:
        store.close()


@pytest.mark.parametrize("going_on", ["resume", "recover"])
def test_a_resume_killed_right_after_spending_its_decision_goes_on_with_it(
    backend: Backend,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    going_on: str,
) -> None:
    monkeypatch.setenv("HELIKON_STORE_KEY", KEY.decode())  # the processes share the key
    store = ("--store", backend.url)
    helikon(capsys, "run", PAYMENTS, "--offline", "--run-id", "r1", *store)

    stuck = killed_after_deciding(backend.url)

    assert (stuck.info.status, stuck.records[-1].state_after.phase) == (
        "suspended",
        "NeedsApproval",
    )
    ((seq, decision),) = stuck.decisions
    assert (seq, decision.call_id, decision.approved) == (stuck.info.seq, "call_transfer", True)
    assert pending_of(stuck) == ()  # spent: no longer pending
    shown = helikon(capsys, "runs", "show", "r1", *store)
    assert "pending approvals" not in shown
    assert "decided, not applied yet (1)" in shown
    assert "  call_transfer  transfer(" in shown and "  approved" in shown
    if going_on == "resume":  # --approve none: the recorded approval stands, spent once
        argv = ["runs", "resume", "r1", "--chart", PAYMENTS, "--approve", "none", "--force"]
        resumed = helikon(capsys, *argv, "--offline", *store)
        assert "going on with call call_transfer approved" in resumed
    else:  # the dead owner's lease has expired
        backend.sql("UPDATE runs SET lease_expires = 1 WHERE run_id = 'r1'")
        resumed = helikon(capsys, "runs", "recover", "--chart", PAYMENTS, "--offline", *store)
        assert resumed.startswith("recovering 1 run of payments\n")  # none held by another
    assert "executed: moved 500.00 EUR from checking to savings" in resumed
    done = backend.open().get("r1")
    assert done.info.status == "completed"
    assert done.decisions == stuck.decisions  # the one decision, applied once
