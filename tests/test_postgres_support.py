"""The PostgreSQL fixture's rule: no PostgreSQL skips its tests, except under CI=true, where
it fails them (CI must not go green having tested one run store of two)."""

from __future__ import annotations

import pytest
from postgres_support import missing


def test_without_postgres_its_tests_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no initdb"):
        missing("PostgreSQL is not installed (no initdb)")


def test_without_postgres_under_ci_its_tests_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and PostgreSQL is not installed"):
        missing("PostgreSQL is not installed (no initdb)")


def test_the_cluster_answers(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url) as db:
        assert db.execute("SHOW fsync").fetchone() == ("off",)
        assert db.info.host == "127.0.0.1"
