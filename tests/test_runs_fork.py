"""Forking a stored run (`fork_stored`, `helikon runs fork`): the fork shares the prefix,
records its parent and fork point, and never repeats a side effect the original made
before the fork point; an edit replaces the input the next step applied.

The runs are the teller's (`store_drivers.teller`), whose `transfer` tool appends a line to
a log each time it runs: the log counts the side effects. Every test runs on SQLite and on
a real PostgreSQL (`store`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from store_drivers import resume_approved, teller
from store_support import KEY, Backend
from test_durable_as_trace import tool_agent

from helikon.cli import main
from helikon.cli.loading import load_module
from helikon.core.items import AssistantMessage, ToolResult, Usage
from helikon.core.state import EffectResult, ModelResponse, ToolResults
from helikon.debug.debugger import DebuggerError
from helikon.debug.fork import decisions, text_answer, tool_answer
from helikon.debug.stored_fork import fork_stored
from helikon.durable import RunLeased, RunStore, open_store, stored_trace
from helikon.models.scripted import ScriptedModel
from helikon.run.journal import copier_gone

ONCE = "transfer 10 to ann\n"


async def finished_run(store: RunStore, log: Path) -> None:
    """r1: asks to transfer, is approved, transfers (one log line), says "Sent."."""
    result = await teller(log).run("pay ann 10", store=store, run_id="r1").collect()
    assert result.suspended
    assert await resume_approved(store, "r1", log) == "completed"
    assert log.read_text() == ONCE
    assert [r.next_action.kind for r in store.get("r1").records] == [
        "call_model",
        "await_approval",
        "execute_tools",
        "call_model",
        "terminate",
    ]


async def resumed(store: RunStore, run_id: str, log: Path) -> str:
    result = await teller(log).resume(run_id, store=store).collect()
    return str(result.final_output)


async def test_a_fork_shares_the_prefix_and_runs_no_tool_before_its_fork_point(
    store: RunStore, tmp_path: Path
) -> None:
    at = 4
    log = tmp_path / "transfers.log"
    await finished_run(store, log)
    fork = await fork_stored(store, "r1", at, fork_id="f1")
    stored = store.get("f1")
    original = store.get("r1")
    assert (stored.header.forked_from, stored.header.forked_at) == ("r1", at)
    assert (stored.info.forked_from, stored.info.forked_at, stored.info.status) == (
        "r1",
        at,
        "suspended",
    )
    assert fork == "f1" and stored.records == original.records[:at]
    assert [info.run_id for info in store.runs()].count("f1") == 1

    assert await resumed(store, "f1", log) == "Sent."
    assert log.read_text() == ONCE, "a tool before the fork point ran again"
    assert store.get("f1").info.status == "completed"
    assert store.get("r1").records == original.records  # the original is left as it was


async def test_a_fork_amid_an_approved_batch_resumes_without_asking_again(
    store: RunStore, tmp_path: Path
) -> None:
    # After seq 3 the approved transfer runs: the decision is the input of seq 3, which the
    # fork shares, so the resumed fork goes on without asking, and the transfer, finished
    # at the fork point, keeps its result and does not run again.
    log = tmp_path / "transfers.log"
    await finished_run(store, log)
    await fork_stored(store, "r1", 3, fork_id="f1")
    await resumed(store, "f1", log)
    assert store.get("f1").info.status == "completed"
    assert log.read_text() == ONCE


async def test_an_edited_answer_is_the_forks_next_step(store: RunStore, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    await finished_run(store, log)
    answer = ModelResponse((AssistantMessage("Not sent after all.", "teller"),), Usage(requests=1))
    await fork_stored(store, "r1", 4, edit=answer, agent=teller(log), fork_id="f1")
    stored = store.get("f1")
    assert [r.seq for r in stored.records] == [1, 2, 3, 4, 5]
    assert stored.records[:4] == store.get("r1").records[:4]
    assert stored.records[4].input == answer
    assert (stored.info.phase, stored.info.status) == ("Done", "completed")
    trace = stored_trace(store, "f1")  # the fork reads back as a trace, as any stored run
    assert trace.transitions("f1")[-1].appends[-1].content == "Not sent after all."
    assert log.read_text() == ONCE


async def test_an_edited_tool_result_is_given_and_the_tool_not_run(
    store: RunStore, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    await finished_run(store, log)
    await fork_stored(
        store,
        "r1",
        3,
        edit=lambda at: tool_answer(at, ["t1", "the bank refused"]),
        agent=teller(log),
        fork_id="f1",
    )
    fourth = store.get("f1").records[3]
    assert fourth.input == ToolResults((ToolResult("t1", "the bank refused"),))
    assert await resumed(store, "f1", log) == "Sent."
    assert log.read_text() == ONCE


async def test_the_runs_nested_in_the_prefix_are_copied_with_it(store: RunStore) -> None:
    await tool_agent().run("go", store=store, run_id="r1").collect()
    assert {info.run_id for info in store.runs(include_nested=True)} == {"r1", "r1/2:c2"}
    await fork_stored(store, "r1", 3, fork_id="f1")
    child = store.get("f1/2:c2")
    assert child.header.parent_run_id == "f1" and child.info.status == "completed"
    assert child.records == store.get("r1/2:c2").records
    assert set(stored_trace(store, "f1").runs) == {"f1/2:c2"}
    result = await tool_agent().resume("f1", store=store).collect()
    assert result.final_output == "all done"


async def test_forks_that_cannot_be_made_are_refused(store: RunStore, tmp_path: Path) -> None:
    log = tmp_path / "transfers.log"
    await finished_run(store, log)
    cases = [
        (dict(at=9), "its seqs are 1..5"),
        (dict(at=5), "ended at seq 5"),
        (dict(at=3, edit=ModelResponse(())), "give the run's agent"),
        (
            dict(at=3, edit=lambda at: text_answer(at, "hi"), agent=teller(log)),
            "waits for tool results",
        ),
    ]
    for options, message in cases:
        with pytest.raises(DebuggerError, match=message):
            await fork_stored(store, "r1", **options)  # type: ignore[arg-type]
    assert [info.run_id for info in store.runs()] == ["r1"]
    assert log.read_text() == ONCE


def test_the_command_forks_and_resume_continues_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    log = tmp_path / "transfers.log"
    store = open_store(url)
    try:
        asyncio.run(finished_run(store, log))
    finally:
        store.close()
    assert main(["runs", "fork", "r1", "--at", "4", "--store", url]) == 0
    out = capsys.readouterr().out
    assert out.startswith("run r1-fork4-") and "forked from r1 at seq 4" in out
    assert main(["runs", "fork", "r1", "--at", "4", "--edit", "text", "hi", "--store", url]) == 2
    assert "give --chart CHART" in capsys.readouterr().err
    assert main(["runs", "fork", "r1", "--at", "7", "--store", url]) == 2
    assert "its seqs are 1..5" in capsys.readouterr().err


def test_the_command_forks_with_an_edited_effect_result(
    backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load_module("charts/retrieve_answer.py")
    store = backend.open(None)
    asyncio.run(
        module.agent(ScriptedModel(module.script()))
        .run(module.EXAMPLE_INPUT, store=store, run_id="r1")
        .collect()
    )
    fork = ["runs", "fork", "r1", "--at", "1", "--chart", "charts/retrieve_answer.py"]
    assert main([*fork, "--edit", "effect", "{no", "--store", backend.url]) == 2
    assert "an effect's result is a JSON value; got '{no'" in capsys.readouterr().err
    assert main([*fork, "--edit", "text", "hi", "--store", backend.url]) == 2
    assert "waits for an effect's result (`fork effect`)" in capsys.readouterr().err
    assert main([*fork, "--edit", "effect", '{"passages": []}', "--store", backend.url]) == 0
    fork_id = capsys.readouterr().out.split()[1]
    edited = store.get(fork_id).records[1]
    assert (edited.seq, edited.input) == (2, EffectResult("retrieve", {"passages": []}))
    resumed = module.agent(ScriptedModel(["Nothing on that."])).resume(fork_id, store=store)
    assert asyncio.run(resumed.collect()).final_output == "Nothing on that."


async def test_an_edited_decision_rejects_the_call_and_the_fork_goes_on(
    store: RunStore, tmp_path: Path
) -> None:
    log = tmp_path / "transfers.log"
    await finished_run(store, log)
    reject = lambda at: decisions(at, approve=False, named=[])  # noqa: E731
    await fork_stored(store, "r1", 2, edit=reject, agent=teller(log), fork_id="f1")
    third = store.get("f1").records[2]
    assert [d.approved for d in third.input.decisions] == [False]  # type: ignore[union-attr]
    assert await resumed(store, "f1", log) == "Sent."
    assert log.read_text() == ONCE  # rejected: the transfer did not run in the fork


class Crash(BaseException):
    """The forking process dies here: nothing more is written, nothing released."""


async def test_a_fork_cut_short_is_never_resumed_and_can_be_deleted(
    store: RunStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A crash amid the copy leaves a fork holding part of the prefix: resuming it would
    perform effects the original performed. Its lease is the copy's, which never expires:
    it is refused, even with force=True, until it is deleted and forked again."""
    log = tmp_path / "transfers.log"
    await finished_run(store, log)
    append, appended = store.append, []

    async def crashing(*args: object, **kwargs: object) -> object:
        if appended:
            raise Crash
        appended.append(args)
        return await append(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "append", crashing)
    with pytest.raises(Crash):
        await fork_stored(store, "r1", 4, fork_id="f1")
    monkeypatch.undo()
    cut = store.get("f1")
    assert len(cut.records) == 2 and cut.info.status == "running"
    assert cut.info.lease_owner is not None and cut.info.lease_owner.startswith("fork:")
    assert (cut.info.lease_expires_at or 0) > cut.info.updated_at + 365 * 24 * 3600
    for force in (False, True):
        with pytest.raises(RunLeased, match="a fork whose copy has not finished") as refused:
            teller(log).resume("f1", store=store, force=force)
        assert "is not known to be gone" in str(refused.value)  # it is this process
        assert "helikon runs delete f1 --force) and fork again" in str(refused.value)
    assert store.get("f1").records == cut.records  # the refusal wrote nothing

    monkeypatch.setenv("HELIKON_STORE_KEY", KEY.decode())
    assert main(["runs", "delete", "f1", "--store", store.url]) == 2
    assert "still being copied by process" in capsys.readouterr().err
    assert main(["runs", "delete", "f1", "--force", "--store", store.url]) == 0
    await fork_stored(store, "r1", 4, fork_id="f1")
    assert store.get("f1").info.lease_owner is None
    assert await resumed(store, "f1", log) == "Sent."
    assert log.read_text() == ONCE, "a tool before the fork point ran again"


