"""Google-style docstrings: a tool's description and its parameters' descriptions.

Only what a tool schema needs is read: the first paragraph (the tool's description) and the
entries of the `Args:` section (one per parameter, continuation lines indented deeper).
Other sections (`Returns:`, `Raises:`, ...) are ignored.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

_ARGS_HEADERS = frozenset({"args", "arguments", "parameters", "params", "keyword args"})
_SECTION = re.compile(r"^(?P<title>[A-Za-z][A-Za-z ]*):\s*$")
_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")


@dataclass(frozen=True, slots=True)
class Docstring:
    """What a tool reads from its function's docstring."""

    description: str
    params: dict[str, str]


def parse_docstring(doc: str | None) -> Docstring:
    """The first paragraph, joined into one line, and the `Args:` entries by name."""
    lines = inspect.cleandoc(doc or "").splitlines()
    return Docstring(_first_paragraph(lines), _args_section(lines))


def _first_paragraph(lines: list[str]) -> str:
    paragraph: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()):
            break
        paragraph.append(line.strip())
    return " ".join(paragraph)


def _args_section(lines: list[str]) -> dict[str, str]:
    """Entries of the first `Args:` section: `name (type): text`, continued when indented deeper."""
    start = _args_start(lines)
    if start is None:
        return {}
    header_indent = _indent(lines[start - 1])
    params: dict[str, list[str]] = {}
    entry_indent: int | None = None
    current: list[str] | None = None
    for line in lines[start:]:
        if not line.strip():
            continue
        indent = _indent(line)
        if indent <= header_indent:
            break  # the section ended: the next header, or text back at the header's margin
        entry_indent = indent if entry_indent is None else entry_indent
        match = _ENTRY.match(line.strip())
        if indent <= entry_indent and match:
            current = params.setdefault(match["name"], [])
            current.append(match["text"].strip())
        elif current is not None:
            current.append(line.strip())
    return {name: " ".join(part for part in parts if part) for name, parts in params.items()}


def _args_start(lines: list[str]) -> int | None:
    for index, line in enumerate(lines):
        match = _SECTION.match(line.strip())
        if match and match["title"].strip().lower() in _ARGS_HEADERS:
            return index + 1
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
