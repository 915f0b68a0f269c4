"""Suite-wide setup: values are immutable at run time under test (see helikon.core.values)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HELIKON_STRICT_VALUES", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--trials",
        default="12",
        help="kill -9 trials to run (tests/test_kill9.py); each is killed up to 5 times",
    )
