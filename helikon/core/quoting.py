"""`quoted`: a value helikon did not write itself, as an error message may show it.

A trace line, a store row, a chart file, an HTTP request or an MCP server may hold a value of
any size; an error that quotes it whole is a five-megabyte line. Every error that names such
a value quotes it through `quoted`: one line (`repr` escapes newlines), cut to about
`LIMIT` characters, saying how long it was when cut.
"""

from __future__ import annotations

import reprlib

LIMIT = 120
"""Characters of the value an error shows: with its quotes and its length about 150, so that
an error line naming it (and a file, a line number, what was wrong and why) stays under 300."""

_BRIEF = reprlib.Repr()
_BRIEF.maxlevel = 3
_BRIEF.maxstring = _BRIEF.maxother = _BRIEF.maxlong = LIMIT


def quoted(value: object) -> str:
    """`value` as `repr` writes it, cut to about `LIMIT` characters: always one line.

    A string cut short shows its start and its length (``'aaa…' (1048576 characters)``);
    a container shows its first items, a few levels deep (`reprlib`).
    """
    if isinstance(value, str | bytes):
        if len(value) <= LIMIT:
            return repr(value)
        return f"{value[:LIMIT]!r}… ({len(value)} {_unit(value)})"
    text = _BRIEF.repr(value)
    return text if len(text) <= LIMIT else text[:LIMIT] + "…"


def _unit(value: str | bytes) -> str:
    return "characters" if isinstance(value, str) else "bytes"


def cut(text: str) -> str:
    """A message helikon did not write (a library's error, which quotes its input) as one
    line of about `LIMIT` characters: newlines escaped, the rest shown as it is."""
    line = text.replace("\r", "\\r").replace("\n", "\\n")
    return line if len(line) <= LIMIT else f"{line[:LIMIT]}… ({len(text)} characters)"
