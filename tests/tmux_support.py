"""A command driven in a real terminal: Debian's tmux, a private server per test.

`TMUX` is None where tmux is missing (scripts/test.sh installs it); tests marked
`needs_tmux` skip then.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(
    TMUX is None, reason="the terminal test needs Debian's tmux (apt-get install tmux)"
)


class Tmux:
    """One tmux session running a command: what it shows, and lines typed into it."""

    def __init__(self, socket: Path) -> None:
        assert TMUX is not None
        self.tmux = [TMUX, "-S", str(socket), "-f", "/dev/null"]

    def screen(self) -> str:
        shown = subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-J", "-S", "-200"],
            capture_output=True,
            text=True,
        )
        return shown.stdout

    def until(self, text: str) -> str:
        """The screen once it shows `text` (within 30 s, else the test fails)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never appeared on the terminal:\n{self.screen()}")

    def type_line(self, line: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-l", line], check=True)
        subprocess.run([*self.tmux, "send-keys", "Enter"], check=True)


@contextmanager
def terminal(
    command: str, tmp_path: Path, cwd: Path, env: Mapping[str, str], *, width: int = 160
) -> Iterator[Tmux]:
    """`command` running in a `width` x 50 terminal, its tmux server killed after."""
    session = Tmux(tmp_path / "tmux.sock")
    size = ["-x", str(width), "-y", "50"]
    subprocess.run(
        [*session.tmux, "new-session", "-d", *size, "-c", str(cwd), command],
        check=True,
        env={**env, "TERM": "xterm-256color", "NO_COLOR": "1"},
    )
    try:
        yield session
    finally:
        subprocess.run([*session.tmux, "kill-server"], capture_output=True)
