"""The studio on a run store: the runs to pick from, and a replay of each that follows the
run while it goes on (`helikon studio --store URL [RUN_ID]`).

Theory of operation: a stored run is replayed as its trace would be (`stored_trace`), so
nothing the store names is imported; with an agent (`--chart CHART`) each step is computed
again and checked. A replay session of a run that has not ended looks at the store every
`FOLLOW_INTERVAL` seconds (`StoredSource.newer`); when the run or a run nested in it has
moved on, the debugger takes the newer recording (`Debugger.extend`) and a page at the end
of the run steps on with it. Each browser session's replay (`ThreadedDebugger.copy`) reads the run
as the store holds it when the session opens, not as it was when the studio did. A
suspended run's pending calls are the store's (`store.pending`), and with `--chart` a
decision on them resumes the run in the studio (`helikon.studio.resumes`), which the page
then follows. Store rows are hostile: a run that does not check out is refused with the
store's message, and what the page shows of a run is data, never markup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from helikon.core.approvals import ApprovalRequest
from helikon.core.quoting import quoted
from helikon.debug.debugger import Debugger, DebuggerError
from helikon.debug.stored_fork import fork_stored
from helikon.durable import RunStore, StoreError, stored_trace
from helikon.durable.records import RunInfo
from helikon.run.config import RunContext
from helikon.run.spec import AgentSpec
from helikon.studio.resumes import AgentFor as ResumeWith
from helikon.studio.resumes import Resumes
from helikon.studio.session import StudioError, StudioNotFound, ThreadedDebugger, edit_for
from helikon.trace import Trace, TraceError

AgentFor = Callable[[], tuple[AgentSpec, RunContext[Any] | None]]
"""Builds the agent (and its context) to compute a replay's steps again: `--chart CHART`."""

GOING = ("running", "suspended")


class StoredSource:
    """One stored run's recording, read again when the run (or a run nested in it) moved;
    its pending calls, and decisions on them (through `resumes`)."""

    def __init__(self, store: RunStore, run_id: str, resumes: Resumes) -> None:
        self.store = store
        self.run_id = run_id
        self.resumes = resumes
        self.status = "running"
        self.pending: tuple[ApprovalRequest, ...] = ()
        self._mark: tuple[Any, ...] | None = None

    @property
    def ended(self) -> bool:
        return self.status not in GOING

    @property
    def refusal(self) -> str | None:
        return self.resumes.refusal

    def again(self) -> StoredSource:
        """Another source of the run, which shows what this one read until it reads anew."""
        other = StoredSource(self.store, self.run_id, self.resumes)
        other.status, other.pending = self.status, self.pending
        return other

    def newer(self) -> Trace | None:
        """The run's trace if it changed since the last call (the first call: always).

        Raises:
            StoreError, TraceError: the run is gone or does not check out.
        """
        mine = [
            info
            for info in self.store.runs(include_nested=True)
            if info.run_id == self.run_id or info.run_id.startswith(self.run_id + "/")
        ]
        mark = tuple(sorted((i.run_id, i.seq, i.status, i.updated_at) for i in mine))
        if mark == self._mark:
            return None
        trace = stored_trace(self.store, self.run_id)
        status = next((i.status for i in mine if i.run_id == self.run_id), "running")
        self.pending = self.store.pending(self.run_id) if status == "suspended" else ()
        self._mark, self.status = mark, status
        return trace

    def decide(self, decisions: list[dict[str, Any]]) -> None:
        """Resume the run with `decisions` (see `Resumes.decide`); until the store shows
        it going on, it waits for nothing."""
        self.resumes.decide(self.run_id, decisions)
        self.pending, self.status = (), "running"


def run_data(info: RunInfo) -> dict[str, Any]:
    """One run of the list the page picks from."""
    return {
        "run_id": info.run_id,
        "agent": info.agent,
        "phase": info.phase,
        "status": info.status,
        "turns": info.turns,
        "seq": info.seq,
        "updated_at": info.updated_at,
        "forked_from": info.forked_from,
        "forked_at": info.forked_at,
    }


