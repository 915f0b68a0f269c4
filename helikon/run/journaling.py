"""The run's store: a run with `store=` writes each step to its journal before the effect it
asks for starts. `Journaled` holds that side of `Run` (helikon.run.driver is one).

Theory of operation: the first step opens the journal (`open_journal`): a new run is created
in the store (its header, `_header`, written with its first record, once its tool sources
have listed); a resumed one (RESUMING, `helikon.run.stored.Claim`) claims its lease, checks
that no other driver moved it on since it was read, and spends the decisions it resumes
with. Each step applied is then kept (`_keep`): the session first, once the run ended
(`_remember`), then the record (`_commit`). A store that refuses a write, or loses the
lease (`_lease_lost`), fails the run where it is and writes nothing more (`_store_stopped`);
the store keeps it at its last committed step, to resume. A run that ended or suspended
tells its listeners, then closes its journal (`_settle`). The journal is one of the run's
listeners (`helikon.run.listening`): the record it commits and the events it keeps come
through that port, redacted there when the run redacts. What a record holds, leases and
the lease's keep-alive are `helikon.run.journal`'s; the checks of a stored run before it
resumes, `helikon.run.stored`'s.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from helikon.core.context import TransitionCtx
from helikon.core.errors import StoreFailed
from helikon.core.events import AgentEvent, RunFailed
from helikon.core.items import Usage
from helikon.core.state import Cancel, Fail, Failed, NextAction, TransitionOutcome
from helikon.core.tool_spec import ListedTool, ToolSpec
from helikon.core.transition import Match
from helikon.durable.records import RunHeader, StoreError
from helikon.durable.store import RunStore
from helikon.durable.views import Session
from helikon.run.config import RunConfig
from helikon.run.conversation import Conversation
from helikon.run.effects import store_failed
from helikon.run.journal import Journal, chart_of, owner_id, status_of, toolset_digest
from helikon.run.lifecycle import Lifecycle
from helikon.run.listening import Listeners
from helikon.run.loop import first_calls
from helikon.run.redaction import redacted
from helikon.run.snapshot import SnapshotMismatch
from helikon.run.spec import AgentSpec
from helikon.run.stored import Claim, moved_on
from helikon.trace import TransitionRecord
from helikon.trace.times import Times

__all__ = ["Journaled"]


class Journaled:
    """The run's store side (see the module docstring); `Run` provides the rest."""

    run_id: str
    agent: AgentSpec
    config: RunConfig
    ctx: TransitionCtx
    state: Any
    conversation: Conversation
    seq: int
    next_action: NextAction | None
    model_calls: int
    store: RunStore | None
    journal: Journal | None
    parent_run_id: str | None
    session: Session | None
    session_items: int
    listed_tools: tuple[ListedTool, ...]
    listeners: Listeners | None
    times: Times  # the last step's (`Run.times`)
    _lifecycle: Lifecycle
    _claim: Claim | None

    if TYPE_CHECKING:

        @property
        def finished(self) -> bool: ...
        @property
        def usage(self) -> Usage: ...
        @property
        def suspended(self) -> bool: ...
        @property
        def tool_specs(self) -> tuple[ToolSpec, ...]: ...
        def _move(self, to: Lifecycle) -> None: ...
        def halt(self, stop: Cancel | Fail) -> None: ...
        def _refused(self, exc: StoreError) -> StoreFailed: ...
        def exported(self, value: Any) -> Any: ...

    async def open_journal(self) -> None:
        """Create the run in its store, or claim a stored run's lease and spend the
        decisions it resumes with.

        Raises:
            StoreError: `RunExists`, `RunLeased`, `DecisionSpent`, or the store failed.
        """
        assert self.store is not None
        store, ttl = self.store, self.config.lease_seconds
        if self._claim is not None:
            stored, force, decisions = self._claim.stored, self._claim.force, self._claim.decisions
            lease = await store.claim(self.run_id, owner_id(), ttl, force=force)
            now = await store.load(self.run_id)
            moved = moved_on(stored, now)  # by another driver, after this one read it
            if moved is not None:
                await store.release(self.run_id, lease, now.info.status)
                raise SnapshotMismatch(
                    f"run {self.run_id!r} {moved} after it was read at step "
                    f"{stored.info.seq}: resume it again to continue where it is"
                )
            self.journal = Journal.resumed(store, now, lease, ttl=ttl)
            if decisions:
                await self.journal.decide(self.seq, self.exported(decisions))
            self._claim = None
            self._move(Lifecycle.RUNNING if self.model_calls > 0 else Lifecycle.PREPARED)
        else:
            _, chart = chart_of(self.ctx.table)
            self.journal = Journal.new(store, self.run_id, self._header, chart, ttl=ttl)
        self.journal.keep_alive(self._lease_lost)

    def _header(self) -> RunHeader:
        """The run's identity as its store keeps it (asked for at its first record, once
        its tool sources have listed)."""
        table = self.ctx.table
        return RunHeader(
            self.run_id,
            self.agent.name,
            table.name,
            chart_of(table)[0],
            toolset_digest(self.tool_specs),
            self.parent_run_id,
            self.session.session_id if self.session is not None else None,
            session_items=self.session_items,
            tools=self.listed_tools,
        )

    def _lease_lost(self, error: Exception) -> None:
        if isinstance(error, StoreError):
            self.halt(Fail(store_failed(error)))

    async def _keep(
        self, kept: TransitionRecord | None, outcome: TransitionOutcome
    ) -> tuple[AgentEvent, ...]:
        """Write the step just applied: the session once the run ended, then the record
        (`kept`, as the listeners' port gave it to the journal: redacted when the run
        redacts; `outcome` is the step's own)."""
        try:
            if self.session is not None and self.finished:  # no coroutine on other steps
                await self._remember()
        except StoreError as exc:  # before its last record: the run stays where it was
            return self._store_stopped(exc)
        if kept is not None and kept.match is not None and self.journal is not None:
            return await self._commit(kept, kept.match, outcome)
        return outcome.events

    async def _remember(self) -> None:
        """Add what the run said to its session, once it ended: before its last record is
        committed and its terminal event streamed, so a session that cannot be written
        fails the run instead of following its end."""
        assert self.session is not None
        items = self.conversation.items()[self.session_items :]
        # A session is kept in the store: redacted too, here (a write, not a report of the
        # listeners' port, helikon.run.listening).
        redact = self.config.redact
        await self.session.aadd([redacted(item, redact) for item in items], self.run_id)

    async def _commit(
        self, kept: TransitionRecord, match: Match, outcome: TransitionOutcome
    ) -> tuple[AgentEvent, ...]:
        """Commit the step just applied; when the store refuses, the run stops here. The
        calls it starts are its own (`outcome`'s): their rows hash the arguments as given."""
        assert self.journal is not None
        starts = first_calls(outcome.next_action, self.config.parallel_tool_call_limit)
        try:
            await self.journal.step(
                kept.seq, kept.input, match, kept.outcome, self.suspended, starts, self.times
            )
        except StoreError as exc:
            return self._store_stopped(exc)
        return outcome.events

    def _store_stopped(self, exc: StoreError) -> tuple[AgentEvent, ...]:
        """The run fails where its store failed, and writes nothing more."""
        error = self._refused(exc)
        self.state = Failed(error, self.usage)
        self.next_action = None
        return (RunFailed(error),)

    async def _settle(self) -> None:
        """When the run ended or suspended: close its journal."""
        if self._lifecycle is Lifecycle.SUSPENDING:
            self._move(Lifecycle.SUSPENDED)
        elif self.finished and not self._lifecycle.closed:
            self._move(Lifecycle.ENDED)
        else:
            return
        if self.listeners is not None:  # the journal is closed after them (listening)
            self.listeners.ended(self)
        if self.journal is not None:
            # The stream's end is decided; if the store fails now, the lease just expires.
            with contextlib.suppress(StoreError):
                await self.journal.close(status_of(self.state.phase, self.suspended))
