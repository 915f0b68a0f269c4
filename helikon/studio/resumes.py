"""Approving or rejecting a stored suspended run from the studio: the run goes on, with the
agent of `--chart CHART`, while the page follows its records.

Theory of operation: a decision goes through `agent.resume(run_id, decisions, store=store)`,
so it binds as any resume's does (run id, suspension seq, call id, arguments hash; spent
once, across processes). Each resumed run is driven on a thread of its own, with its own
event loop, and belongs to the studio, not to a browser session: closing a page does not
stop it. The request that decided waits until the run has claimed its lease and spent the
decisions (`Run.open_journal`), so what refuses a decision (another owner holds the lease,
`RunLeased`; the decision was spent, `DecisionSpent`; a call that is not pending or other
arguments, `ApprovalMismatch`) answers that request, before anything runs. Then the run
streams on in the background to its end or its next suspension, and every page on it
follows its records as it follows any stored run still going. While a run is going on from
a decision of this studio, another decision for it is refused. Closing the studio cancels
the runs still going: each ends `Failed(Cancelled)`, in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from helikon.core.approvals import ApprovalDecision
from helikon.core.quoting import cut, quoted
from helikon.durable import RunLeased, RunStore, StoreError
from helikon.run.agent import Agent
from helikon.run.config import RunContext
from helikon.run.results import RunResultStreaming
from helikon.run.snapshot import ApprovalMismatch, SnapshotMismatch
from helikon.run.spec import AgentSpec
from helikon.studio.session import StudioConflict, StudioError, StudioFailure

AgentFor = Callable[[], tuple[Agent, RunContext[Any] | None]]
"""Builds the agent (and its context) of the chart given on the command line, on the model
it is to call."""

REASONS = {True: "approved in helikon studio", False: "rejected in helikon studio"}
CLOSE_TIMEOUT = 5.0  # seconds to wait for a cancelled run to write its end
NO_CHART = (
    "deciding resumes the stored run with its agent: start the studio with --chart CHART "
    "(or use helikon runs resume RUN_ID --chart CHART)"
)

log = logging.getLogger(__name__)


@dataclass
class Going:
    """A run resumed by this studio: its thread, and the loop its run steps on."""

    thread: threading.Thread
    loop: asyncio.AbstractEventLoop
    stream: RunResultStreaming


class Resumes:
    """The stored runs this studio resumed with decisions; see the module docstring.

    Args:
        store: the store the runs are in (not closed here).
        agent_for: the agent to resume with, its model called and its tools run (None:
            every decision is refused, naming `--chart`).
    """

    def __init__(self, store: RunStore, agent_for: AgentFor | None) -> None:
        self.store = store
        self.agent_for = agent_for
        self._going: dict[str, Going] = {}
        self._lock = threading.Lock()

    @property
    def refusal(self) -> str | None:
        """Why no decision can be taken here (None: they can)."""
        return NO_CHART if self.agent_for is None else None

    def decide(self, run_id: str, given: Sequence[Mapping[str, Any]]) -> None:
        """Resume stored run `run_id` with the decisions `given` (each `{"call_id",
        "arguments_hash", "approved", "seq"}`, checked by the caller); returns once the
        run holds its lease and has spent them, and goes on in the background.

        Raises:
            StudioError: no chart, or a decision that does not bind (the resume's message).
            StudioConflict: the run waits for no decision now, goes on already from one of
                this studio, or another owner holds its lease.
            StudioFailure: building the agent raised.
        """
        if self.agent_for is None:
            raise StudioError(NO_CHART)
        with self._lock:  # one decision at a time: a second one sees the first's run going
            going = self._going.get(run_id)
            if going is not None and going.thread.is_alive():
                raise StudioConflict(
                    f"run {quoted(run_id)} is going on from a decision taken in this studio: "
                    "this one was not taken (a decision is spent once)"
                )
            self._check_waiting(run_id)
            decisions = [
                ApprovalDecision(
                    d["call_id"],
                    d["arguments_hash"],
                    d["approved"],
                    REASONS[d["approved"]],
                    run_id,
                    d["seq"],
                )
                for d in given
            ]
            try:  # the chart module's code: what it raises is its own failure
                agent, context = self.agent_for()
            except Exception as exc:
                raise StudioFailure(
                    f"cannot build the agent to resume run {quoted(run_id)}: {cut(str(exc))}"
                ) from exc
            try:
                stream = agent.resume(run_id, decisions, store=self.store, context=context)
            except (ApprovalMismatch, SnapshotMismatch, StoreError) as exc:
                raise StudioError(f"cannot resume the run: {exc}") from None
            self._going[run_id] = self._start(run_id, stream)

    def _check_waiting(self, run_id: str) -> None:
        try:
            waiting = self.store.pending(run_id)
        except StoreError as exc:
            raise StudioError(f"cannot read the run: {exc}") from None
        if not waiting:
            raise StudioConflict(
                f"run {quoted(run_id)} waits for no approval now: nothing was decided "
                "(a decision is spent once)"
            )

    def _start(self, run_id: str, stream: RunResultStreaming) -> Going:
        opened: Future[asyncio.AbstractEventLoop] = Future()
        thread = threading.Thread(
            target=lambda: asyncio.run(self._drive(run_id, stream, opened)),
            name=f"helikon-studio-resume-{run_id}",
            daemon=True,
        )
        thread.start()
        try:
            loop = opened.result()
        except RunLeased as exc:
            thread.join()
            raise StudioConflict(
                f"run {quoted(run_id)} is driven by {cut(exc.owner)} (it holds the run's lease): "
                "nothing was decided; decide once it lets go, or with helikon runs resume "
                "--force if that owner is known dead"
            ) from None
        except (StoreError, SnapshotMismatch) as exc:
            thread.join()
            raise StudioConflict(f"cannot resume the run: {exc}") from None
        return Going(thread, loop, stream)

    async def _drive(
        self, run_id: str, stream: RunResultStreaming, opened: Future[asyncio.AbstractEventLoop]
    ) -> None:
        run = stream.run
        assert run is not None  # agent.resume streams a Run
        try:
            await run.open_journal()  # the lease claimed, the decisions spent: or refused
        except Exception as exc:
            run.close()
            opened.set_exception(exc)
            await _close_model(run.agent)
            return
        opened.set_result(asyncio.get_running_loop())
        try:
            async for _ in stream:
                pass
        except Exception:  # the store failed under the run: what it wrote stays
            log.exception("helikon studio: resumed run %r stopped", run_id)
        finally:
            await _close_model(run.agent)

    def close(self) -> None:
        """Cancel the runs still going and wait for them to write their end."""
        with self._lock:
            going = list(self._going.values())
        for each in going:
            run = each.stream.run
            if run is not None and each.thread.is_alive():
                with contextlib.suppress(RuntimeError):  # it ended meanwhile: its loop closed
                    each.loop.call_soon_threadsafe(run.cancel, "helikon studio stopped")
        for each in going:
            each.thread.join(CLOSE_TIMEOUT)


async def _close_model(agent: AgentSpec) -> None:
    """Close a real model's HTTP clients (a scripted model has none)."""
    close = getattr(agent.model, "aclose", None)
    if close is not None:
        await close()
