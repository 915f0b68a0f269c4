"""helikon studio: step a run in the browser, live or replayed from a trace.

A `Session` drives a `Debugger` on its own event loop thread; a `StudioServer` serves the
page and a JSON API over it on 127.0.0.1, with Server-Sent Events so the page follows a
run as it goes; each browser is a session of its own (`helikon.studio.browsers`), with its own
breakpoints and position. `helikon studio` (see `helikon.cli.studio`) puts the two together:

    from helikon.debug.debugger import Debugger
    from helikon.studio import Session, StudioServer

    with StudioServer(Session(Debugger.live(agent, "How am I doing on coffee?"))) as server:
        print(server.url)
        server.serve_forever()
"""

from __future__ import annotations

from helikon.studio.server import StudioServer
from helikon.studio.session import (
    Session,
    StudioBusy,
    StudioConflict,
    StudioError,
    StudioFailure,
    StudioNotFound,
)

__all__ = [
    "Session",
    "StudioBusy",
    "StudioConflict",
    "StudioError",
    "StudioFailure",
    "StudioNotFound",
    "StudioServer",
]
