"""What every command shares: `UsageError`, reading the chart or trace the user named, and
writing what a command makes.

A command-line mistake is a `UsageError`: `helikon` prints it as one line and exits 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from helikon.cli.loading import LoadError, load_table
from helikon.core.errors import ChartDefinitionError
from helikon.trace import Trace, TraceError, read_trace


class UsageError(Exception):
    """A command-line mistake: reported as one line, exit status 2."""


def table_of(target: str) -> Any:
    """The compiled table `target` names; what cannot be loaded or compiled is a UsageError."""
    try:
        return load_table(target)
    except (LoadError, ChartDefinitionError) as exc:
        raise UsageError(str(exc)) from None


def trace_at(path: str) -> Trace:
    """The trace recorded at `path`; a missing, unreadable or corrupt file is a UsageError."""
    try:
        return read_trace(path)
    except TraceError as exc:
        raise UsageError(str(exc)) from None


def encoded(text: str) -> bytes:
    """`text` as UTF-8; a lone surrogate (which a provider can send, and a trace keeps)
    is written as its `\\udXXX` escape instead of failing to encode."""
    return text.encode("utf-8", "backslashreplace")


def write_output(data: bytes, output: str | None) -> None:
    """Write `data` to the file `output`, or to stdout when it is None or `-` (text only)."""
    if output in (None, "-"):
        if data[:4] == b"\x89PNG":
            raise UsageError("PNG is binary: write it to a file with -o FILE")
        binary = getattr(sys.stdout, "buffer", None)
        if binary is None:  # a text-only stdout (a StringIO in a test)
            sys.stdout.write(data.decode("utf-8", "replace"))
            return
        sys.stdout.flush()
        binary.write(data)
        binary.flush()
        return
    try:
        Path(output).write_bytes(data)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from None
