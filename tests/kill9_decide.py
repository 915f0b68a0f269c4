"""`helikon ARGV` in this process, killed with SIGKILL the moment a run store has committed
approval decisions: after `decide`'s transaction, before the record they lead to.

    python tests/kill9_decide.py runs resume RUN_ID --chart CHART --approve all --store URL

Everything up to the kill is the real code path (the CLI, `agent.resume`, the driver's
journal, the store's `decide`); only the kill is added, after the store returns.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from helikon.cli import main
from helikon.durable import SqliteRunStore
from helikon.durable.postgres import PostgresRunStore


def killed_after(decide: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    async def deciding(*args: Any, **kwargs: Any) -> None:
        await decide(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    return deciding


if __name__ == "__main__":
    for store in (SqliteRunStore, PostgresRunStore):
        store.decide = killed_after(store.decide)  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
