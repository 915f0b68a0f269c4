"""The studio's errors: one tree, each class the status the server answers with.

HelikonError
├── StudioError (also a ValueError)    400: a request that cannot be carried out
│   ├── StudioBusy                     409: the run is busy with a step or a continue
│   ├── StudioConflict                 409: where the run stands refuses the request
│   └── StudioNotFound                 404: the request names nothing that exists
└── StudioFailure                      500: a command raised while running the agent
"""

from __future__ import annotations

from helikon.core.errors import HelikonError


class StudioError(HelikonError, ValueError):
    """A studio request that cannot be carried out; the server answers 400 with the message."""


class StudioBusy(StudioError):
    """The run is busy with a step or a continue; the server answers 409."""


class StudioConflict(StudioError):
    """Where the run stands refuses the request (its lease held by another owner, its
    decision spent already); the server answers 409."""


class StudioNotFound(StudioError):
    """The request names something that does not exist; the server answers 404."""


class StudioFailure(HelikonError):
    """A command raised while running the agent; the server answers 500 with the message."""