FORK_THEN_DIE = """
import asyncio, os, signal, sys
from helikon.debug.stored_fork import fork_stored
from helikon.durable import open_store

store = open_store(sys.argv[1])
append = store.append


async def dying(*args, **kwargs):
    await append(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)  # the copy's first append is its last


store.append = dying
asyncio.run(fork_stored(store, "r1", 4, fork_id="f1"))
"""


async def test_a_fork_whose_copying_process_died_is_deleted_as_its_refusal_says(
    backend: Backend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The copy's lease never expires, but it names the copying process (host and pid):
    once that process is gone, the refusal to resume names `runs delete`, and it works."""
    monkeypatch.setenv("HELIKON_STORE_KEY", KEY.decode())  # the processes share the key
    log = tmp_path / "transfers.log"
    await finished_run(backend.open(), log)
    forking = [sys.executable, "-c", FORK_THEN_DIE, backend.url]
    died = subprocess.run(forking, capture_output=True, text=True, timeout=120)
    assert died.returncode == -signal.SIGKILL, died.stderr
    store = backend.open()
    assert len(store.get("f1").records) == 2

    with pytest.raises(RunLeased) as refused:
        teller(log).resume("f1", store=store, force=True)
    message = str(refused.value)
    assert message.endswith("is gone: delete it (helikon runs delete f1) and fork again")
    assert "force" not in message and "never resumed" in message
    chart = str(Path(__file__).resolve().parent.parent / "charts" / "approval_gated.py")
    argv = ["runs", "resume", "f1", "--chart", chart, "--offline", "--store", backend.url]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"helikon: {message}\n"  # the same one thing
    assert main(["runs", "delete", "f1", "--store", backend.url]) == 0
    assert capsys.readouterr().out == "deleted run f1\n"
    await fork_stored(store, "r1", 4, fork_id="f1")
    assert await resumed(store, "f1", log) == "Sent."
    assert log.read_text() == ONCE


@pytest.mark.parametrize(
    "owner",
    [
        None,
        "host:1:ab",  # a driver's lease, not a copy's
        f"fork:{socket.gethostname()}:{os.getpid()}:ab",  # this process: alive
        f"fork:elsewhere-{socket.gethostname()}:999999:ab",  # another host: never known
        f"fork:{socket.gethostname()}:0:ab",  # 0 names a process group
        f"fork:{socket.gethostname()}:-1:ab",
        f"fork:{socket.gethostname()}:\u00b2:ab",  # a digit int() refuses
        f"fork:{socket.gethostname()}:{10**30}:ab",
        f"fork:{socket.gethostname()}",
    ],
)
def test_a_copier_is_gone_only_when_its_pid_on_this_host_is(owner: str | None) -> None:
    assert copier_gone(owner) is False
