"""`ThreadedDebugger`: one debugger on its own event loop thread, driven from the HTTP
threads.

Theory of operation: the debugger is touched only on its loop, a background thread
(`helikon.studio.bridge.LoopThread`). Each command (step, continue, back, break, ...) checks
its request on the calling thread (`helikon.studio.checks`), then runs as a coroutine on that
loop while the calling thread waits for its result, a fresh snapshot. What the session is
doing is one `Activity` (`helikon.studio.activity`, where the table of its changes is): one
command that runs the model or tools (`step`, `continue`) may be in flight at a time;
another such command, or a rewind, is refused as busy (the server answers 409), while
breakpoints can be set and deleted, and a continue paused, during one. Every change
publishes a snapshot to `Updates`, which the event stream hands to the page; during a
continue a watcher on the same loop publishes after each finished step, so the page
follows the run as it goes.

Pausing sets a breakpoint that always holds (`Debugger.break_when`): `continue_` stops after
the step in flight, and the studio removes the breakpoint and reports the stop as "paused".

A session given `fresh` (a replay: `Debugger.replay` again) can be copied, so each browser
session gets a replay of its own (`helikon.studio.browsers`); a live run cannot, since its
steps call the model and run tools: browser sessions share it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.quoting import cut
from helikon.debug.debugger import BreakKind, Breakpoint, Debugger, DebuggerError, Stop
from helikon.studio.activity import Activity, Change, next_activity
from helikon.studio.bridge import LoopThread, Updates
from helikon.studio.checks import (
    REPLAY_DECIDES_NOT,
    check_breadcrumb,
    check_break,
    check_decisions,
    check_edit,
    check_rewind,
    check_run_id,
    check_steps,
    check_then,
    edit_for,
)
from helikon.studio.errors import (
    StudioBusy,
    StudioConflict,
    StudioError,
    StudioFailure,
    StudioNotFound,
)
from helikon.studio.forks import comparison, fork_rows
from helikon.studio.view import breakpoint_data, chart_facts, snapshot, stop_data
from helikon.trace import Trace

__all__ = [  # the errors, `check_edit` and `edit_for` are imported from here too
    "Source",
    "StudioBusy",
    "StudioConflict",
    "StudioError",
    "StudioFailure",
    "StudioNotFound",
    "ThreadedDebugger",
    "check_edit",
    "edit_for",
]

Mode = Literal["live", "replay"]

WATCH_INTERVAL = 0.05  # seconds between looks at a continuing run's progress
FOLLOW_INTERVAL = 0.25  # seconds between looks at a followed stored run


class Source(Protocol):
    """Where a replay's recording comes from while its run goes on (a run store's run:
    `helikon.studio.stored.StoredSource`), and who decides the approvals it waits on."""

    run_id: str
    status: str
    pending: tuple[ApprovalRequest, ...]
    """The calls the run waits on as its source says (it may have moved past the replay)."""

    @property
    def ended(self) -> bool: ...

    @property
    def refusal(self) -> str | None:
        """Why `decide` refuses every decision here (None: it takes them)."""

    def newer(self) -> Trace | None:
        """The newer recording, or None when nothing changed since the last call."""

    def again(self) -> Source:
        """Another source of the same run, for a copy of the session."""

    def decide(self, decisions: list[dict[str, Any]]) -> None:
        """Continue the run with checked decisions (`check_decisions`); returns once they
        are taken, while the run goes on elsewhere.

        Raises:
            StudioError: they are refused; the message says why.
        """


def _always(state: Any, next_input: Any) -> bool:
    return True


class ThreadedDebugger:
    """A debugger driven from any thread; see the module docstring.

    Args:
        debugger: a debugger stopped between steps (`Debugger.live` or `Debugger.replay`).
        mode: "live" or "replay", for the page to show.
        fresh: builds another debugger like `debugger` before its first step, for `copy`
            (a replay's `Debugger.replay` again); None: the session cannot be copied.
        source: where a replay's newer recording comes from while its run goes on: the
            session follows it (a page at the end of the run steps on as records land).
    """

    def __init__(
        self,
        debugger: Debugger,
        *,
        mode: Mode = "live",
        fresh: Callable[[], Debugger] | None = None,
        source: Source | None = None,
    ) -> None:
        self.debugger = debugger
        self.mode = mode
        self._fresh = fresh
        self._source = source
        self.chart = chart_facts(debugger)
        self.tables = {debugger.run.ctx.table.digest: debugger.run.ctx.table}
        self.updates = Updates()
        self._activity = Activity.IDLE  # changed only through `_change`
        self._stop: dict[str, Any] | None = None
        self._error: str | None = None
        self._pause: Breakpoint | None = None  # the pause's breakpoint, while PAUSING
        self._follower: asyncio.Task[None] | None = None
        self._outer: list[Debugger] = []  # `step_in`: the runs the shown one is nested in
        self._forks: list[tuple[Debugger, list[dict[str, Any]], int]] = []  # origin, rows, at
        self._bridge = LoopThread()
        self._run = self._bridge.run  # runs a command on the loop, from any thread
        self._run(self._show)
        if source is not None:
            self._run(self._start_following)

    # ------------------------------------------------------------ commands (any thread)

    @property
    def copyable(self) -> bool:
        """Whether `copy` can open another session like this one (a replay can)."""
        return self._fresh is not None

    def copy(self) -> ThreadedDebugger:
        """Another session like this one, before its first step, with no breakpoints.

        Raises:
            StudioError: the session was given no `fresh` (a live run: it is shared).
        """
        if self._fresh is None:
            raise StudioError("a live run cannot be copied: its steps have side effects")
        source = None if self._source is None else self._source.again()
        return ThreadedDebugger(self._fresh(), mode=self.mode, fresh=self._fresh, source=source)

    def clear_breakpoints(self) -> dict[str, Any]:
        """Delete every breakpoint (for the next browser session to drive the run)."""
        return self._run(self._clear_breakpoints)

    def state(self) -> dict[str, Any]:
        """The latest snapshot (`helikon.studio.view.snapshot`), with its `version`."""
        return self.updates.latest()

    def step(self, *, live: bool = False) -> dict[str, Any]:
        """One step; `live` performs its effect again instead of reusing a recorded input.

        Raises:
            StudioError: `live` on a replay, which has no model to call (its agent's model is
                an empty script) and must run no tool.
        """
        if live and self.mode == "replay":
            raise StudioError(
                "a replay calls no model and runs no tool: step live needs a live run "
                "(helikon studio CHART)"
            )
        return self._run(lambda: self._drive(Change.STEP, lambda: self._step(live)))

    def continue_(self) -> dict[str, Any]:
        """Step until a breakpoint, a divergence, a pause or the end; returns when stopped."""
        return self._run(lambda: self._drive(Change.CONTINUE, self._continue))

    def pause(self) -> dict[str, Any]:
        """Stop a continue after the step in flight.

        Raises:
            StudioError: no continue is running.
        """
        return self._run(self._request_pause)

    def back(self, steps: object = 1) -> dict[str, Any]:
        """Rewind `steps` steps (to the start at most); stepping again reuses their inputs."""
        back = check_steps(steps)
        return self._run(lambda: self._time_travel(lambda: self.debugger.back(back)))

    def rewind(self, to: object) -> dict[str, Any]:
        """Go back to the run after `to` steps (0: before the first)."""
        at = check_rewind(to)
        return self._run(lambda: self._time_travel(lambda: self.debugger.rewind(at)))

    def decide(self, decisions: object) -> dict[str, Any]:
        """Answer the suspended run's pending calls and continue it: `decisions` is a list
        of `{"call_id", "arguments_hash", "approved", "seq"}` (`check_decisions`), bound as
        `agent.resume`'s are (to a pending call of this suspension, by call id and
        arguments hash, once). A stored run's decisions go to its source, which resumes
        it; the replay then stands at the suspension and follows the run's records.

        Raises:
            StudioError: a replay of a trace (it runs no tool), a malformed list, or a
                decision that does not bind (the message says why).
            StudioConflict: the stored run's state refuses it (its lease is held by
                another owner, the decision was spent).
        """
        if self._source is not None:
            checked = check_decisions(decisions, seq_needed=True)
            return self._run(lambda: self._decide_stored(checked))
        if self.mode == "replay":
            raise StudioError(REPLAY_DECIDES_NOT)
        checked = check_decisions(decisions, seq_needed=False)
        return self._run(lambda: self._drive(Change.CONTINUE, lambda: self._decide(checked)))

    async def _decide(self, given: list[dict[str, Any]]) -> Stop:
        bound = {request.call.call_id: request for request in self.debugger.pending()}
        chosen = []
        for fields in given:
            request = bound.get(fields["call_id"])
            run, seq = (request.run_id, request.seq) if request else (self.debugger.run.run_id, 0)
            if fields.get("seq") is not None:  # the suspension the page was shown
                seq = fields["seq"]
            chosen.append(
                ApprovalDecision(
                    fields["call_id"], fields["arguments_hash"], fields["approved"], "", run, seq
                )
            )
        try:
            self.debugger.decide(chosen)
        except DebuggerError as exc:
            raise StudioError(str(exc)) from None
        return await self._continue()

    async def _decide_stored(self, given: list[dict[str, Any]]) -> dict[str, Any]:
        assert self._source is not None
        next_activity(self._activity, Change.DECIDE)  # refused as busy first, changing nothing
        if self._outer or self._forks:
            raise StudioError(
                "decide on the stored run itself: step out of the nested run, or go back "
                "to the original from the fork, first"
            )
        self._change(Change.DECIDE)
        self._stop = self._error = None
        self._publish()
        try:
            await asyncio.to_thread(self._source.decide, given)
            while await self.debugger.step() is not None:  # to the suspension: then follow
                pass
        finally:  # refused or not, the pages see the run idle again
            self._change(Change.FINISH)
            published = self._publish()
        return published

    def fork(self, at: object, kind: object, value: object, then: object = None) -> dict[str, Any]:
        """Fork the run after `at` steps with an edited input, and show the fork: `kind`
        "text" (value: the model's answer), "calls" (value: a JSON list of tool calls, the
        model's answer), "tool" (value: an object of call id to result) or "effect" (value:
        the effect's result, as JSON text). `then`: the texts
        the fork's model answers later calls with (default: the agent's own model). The
        original is kept: `unfork` returns to it, and the snapshot compares the two.

        Raises:
            StudioError: a replay without its chart, a malformed request, or an input the
                run does not wait for after `at` steps.
        """
        step, what, given = check_edit(at, kind, value)
        answers = check_then(then)
        return self._run(lambda: self._fork(step, what, given, answers))

    def unfork(self) -> dict[str, Any]:
        """Back to the run the shown fork was forked from."""
        return self._run(self._unfork)

    async def _fork(self, at: int, kind: str, value: Any, then: list[str] | None) -> dict[str, Any]:
        self._change(Change.MOVE)
        if self._outer:
            raise StudioError("step out of the nested run first: forks are of the outer run")
        original = self.debugger
        rows = fork_rows(original)
        try:
            edit = edit_for(original.after(at), kind, value)
            forked = original.fork(edit, at=at, turns=then)
        except DebuggerError as exc:
            raise StudioError(str(exc)) from None
        self._forks.append((original, rows, at))
        self._show_debugger(forked)
        return self._publish()

    async def _unfork(self) -> dict[str, Any]:
        self._change(Change.MOVE)
        if not self._forks or self._outer:
            raise StudioError("this run is not a fork (or a nested run is shown)")
        original, _, _ = self._forks.pop()
        self._show_debugger(original)
        return self._publish()

    def _comparison(self) -> dict[str, Any] | None:
        """The shown fork beside the run it came from (None: no fork is shown)."""
        if not self._forks or self._outer:
            return None
        original, rows, at = self._forks[-1]
        return comparison(original, rows, at, self.debugger)

    def step_in(self, run_id: object = None) -> dict[str, Any]:
        """Show the run nested in the last step's effect (a handoff target, an agent called
        as a tool; `run_id` names one of several), replayed as recorded on its chart; in a
        live run, before a step whose effect starts one, step into it as it runs
        (`Debugger.step_in_live`: stepping releases its transitions, stepping out completes
        the outer step)."""
        nested = check_run_id(run_id)
        return self._run(lambda: self._nest(nested))

    def step_out(self, to: object = None) -> dict[str, Any]:
        """Back to the run the shown one is nested in (`to`: how many levels up stay, 0:
        the outermost run, as the breadcrumb's first entry)."""
        level = check_breadcrumb(to)
        return self._run(lambda: self._unnest(level))

    def add_break(self, kind: object, value: object) -> dict[str, Any]:
        """Set a breakpoint; the snapshot returned has it under `breakpoint`."""
        checked = check_break(kind, value)
        return self._run(lambda: self._add_break(*checked))

    def delete_break(self, breakpoint_id: int) -> dict[str, Any]:
        return self._run(lambda: self._delete_break(breakpoint_id))

    def close(self) -> None:
        """Stop the loop, cancelling a command in flight; idempotent."""
        if self._bridge.closed:
            return
        self.updates.close()
        self._bridge.close(self._abandon)

    # ------------------------------------------------------------ on the loop

    async def _show(self) -> dict[str, Any]:
        return self._publish()

    def _publish(self) -> dict[str, Any]:
        hidden = () if self._pause is None else (self._pause.id,)
        data = snapshot(
            self.debugger,
            mode=self.mode,
            busy=self._activity.busy,
            stop=self._stop,
            error=self._error,
            hidden=hidden,
        )
        data["chart"] = self.chart
        data["pending"], data["decide_refused"] = self._pending()
        data["breadcrumb"] = [
            {"run_id": d.run.run_id, "agent": d.run.agent.name}
            for d in (*self._outer, self.debugger)
        ]
        shown = self.debugger
        busy = self._activity is not Activity.IDLE
        data["nested_runs"] = [] if busy else [*shown.nested_runs(), *shown.runs_ahead()]
        data["compare"] = self._comparison()
        source = self._source
        data["stored"] = (
            None
            if source is None
            else {"run_id": source.run_id, "status": source.status, "following": not source.ended}
        )
        return self.updates.publish(data)

    def _pending(self) -> tuple[list[dict[str, Any]], str | None]:
        """The calls the shown run waits on, and why they cannot be decided here (None:
        they can). A stored run's are the store's, wherever its replay stands."""
        source = self._source
        if source is not None and not self._outer and not self._forks:
            requests, refusal = source.pending, source.refusal
        else:
            requests = self.debugger.pending()
            refusal = None if self.mode == "live" else REPLAY_DECIDES_NOT
        pending = [
            {
                "call_id": request.call.call_id,
                "tool": request.call.name,
                "arguments": request.call.arguments,
                "arguments_hash": request.arguments_hash,
                "seq": request.seq,
                "asked_by": self.debugger.asked_by(request),
            }
            for request in requests
        ]
        return pending, refusal

    async def _start_following(self) -> None:
        self._follower = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        """Take the source's newer recordings until its run ends (see `Source`); one that
        arrives during a command waits for it to finish."""
        assert self._source is not None
        source = self._source
        pending: Trace | None = None
        while not source.ended or pending is not None:
            await asyncio.sleep(FOLLOW_INTERVAL)
            try:
                if pending is None:
                    pending = await asyncio.to_thread(source.newer)
                if pending is None or self._activity is not Activity.IDLE:
                    continue
                trace, pending = pending, None
                self._change(Change.FOLLOW)
                root = (self._forks[0][0] if self._forks else None) or (
                    self._outer[0] if self._outer else self.debugger
                )
                at_end = root.position >= len(root.expected)
                if root.extend(trace) and at_end:
                    while await root.step() is not None:
                        pass
            except Exception as exc:  # a store that stopped checking out: stop following
                self._error = f"stopped following the run: {cut(str(exc))}"
                source.status = "unreadable"
                if self._activity is not Activity.FOLLOWING:
                    self._publish()
                return
            finally:
                if self._activity is Activity.FOLLOWING:
                    self._change(Change.FINISH)
                    self._publish()

    def _change(self, change: Change) -> None:
        """The one place the activity changes (`helikon.studio.activity`); refused changes
        raise the error the request gets."""
        self._activity = next_activity(self._activity, change)

    async def _drive(
        self, change: Change, work: Callable[[], Awaitable[Stop | None]]
    ) -> dict[str, Any]:
        self._change(change)
        command = self._activity.busy
        self._stop = self._error = None
        self._publish()
        try:
            stop = await work()
            paused_by = None if self._pause is None else self._pause.id
            self._stop = None if stop is None else stop_data(stop, paused_by=paused_by)
        except StudioError:  # refused before anything ran (a decision that does not bind)
            raise
        except Exception as exc:
            self._error = f"{command} failed: {type(exc).__name__}: {cut(str(exc))}"
            raise StudioFailure(self._error) from exc
        finally:
            self._change(Change.FINISH)
            if self._pause is not None:
                self.debugger.delete(self._pause.id)
                self._pause = None
            published = self._publish()
        return published

    async def _step(self, live: bool) -> Stop | None:
        if await self.debugger.step(live=live) is not None:
            return None
        reason: Literal["suspended", "end"] = "suspended" if self.debugger.run.suspended else "end"
        return Stop(reason, self.debugger.last)

    async def _continue(self) -> Stop:
        watcher = asyncio.create_task(self._watch())
        try:
            return await self.debugger.continue_()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _watch(self) -> None:
        shown = self.debugger.position
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            if self.debugger.position != shown:
                shown = self.debugger.position
                self._publish()

    async def _request_pause(self) -> dict[str, Any]:
        self._change(Change.PAUSE)
        if self._pause is None:
            self._pause = self.debugger.break_when(_always)
        return self._publish()

    async def _time_travel(self, move: Callable[[], object]) -> dict[str, Any]:
        self._change(Change.MOVE)
        try:
            move()
        except DebuggerError as exc:
            raise StudioError(str(exc)) from None
        self._stop = self._error = None
        return self._publish()

    async def _nest(self, run_id: str | None) -> dict[str, Any]:
        self._change(Change.MOVE)
        outer = self.debugger
        ahead = outer.runs_ahead()
        try:
            if ahead and (run_id is None or run_id in ahead):  # live: stepped as it runs
                nested = await outer.step_in_live(run_id)
            else:
                nested = outer.step_in(run_id)
        except DebuggerError as exc:
            raise StudioNotFound(str(exc)) from None
        self._outer.append(self.debugger)
        self._show_debugger(nested)
        return self._publish()

    async def _unnest(self, to: int | None) -> dict[str, Any]:
        self._change(Change.MOVE)
        if not self._outer:
            raise StudioError("this is the outermost run: step into a nested one first")
        level = len(self._outer) - 1 if to is None else to
        if not 0 <= level < len(self._outer):
            raise StudioError(f"no run at breadcrumb position {level}")
        shown = self._outer[level]
        for outer in reversed(self._outer[level:]):  # live step-ins: their steps complete
            if outer.in_flight:
                await outer.step()
        del self._outer[level:]
        self._show_debugger(shown)
        return self._publish()

    def _show_debugger(self, debugger: Debugger) -> None:
        self.debugger = debugger
        self.chart = chart_facts(debugger)
        self.tables.setdefault(debugger.run.ctx.table.digest, debugger.run.ctx.table)
        self._stop = self._error = None

    async def _add_break(self, kind: BreakKind, value: str) -> dict[str, Any]:
        try:
            breakpoint = self.debugger.break_on(kind, value)
        except DebuggerError as exc:
            raise StudioError(str(exc)) from None
        return {**self._publish(), "breakpoint": breakpoint_data(breakpoint)}

    async def _delete_break(self, breakpoint_id: int) -> dict[str, Any]:
        if self._pause is not None and breakpoint_id == self._pause.id:
            raise StudioNotFound(f"no breakpoint #{breakpoint_id}")
        try:
            self.debugger.delete(breakpoint_id)
        except DebuggerError as exc:
            raise StudioNotFound(str(exc)) from None
        return self._publish()

    async def _clear_breakpoints(self) -> dict[str, Any]:
        for breakpoint in list(self.debugger.breakpoints):
            if self._pause is None or breakpoint.id != self._pause.id:
                self.debugger.delete(breakpoint.id)
        return self._publish()

    async def _abandon(self) -> None:
        """The last command on the loop, as the session closes: a run held by a live step-in
        is cancelled (the bridge then cancels the tasks left)."""
        outermost = self._outer[0] if self._outer else self.debugger
        await outermost.abandon()
