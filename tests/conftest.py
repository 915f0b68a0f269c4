"""Suite-wide setup: values are immutable at run time under test (see helikon.core.values),
and `helikon run` keeps no run unless a test names a store (the CLI's default store is a
file under the current directory, which is the repository in these tests)."""

from __future__ import annotations

import os

import pytest

# Fixtures: a throwaway PostgreSQL cluster, each run store backend in turn, and a Temporal
# dev server.
from postgres_support import postgres_url  # noqa: F401
from store_support import backend, store  # noqa: F401
from temporal_support import temporal_address  # noqa: F401

os.environ.setdefault("HELIKON_STRICT_VALUES", "1")
os.environ.setdefault("HELIKON_STORE", "none")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--trials",
        default="12",
        help="kill -9 trials to run (tests/test_kill9.py); each is killed up to 5 times",
    )
