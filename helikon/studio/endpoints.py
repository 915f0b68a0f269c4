"""What each API path does: the commands a browser session sends the `ThreadedDebugger` it
shows (one table, `COMMANDS`), the breakpoint a delete names, and the run store's endpoints
(list, open, fork a stored run).

The handler (`helikon.studio.handler`) routes a request here and writes what comes back:
nothing here reads or writes HTTP. A command's request body comes as the JSON object it was
(any values: the session checks them, `helikon.studio.checks`); a request that cannot be
answered raises `HTTPProblem` or the session's `StudioError`.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from helikon.core.quoting import quoted
from helikon.studio.checks import check_edit
from helikon.studio.errors import StudioError
from helikon.studio.request import HTTPProblem, id_number
from helikon.studio.session import ThreadedDebugger
from helikon.studio.stored import StoredRuns

Command = Callable[[ThreadedDebugger, dict[str, Any]], dict[str, Any]]
"""A command on the session a browser session drives, given the request's body."""


def _flag(body: dict[str, Any], name: str = "live") -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise StudioError(f"{name} must be true or false")
    return value


OK, CREATED = HTTPStatus.OK, HTTPStatus.CREATED

COMMANDS: dict[str, tuple[Command, HTTPStatus]] = {
    "/api/step": (lambda s, b: s.step(live=_flag(b)), OK),
    "/api/continue": (lambda s, b: s.continue_(), OK),
    "/api/pause": (lambda s, b: s.pause(), OK),
    "/api/back": (lambda s, b: s.back(b.get("steps", 1)), OK),
    "/api/rewind": (lambda s, b: s.rewind(b.get("to")), OK),
    "/api/break": (lambda s, b: s.add_break(b.get("kind"), b.get("value")), CREATED),
    "/api/decide": (lambda s, b: s.decide(b.get("decisions")), OK),
    "/api/fork": (
        lambda s, b: s.fork(b.get("at"), b.get("kind"), b.get("value"), b.get("then")),
        OK,
    ),
    "/api/unfork": (lambda s, b: s.unfork(), OK),
    "/api/step_in": (lambda s, b: s.step_in(b.get("run_id")), OK),
    "/api/step_out": (lambda s, b: s.step_out(b.get("to")), OK),
}
"""Each POST path that commands the session, with the status its answer takes."""


def breakpoint_id(path: str) -> int:
    """The breakpoint DELETE /api/break/{id} names.

    Raises:
        HTTPProblem: 404, the id is not a number.
    """
    text = urlsplit(path).path.removeprefix("/api/break/")
    number = id_number(text)
    if number is None:
        raise HTTPProblem(HTTPStatus.NOT_FOUND, f"no breakpoint {quoted(text)}: ids are numbers")
    return number


# ---------------------------------------------------------------- a run store's runs


def stored_runs(runs: StoredRuns | None) -> StoredRuns:
    """The run store's runs the studio shows.

    Raises:
        HTTPProblem: 404, the studio shows no run store.
    """
    if runs is None:
        raise HTTPProblem(
            HTTPStatus.NOT_FOUND, "this studio shows no run store (helikon studio --store URL)"
        )
    return runs


def listing(runs: StoredRuns) -> dict[str, Any]:
    """GET /api/runs: the store's runs (status, agent, phase, turns)."""
    return {"runs": runs.listing()}


def open_stored(runs: StoredRuns, body: dict[str, Any]) -> ThreadedDebugger:
    """POST /api/open: a replay of the run `{"run_id": ID}` names."""
    return runs.session(body.get("run_id"))


def fork_stored(
    runs: StoredRuns, body: dict[str, Any], shown: ThreadedDebugger
) -> ThreadedDebugger:
    """POST /api/fork_stored: fork the stored run `shown` replays after step `at`, with the
    input `kind` and `value` name, into a new stored run; a replay of that fork.

    Raises:
        StudioError: the edit is not one a fork takes.
        HTTPProblem: 400, `shown` is no stored run, or a run nested in one.
    """
    at, kind, value = check_edit(body.get("at"), body.get("kind"), body.get("value"))
    state = shown.state()
    if state.get("stored") is None or len(state.get("breadcrumb", ())) > 1:
        raise HTTPProblem(HTTPStatus.BAD_REQUEST, "fork a stored run, not a nested one")
    return runs.session(runs.fork(state["stored"]["run_id"], at, kind, value))