class StoredRuns:
    """The runs of one store, each opened as a replay `ThreadedDebugger` (see the module docstring).

    Args:
        store: the store; closed by `close`.
        agent_for: the agent to compute steps again with (None: the steps as recorded).
        resume_with: the agent to resume a suspended run with once its calls are decided,
            on the model it is to call (None: decisions are refused, naming `--chart`).
    """

    def __init__(
        self,
        store: RunStore,
        agent_for: AgentFor | None = None,
        resume_with: ResumeWith | None = None,
    ) -> None:
        self.store = store
        self.agent_for = agent_for
        self.resumes = Resumes(store, resume_with)

    def listing(self) -> list[dict[str, Any]]:
        """The store's top-level runs, newest first."""
        try:
            return [run_data(info) for info in self.store.runs()]
        except StoreError as exc:
            raise StudioError(f"cannot list the store's runs: {exc}") from None

    def newest(self) -> str:
        """The run the studio opens when none is named: the store's newest.

        Raises:
            StudioError: the store holds no run.
        """
        runs = self.listing()
        if not runs:
            raise StudioError(f"the store {self.store.url} holds no run to open")
        return str(runs[0]["run_id"])

    def session(self, run_id: object) -> ThreadedDebugger:
        """A replay of the stored run `run_id` that follows it while it goes on.

        Raises:
            StudioNotFound: no such top-level run.
            StudioError: `run_id` is no string; the run does not check out, or was recorded
                on another agent.
        """
        if not isinstance(run_id, str):
            raise StudioError(
                f"run_id is the id of a run in the store (a string), not {quoted(run_id)}"
            )
        if run_id not in {r["run_id"] for r in self.listing()}:
            raise StudioNotFound(
                f"no run {quoted(run_id)} in the store (nested runs open in theirs)"
            )
        source = StoredSource(self.store, run_id, self.resumes)

        def fresh() -> Debugger:  # another browser's replay: of the run as stored then
            return self._replay(run_id, lambda: stored_trace(self.store, run_id))

        return ThreadedDebugger(
            self._replay(run_id, source.newer), mode="replay", fresh=fresh, source=source
        )

    def _replay(self, run_id: str, read: Callable[[], Trace | None]) -> Debugger:
        """A replay of the run `read` reads from the store.

        Raises:
            StudioError: the run does not check out, or was recorded on another agent.
        """
        try:
            trace = read()
            assert trace is not None  # a source's first read is never None
        except (StoreError, TraceError) as exc:
            raise StudioError(f"cannot open the run: {exc}") from None
        try:
            if self.agent_for is None:
                return Debugger.replay(trace)
            agent, context = self.agent_for()
            return Debugger.replay(trace, agent, context=context)
        except DebuggerError as exc:
            raise StudioError(f"cannot replay the run: {exc}") from None

    def fork(self, run_id: str, at: int, kind: str, value: Any) -> str:
        """Fork stored run `run_id` after seq `at` into a new stored run, the input the
        next step applied replaced as `kind` and `value` say (`ThreadedDebugger.fork`): what
        `helikon runs fork --edit` does. Returns the fork's run id; it waits, suspended,
        for `helikon runs resume`.

        Raises:
            StudioError: no chart to compute the edited step on, or the fork is refused.
        """
        if self.agent_for is None:
            raise StudioError(
                "a fork into the store computes its next step: start the studio with --chart CHART"
            )
        agent, context = self.agent_for()
        made = fork_stored(
            self.store,
            run_id,
            at,
            edit=lambda debugger: edit_for(debugger, kind, value),
            agent=agent,
            context=context,
        )
        try:
            return asyncio.run(made)  # on this request's thread: the store is thread-safe
        except (DebuggerError, StoreError, TraceError) as exc:
            raise StudioError(f"cannot fork the run: {exc}") from None

    def close(self) -> None:
        """Cancel the runs resumed here that still go on, then close the store."""
        self.resumes.close()
        self.store.close()
