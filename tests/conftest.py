"""Suite-wide setup: values are immutable at run time under test (see helikon.core.values),
`helikon run` keeps no run unless a test names a store (the CLI's default store is a
file under the current directory, which is the repository in these tests), and runs read a
clock that stands still (`helikon.trace.times`), so two runs of one script write the same
bytes, times included; a test of times sets its own clock inside."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Fixtures: a throwaway PostgreSQL cluster, each run store backend in turn, and a Temporal
# dev server.
from postgres_support import postgres_url  # noqa: F401
from store_support import backend, store  # noqa: F401
from temporal_support import temporal_address  # noqa: F401

from helikon.trace.times import TickingClock, using_clock

os.environ.setdefault("HELIKON_STRICT_VALUES", "1")
os.environ.setdefault("HELIKON_STORE", "none")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--trials",
        default="12",
        help="kill -9 trials to run (tests/test_kill9.py); each is killed up to 5 times",
    )


@pytest.fixture(autouse=True)
def still_clock() -> Iterator[None]:
    """Every run in a test reads 2026-01-01T00:00:00Z, and no effect takes any time."""
    with using_clock(TickingClock(tick=0.0)):
        yield
