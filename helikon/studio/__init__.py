"""helikon studio: step a run in the browser, live or replayed from a trace.

A `ThreadedDebugger` drives a `Debugger` on its own event loop thread; a `StudioServer`
serves the page and a JSON API over it on 127.0.0.1, with Server-Sent Events so the page
follows a run as it goes; each browser has a browser session of its own
(`helikon.studio.browsers`), with its own breakpoints and position. `helikon studio` (see
`helikon.cli.studio`) puts the two together:

    from helikon.debug import Debugger
    from helikon.studio import StudioServer, ThreadedDebugger

    debugger = ThreadedDebugger(Debugger.live(agent, "How am I doing on coffee?"))
    with StudioServer(debugger) as server:
        print(server.url)
        server.serve_forever()

`ThreadedDebugger` was called `Session`, a word helikon keeps for a conversation's memory
(`helikon.durable.Session`); `helikon.studio.Session` still works, with a warning.
"""

from __future__ import annotations

import warnings

from helikon.studio.server import StudioServer
from helikon.studio.session import (
    StudioBusy,
    StudioConflict,
    StudioError,
    StudioFailure,
    StudioNotFound,
    ThreadedDebugger,
)


def __getattr__(name: str) -> object:
    if name == "Session":
        warnings.warn(
            "helikon.studio.Session was renamed: use helikon.studio.ThreadedDebugger",
            DeprecationWarning,
            stacklevel=2,
        )
        return ThreadedDebugger
    raise AttributeError(f"module 'helikon.studio' has no attribute {name!r}")


__all__ = [
    "StudioBusy",
    "StudioConflict",
    "StudioError",
    "StudioFailure",
    "StudioNotFound",
    "StudioServer",
    "ThreadedDebugger",
]
