"""A throwaway PostgreSQL cluster for the run store tests: `postgres_url`, a session fixture.

It finds Debian's PostgreSQL (`/usr/lib/postgresql/<version>/bin`, else `initdb` on PATH),
makes a cluster in a temporary folder with `initdb`, starts it with `pg_ctl` on a free
loopback port (`fsync=off`: nothing here must survive a power loss), creates one database
and yields its URL; at the end of the session it stops the cluster and removes the folder.
PostgreSQL refuses to run as root, so as root every command runs as the `postgres` user.

Without PostgreSQL the tests that ask for it are skipped, except under `CI=true`, where a
missing PostgreSQL fails them: CI must not pass by testing one backend of two.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

DATABASE = "helikon_test"


def bin_dir() -> Path | None:
    """Where PostgreSQL's server programs are: the newest Debian version, else PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _version(path: str) -> tuple[int, ...]:
    number = Path(path).parent.parent.name
    return tuple(int(part) for part in number.split(".") if part.isdigit())


def missing(reason: str) -> None:
    """Skip, or under CI=true fail: PostgreSQL is part of what CI tests."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}: install PostgreSQL (scripts/test.sh does)")
    pytest.skip(reason)


def _has_user(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Cluster:
    """One PostgreSQL cluster in `root`, run by the `postgres` user when we are root."""

    def __init__(self, bin: Path, root: Path) -> None:
        self.bin = bin
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.as_root = os.geteuid() == 0

    def run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip()}")

    def start(self) -> None:
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self.run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        options = (
            f"-c port={self.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories={self.root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self.run(
            "pg_ctl", "start", "-w", "-t", "30", "-D", str(self.data),
            "-l", str(self.root / "server.log"), "-o", options,
        )  # fmt: skip

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self.run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", str(self.data))

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        try:
            return (self.root / "server.log").read_text()[-2000:]
        except OSError:
            return ""


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of an empty database in a cluster of its own, for this test session."""
    bin = bin_dir()
    if bin is None:
        missing("PostgreSQL is not installed (no initdb)")
    assert bin is not None
    if os.geteuid() == 0 and not _has_user("postgres"):
        missing("running as root, and there is no `postgres` user to run PostgreSQL as")
    try:
        import psycopg
    except ModuleNotFoundError:
        missing("psycopg is not installed (pip install 'helikon[postgres]')")
    root = Path(tempfile.mkdtemp(prefix="helikon-pg-"))
    cluster = Cluster(bin, root)
    try:
        cluster.start()
        with psycopg.connect(cluster.url("postgres"), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {DATABASE}")
    except (RuntimeError, psycopg.Error) as exc:  # installed but broken: a failure
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"a PostgreSQL cluster did not start: {exc}\n{cluster.log()}")
    try:
        yield cluster.url(DATABASE)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
