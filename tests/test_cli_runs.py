"""`helikon run --store` and `helikon runs`, through `main(argv)` and as a real subprocess.

Every command works on a real SQLite store in the test's folder; what a command prints is
checked against what the store holds, and every error is one `helikon: ...` line with exit
status 2. Rows are hostile input: a run id or an agent name with terminal control sequences
is printed escaped. A crashed driver is a real process, killed.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helikon.cli import main
from helikon.cli.runs import duration
from helikon.cli.studio import replay_session
from helikon.durable import SqliteRunStore
from helikon.export import trace_to_markdown
from helikon.trace import read_trace

ROOT = Path(__file__).resolve().parent.parent

PAYMENTS = "charts/approval_gated.py"
TRIAGE = "charts/triage.py"
TRANSFER = '{"source": "checking", "target": "savings", "amount": 500}'

FINAL_ANSWER = "Done: 500.00 EUR moved from checking to savings."

# A chart whose tool waits until it is killed, with a short lease, for crashed drivers.
STUCK_CHART = '''
import asyncio

from helikon import Agent, RunConfig, ToolCall, tool


@tool
async def wait_forever() -> str:
    """Wait."""
    await asyncio.sleep(3600)
    return "never"


def agent(model):
    return Agent(
        name="stuck",
        model=model,
        tools=[wait_forever],
        config=RunConfig(lease_seconds=LEASE),
    )


def script():
    return [[ToolCall("c1", "wait_forever", "{}")], "recovered"]


EXAMPLE_INPUT = "Wait for me."
'''


# A chart whose tool fills its run's store (SQLite's page limit, on the store's connection)
# and pays by writing a line to PAID: the record that takes its result finds the disk full.
FULL_CHART = '''
from helikon import Agent, ToolCall, ToolContext, tool


@tool
def pay(to: str, context: ToolContext) -> str:
    """Pay someone."""
    with open(PAID, "a") as file:
        file.write(f"paid {to}\\n")
    db = context.run.store._db
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    return "receipt " * 2500


def agent(model):
    return Agent(name="payer", model=model, tools=[pay])


def script():
    return [[ToolCall("p1", "pay", '{"to": "ann"}')], "Paid."]


EXAMPLE_INPUT = "Pay ann."
'''


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The one `helikon: ...` line an error prints."""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("helikon: "), err
    return lines[0]


def fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run a command that must fail with exit status 2 and one line; return the line."""
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (2, ""), err
    return error_line(err)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


def url(db: Path) -> str:
    return f"sqlite:///{db}"


def runs(capsys: pytest.CaptureFixture[str], db: Path, *argv: str) -> tuple[int, str, str]:
    """`helikon runs ARGV --store <db>`."""
    return cli(capsys, "runs", *argv, "--store", url(db))


def suspended_payment(capsys: pytest.CaptureFixture[str], db: Path, run_id: str = "r1") -> str:
    code, out, err = cli(
        capsys, "run", PAYMENTS, "--offline", "--store", url(db), "--run-id", run_id
    )
    assert (code, err) == (0, "")
    return out


def stored(db: Path, run_id: str = "r1") -> Any:
    with SqliteRunStore(db) as store:
        return store.get(run_id)


def edit(db: Path, statement: str, *args: Any) -> None:
    with sqlite3.connect(db) as connection:
        connection.execute(statement, args)


# ---------------------------------------------------------------- the whole flow


def test_a_suspended_run_is_listed_shown_resumed_exported_and_deleted(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    out = suspended_payment(capsys, db)
    assert "suspended: waiting for approval of transfer" in out
    hint = f"helikon runs resume r1 --chart {PAYMENTS} --approve all --offline --store {url(db)}"
    assert hint in out

    code, listing, _ = runs(capsys, db, "list")
    assert code == 0
    header, row = listing.splitlines()
    assert header.split() == ["run", "id", "agent", "phase", "status", "turns", "updated"]
    assert row.split()[:5] == ["r1", "payments", "NeedsApproval", "suspended", "2"]

    code, shown, _ = runs(capsys, db, "show", "r1")
    assert code == 0
    assert "status suspended  phase NeedsApproval  step 4  turns 2" in shown
    assert f"  call_transfer  transfer({TRANSFER})" in shown.splitlines()
    (request,) = SqliteRunStore(db).pending("r1")
    assert f"    arguments hash {request.arguments_hash}" in shown.splitlines()
    assert "? approval needed: transfer" in shown

    resume = ("resume", "r1", "--chart", PAYMENTS, "--approve", "all", "--offline")
    code, resumed, err = runs(capsys, db, *resume)
    assert (code, err) == (0, "")
    assert resumed.startswith("> resuming run r1  (scripted model, --offline)\n")
    assert "executed: moved 500.00 EUR from checking to savings" in resumed
    assert FINAL_ANSWER in resumed and "completed" in resumed
    assert stored(db).info.status == "completed"

    trace = tmp_path / "r1.jsonl"
    code, wrote, _ = runs(capsys, db, "export", "r1", "-o", str(trace))
    assert (code, wrote) == (0, f"wrote {len(trace.read_text().splitlines())} lines to {trace}\n")
    code, markdown, _ = cli(capsys, "trace", str(trace), "-f", "md")
    assert code == 0
    assert markdown == trace_to_markdown(read_trace(trace))
    assert "| outcome | **completed** |" in markdown
    assert "approved" in markdown

    assert runs(capsys, db, "delete", "r1")[:2] == (0, "deleted run r1\n")
    assert runs(capsys, db, "list")[1] == f"no runs in {url(db)}\n"


def test_resume_with_approve_none_rejects_the_call(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    suspended_payment(capsys, db)

    code, out, _ = runs(
        capsys, db, "resume", "r1", "--chart", PAYMENTS, "--approve", "none", "--offline"
    )

    assert code == 0
    assert "transfer denied" in out
    assert stored(db).info.status == "completed"
    types = [event.type for record in stored(db).records for event in record.events]
    assert "permission_denied" in types


def test_resume_with_ask_and_no_terminal_leaves_the_run_suspended(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    suspended_payment(capsys, db)

    code, out, _ = runs(capsys, db, "resume", "r1", "--chart", PAYMENTS, "--offline")

    assert code == 0
    assert f"  call_transfer  transfer({TRANSFER})" in out.splitlines()
    assert out.endswith("run r1 is left suspended (no terminal to ask on)\n")
    assert stored(db).info.status == "suspended"
    assert stored(db).decisions == ()


def test_list_filters_by_status_and_includes_nested_runs_with_all(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    suspended_payment(capsys, db, "pay")
    assert cli(capsys, "run", TRIAGE, "--offline", "--store", url(db), "--run-id", "tri")[0] == 0

    def ids(*argv: str) -> list[str]:
        return [line.split()[0] for line in runs(capsys, db, "list", *argv)[1].splitlines()[1:]]

    assert sorted(ids()) == ["pay", "tri"]
    assert ids("--status", "completed") == ["tri"]
    assert sorted(ids("--all")) == ["pay", "tri", "tri/2"]
    assert runs(capsys, db, "list", "--status", "failed")[1] == f"no failed runs in {url(db)}\n"


def test_show_names_the_nested_runs_and_prints_the_last_events(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    assert cli(capsys, "run", TRIAGE, "--offline", "--store", url(db), "--run-id", "tri")[0] == 0

    code, out, _ = runs(capsys, db, "show", "tri", "--events", "2")

    assert code == 0
    assert "nested run tri/2 (billing, completed)" in out.splitlines()
    assert "last events (2 of 7):" in out.splitlines()  # the triage run's own: its target's
    assert out.splitlines()[-3] == "● billing"  # are the nested run's
    assert out.splitlines()[-2] == "  ⏱ handoff took 0 ms (at 00:00:00.000)"  # its record's
    assert out.splitlines()[-1].startswith("✓ completed")


def test_a_run_whose_rows_do_not_check_out_can_be_deleted(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    suspended_payment(capsys, db)
    edit(db, "UPDATE records SET data = replace(data, 'checking', 'savings') WHERE seq = 2")

    assert runs(capsys, db, "delete", "r1")[:2] == (0, "deleted run r1\n")


def test_delete_counts_the_nested_runs_and_prune_deletes_old_runs(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    for run_id in ("old", "new"):
        assert (
            cli(capsys, "run", TRIAGE, "--offline", "--store", url(db), "--run-id", run_id)[0] == 0
        )
    edit(db, "UPDATE runs SET updated_at = updated_at - 40 * 86400 WHERE run_id LIKE 'old%'")

    assert runs(capsys, db, "prune", "--older-than", "30d")[1] == (
        "pruned 2 runs not updated for 2.592e+06s\n"
    )
    assert runs(capsys, db, "prune", "--older-than", "1h")[1] == (
        "pruned 0 runs not updated for 3600s\n"
    )
    assert runs(capsys, db, "delete", "new")[1] == "deleted run new and 1 nested run\n"


@pytest.mark.parametrize(
    ("age", "seconds"), [("90s", 90), ("15m", 900), ("12h", 43200), ("1.5d", 129600)]
)
def test_prune_ages_take_seconds_minutes_hours_and_days(age: str, seconds: float) -> None:
    assert duration(age) == seconds


def test_export_to_stdout_is_the_trace_file(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    suspended_payment(capsys, db)
    runs(capsys, db, "export", "r1", "-o", str(tmp_path / "r1.jsonl"))

    code, out, _ = runs(capsys, db, "export", "r1")

    assert code == 0
    assert out == (tmp_path / "r1.jsonl").read_text()


# ---------------------------------------------------------------- the store, by default


def test_run_keeps_its_run_in_helikon_runs_db_by_default(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HELIKON_STORE")

    code, out, _ = cli(capsys, "run", str(ROOT / TRIAGE), "--offline", "--run-id", "r1")

    assert code == 0
    assert out.splitlines()[-1] == (
        "run r1 kept in sqlite:///.helikon/runs.db (helikon runs show r1)"
    )
    assert stored(tmp_path / ".helikon" / "runs.db").info.status == "completed"
    assert cli(capsys, "runs", "list")[1].splitlines()[1].split()[:4] == [
        "r1",
        "triage",
        "Done",
        "completed",
    ]


def test_store_none_keeps_nothing_and_the_environment_names_a_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HELIKON_STORE")
    code, out, _ = cli(capsys, "run", str(ROOT / TRIAGE), "--offline", "--store", "none")
    assert code == 0 and "kept in" not in out
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setenv("HELIKON_STORE", url(tmp_path / "env.db"))
    assert cli(capsys, "run", str(ROOT / TRIAGE), "--offline", "--run-id", "e1")[0] == 0
    assert stored(tmp_path / "env.db", "e1").info.status == "completed"


def test_the_demo_keeps_no_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HELIKON_STORE")
    assert cli(capsys, "demo")[0] == 0
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- errors, one line each


def test_a_run_id_the_store_holds_is_refused_before_running(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    suspended_payment(capsys, db)

    line = fails(capsys, "run", PAYMENTS, "--offline", "--store", url(db), "--run-id", "r1")

    assert line.startswith(f"helikon: a run 'r1' is already in {url(db)}: give another --run-id")


@pytest.mark.parametrize("command", ["show", "export", "delete"])
def test_a_missing_run(capsys: pytest.CaptureFixture[str], db: Path, command: str) -> None:
    line = fails(capsys, "runs", command, "nope", "--store", url(db))
    assert line == f"helikon: no run 'nope' in the store {db}"


def test_resume_of_a_missing_run(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    argv = ("runs", "resume", "nope", "--chart", PAYMENTS, "--offline", "--store", url(db))
    line = fails(capsys, *argv)
    assert line == f"helikon: no run 'nope' in the store {db}"


def test_resume_of_a_run_that_ended(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    assert cli(capsys, "run", TRIAGE, "--offline", "--store", url(db), "--run-id", "r1")[0] == 0
    line = fails(capsys, "runs", "resume", "r1", "--chart", TRIAGE, "--offline", "--store", url(db))
    assert "already ended (Done)" in line


def test_resume_on_another_charts_agent(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    suspended_payment(capsys, db)
    argv = ("runs", "resume", "r1", "--chart", TRIAGE, "--approve", "all", "--offline")
    argv += ("--store", url(db))
    line = fails(capsys, *argv)
    assert line == "helikon: run 'r1' is a run of agent 'payments', not 'triage'"
    assert stored(db).info.status == "suspended" and stored(db).decisions == ()


def test_a_store_that_is_not_a_database(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    db.write_bytes(b"not a database " * 100)
    line = fails(capsys, "runs", "list", "--store", url(db))
    assert line == f"helikon: cannot open the run store {db}: file is not a database"


def test_an_edited_record_is_refused(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    suspended_payment(capsys, db)
    edit(db, "UPDATE records SET data = replace(data, 'checking', 'savings') WHERE seq = 2")

    for argv in (
        ["show", "r1"],
        ["export", "r1"],
        ["resume", "r1", "--chart", PAYMENTS, "--offline"],
    ):
        line = fails(capsys, "runs", *argv, "--store", url(db))
        assert line == (
            "helikon: run 'r1': link 3 of 8 (record 2) does not chain: that row or one before "
            "it was edited, moved or swapped"
        )


@pytest.mark.parametrize(
    ("statement", "argv"),
    [
        ("UPDATE runs SET agent = CAST(x'ff00' AS TEXT)", ["list"]),
        ("UPDATE records SET data = CAST(x'ff00' AS TEXT) WHERE seq = 2", ["show", "r1"]),
        ("UPDATE charts SET data = CAST(x'ff00' AS TEXT)", ["export", "r1"]),
    ],
)
def test_a_damaged_store_is_one_line(
    capsys: pytest.CaptureFixture[str], db: Path, statement: str, argv: list[str]
) -> None:
    suspended_payment(capsys, db)
    edit(db, statement)

    line = fails(capsys, "runs", *argv, "--store", url(db))

    assert line.startswith("helikon: the run store ") and "cannot be read: Could not decode" in line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "list", "--store", "mysql://x"], "helikon: unknown run store URL 'mysql://x'"),
        (["runs", "list", "--store", "none"], "helikon: helikon runs list needs a run store"),
        (
            ["run", TRIAGE, "--offline", "--store", "redis://x"],
            "helikon: unknown run store URL 'redis://x'",
        ),
    ],
)
def test_a_store_url_that_names_no_store(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert fails(capsys, *argv).startswith(message)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs"], "the following arguments are required: runs_command"),
        (["runs", "prune"], "the following arguments are required: --older-than"),
        (["runs", "prune", "--older-than", "30 days"], "'30 days' is not an age"),
        (["runs", "resume", "r1"], "the following arguments are required: --chart"),
        (["runs", "list", "--status", "lost"], "invalid choice: 'lost'"),
    ],
)
def test_argparse_errors_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# ---------------------------------------------------------------- hostile rows


def test_names_from_the_store_are_printed_escaped(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    evil = "r\x1b]0;pwned\x07\x9b2J"
    hint = suspended_payment(capsys, db, evil).splitlines()[-1]
    assert hint.startswith("run r\\x1b]0;pwned\\x07\\x9b2J is suspended: helikon runs resume")
    edit(db, "UPDATE runs SET agent = ?, phase = ?", "pay\x1b[2Jments", "Needs\x1bApproval")

    for argv in (["list"], ["show", evil]):
        code, out, _ = runs(capsys, db, *argv)
        assert code == 0
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
        assert "r\\x1b]0;pwned\\x07\\x9b2J" in out
    assert "pay\\x1b[2Jments" in runs(capsys, db, "list")[1]


def test_export_to_stdout_escapes_c1_controls_as_json(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    evil = "r\x9b2J\x7f"
    suspended_payment(capsys, db, evil)

    code, out, _ = runs(capsys, db, "export", evil)

    assert code == 0
    assert "\x9b" not in out and "\x7f" not in out
    assert read_trace(out.splitlines()).header.run_id == evil


# ---------------------------------------------------------------- readers of an export


def test_debug_and_studio_read_an_exported_run(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    assert cli(capsys, "run", TRIAGE, "--offline", "--store", url(db), "--run-id", "r1")[0] == 0
    trace = tmp_path / "r1.jsonl"
    runs(capsys, db, "export", "r1", "-o", str(trace))

    done = helikon("debug", "--trace", str(trace), input="continue\n")
    assert (done.returncode, done.stderr) == (0, "")
    assert "replay of" in done.stdout and "Done" in done.stdout

    session = replay_session(str(trace), None)
    session.close()


def test_a_run_whose_store_fills_up_is_one_line_exit_2_and_resumes_once_there_is_room(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    paid = tmp_path / "paid.log"
    chart = tmp_path / "full.py"
    chart.write_text(FULL_CHART.replace("PAID", repr(str(paid))))

    done = helikon("run", str(chart), "--offline", "--store", url(db), "--run-id", "f1")

    assert done.returncode == 2 and "Traceback" not in done.stderr
    line = error_line(done.stderr)
    assert "database or disk is full (SQLITE_FULL)" in line
    assert f"helikon runs resume f1 --chart {chart} --offline --force --store {url(db)}" in line
    failed = f"✗ failed: the run store failed (StoreError): the run store {db} cannot write: "
    assert failed + "database or disk is full (SQLITE_FULL)\n" in done.stdout  # not a repr
    assert stored(db, "f1").info.status == "running"

    code, out, err = runs(capsys, db, "resume", "f1", "--chart", str(chart), "--offline", "--force")
    assert (code, err) == (0, "")  # a new connection: the page limit is gone
    assert "interrupted" in out and "Paid." in out
    assert paid.read_text() == "paid ann\n"  # in flight at the failure: not run again
    assert stored(db, "f1").info.status == "completed"


# ---------------------------------------------------------------- as a subprocess


def helikon(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "helikon", *argv],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,
    )


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_subprocess_the_whole_flow(db: Path, tmp_path: Path) -> None:
    store = ("--store", url(db))
    done = helikon("run", PAYMENTS, "--offline", *store, "--run-id", "r1")
    assert (done.returncode, done.stderr) == (0, "")
    assert "suspended" in done.stdout

    listing = helikon("runs", "list", *store)
    assert listing.stdout.splitlines()[1].split()[:4] == [
        "r1",
        "payments",
        "NeedsApproval",
        "suspended",
    ]
    shown = helikon("runs", "show", "r1", *store)
    assert f"  call_transfer  transfer({TRANSFER})" in shown.stdout.splitlines()

    resumed = helikon(
        "runs", "resume", "r1", "--chart", PAYMENTS, "--approve", "all", "--offline", *store
    )
    assert (resumed.returncode, resumed.stderr) == (0, "")
    assert FINAL_ANSWER in resumed.stdout

    trace = tmp_path / "r1.jsonl"
    assert helikon("runs", "export", "r1", "-o", str(trace), *store).returncode == 0
    markdown = helikon("trace", str(trace), "-f", "md")
    assert (markdown.returncode, markdown.stdout) == (0, trace_to_markdown(read_trace(trace)))

    assert helikon("runs", "prune", "--older-than", "30d", *store).stdout.startswith(
        "pruned 0 runs"
    )
    assert helikon("runs", "delete", "r1", *store).stdout == "deleted run r1\n"
    gone = helikon("runs", "show", "r1", *store)
    assert (gone.returncode, gone.stdout) == (2, "")
    assert error_line(gone.stderr) == f"helikon: no run 'r1' in the store {db}"


def test_subprocess_resume_asks_on_a_terminal(db: Path) -> None:
    pty = pytest.importorskip("pty")
    store = ("--store", url(db))
    assert helikon("run", PAYMENTS, "--offline", *store, "--run-id", "r1").returncode == 0
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"y\n")
        resume = ["runs", "resume", "r1", "--chart", PAYMENTS, "--offline", *store]
        done = subprocess.run(
            [sys.executable, "-m", "helikon", *resume],
            cwd=ROOT,
            env=environment(),
            stdin=follower,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert (done.returncode, done.stderr) == (0, "")
    assert f"approve transfer({TRANSFER})? [y/N]" in done.stdout
    assert "moved 500.00 EUR" in done.stdout
    assert stored(db).decisions[0][1].approved is True


def stuck_chart(tmp_path: Path, lease: float) -> str:
    path = tmp_path / "stuck.py"
    path.write_text(STUCK_CHART.replace("LEASE", repr(lease)))
    return str(path)


def start_stuck_run(chart: str, db: Path) -> subprocess.Popen[str]:
    """A `helikon run` of the stuck chart, returned once its tool call has started."""
    argv = [sys.executable, "-m", "helikon", "run", chart, "--offline", "--store", url(db)]
    process = subprocess.Popen(
        [*argv, "--run-id", "s1"], cwd=ROOT, env=environment(), stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if db.exists():
            with SqliteRunStore(db) as store:
                if any(call.seq for call in _calls(store)):
                    return process
        time.sleep(0.05)
    process.kill()
    raise AssertionError("the stuck run never started its tool call")


def _calls(store: SqliteRunStore) -> tuple[Any, ...]:
    try:
        return tuple(store.get("s1").calls)
    except Exception:
        return ()


def test_subprocess_recover_resumes_a_run_whose_driver_was_killed(db: Path, tmp_path: Path) -> None:
    chart = stuck_chart(tmp_path, lease=0.5)
    process = start_stuck_run(chart, db)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert stored(db, "s1").info.status == "running"
    time.sleep(0.6)  # the dead owner's lease expires

    done = helikon("runs", "recover", "--chart", chart, "--offline", "--store", url(db))

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("recovering 1 run of stuck\n")
    assert "interrupted" in done.stdout and "recovered" in done.stdout
    assert stored(db, "s1").info.status == "completed"
    again = helikon("runs", "recover", "--chart", chart, "--offline", "--store", url(db))
    assert again.stdout == "nothing to recover: no running run of stuck lost its owner\n"


def test_subprocess_a_run_another_driver_holds_is_refused_unless_forced(
    db: Path, tmp_path: Path
) -> None:
    chart = stuck_chart(tmp_path, lease=60)
    process = start_stuck_run(chart, db)
    try:
        store = ("--store", url(db))
        held = helikon("runs", "resume", "s1", "--chart", chart, "--offline", *store)
        assert (held.returncode, held.stdout) == (2, "")
        line = error_line(held.stderr)
        assert line.startswith("helikon: run 's1' is driven by ")
        assert line.endswith("or with --force if that owner is known dead")
        recover = helikon("runs", "recover", "--chart", chart, "--offline", *store)
        assert recover.stdout == (
            "nothing to recover: no running run of stuck lost its owner "
            "(1 still leased by a live owner)\n"
        )
        delete = helikon("runs", "delete", "s1", *store)
        assert (delete.returncode, delete.stdout) == (2, "")
        assert error_line(delete.stderr).endswith(
            "(its lease): delete it after that, or with --force"
        )
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    forced = helikon("runs", "resume", "s1", "--chart", chart, "--offline", "--force", *store)
    assert (forced.returncode, forced.stderr) == (0, "")
    assert stored(db, "s1").info.status == "completed"
    assert helikon("runs", "delete", "s1", *store).stdout == "deleted run s1\n"


def test_pending_approvals_of_a_temporal_run_say_its_workflow_decides(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run a Temporal workflow owns is decided by the workflow's update, not resumed here
    (its `temporal:` lease refuses `helikon runs resume`)."""
    import argparse

    from helikon import ApprovalRequest, ToolCall
    from helikon.cli.runs.reading import show_pending

    pending = [ApprovalRequest.for_call(ToolCall("t1", "transfer", '{"amount": 5}'))]
    args = argparse.Namespace(run_id="r1", store=None)
    show_pending(pending, args, "temporal:r1")
    temporal = capsys.readouterr().out
    show_pending(pending, args, "host:1:abc")
    local = capsys.readouterr().out
    assert "decide update (helikon.temporal.decide)" in temporal
    assert "helikon runs resume" not in temporal
    assert "helikon runs resume r1 --chart CHART" in local


@pytest.mark.parametrize("command", [["list"], ["show", "nope"], ["prune", "--older-than", "1d"]])
def test_every_runs_command_closes_the_store_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    import helikon.cli.store as cli_store

    opened: list[SqliteRunStore] = []

    def spying(url: str) -> SqliteRunStore:
        store = SqliteRunStore(tmp_path / "runs.db")
        opened.append(store)
        return store

    monkeypatch.setattr(cli_store, "open_store", spying)
    main(["runs", *command, "--store", "sqlite:///ignored.db"])
    (store,) = opened
    with pytest.raises(Exception, match="closed"):
        store.runs()  # a closed store's connection refuses
