"""docs/reference/errors.md, the one page of helikon's errors, against the package.

Every exception class any helikon module defines has a row with its bases and the module
it is offered from; every `AgentError` value has a row with its fields; the drawn tree
holds every exception that reaches a caller, and those all derive from `HelikonError`.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import typing
from pathlib import Path

import pytest

import helikon
from helikon.core.errors import AgentError, HelikonError

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "errors.md"


def helikon_modules() -> list[str]:
    """Every module of the package, optional extras included when installed."""
    names = []
    for module in pkgutil.walk_packages(helikon.__path__, "helikon."):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:  # an extra that is not installed
            continue
        names.append(module.name)
    return names


def exception_classes() -> dict[str, type[BaseException]]:
    """name -> class, for every exception class a helikon module defines."""
    found: dict[str, type[BaseException]] = {}
    for name in helikon_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
            ):
                assert value.__name__ not in found, f"two exceptions named {value.__name__}"
                found[value.__name__] = value
    return found


def table_rows(text: str) -> dict[str, list[str]]:
    """The rows of a page's tables whose first cell is a name in backticks: name -> cells."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            rows[cells[0].strip("`")] = cells
    return rows


def page_rows() -> dict[str, list[str]]:
    return table_rows(PAGE.read_text())


def drawn_tree() -> str:
    text = PAGE.read_text()
    return text.split("```text\n", 1)[1].split("```", 1)[0]


def tree_names() -> set[str]:
    """The class each line of the drawn tree names (its first word)."""
    return {re.findall(r"\w+", line)[0] for line in drawn_tree().splitlines()}


EXCEPTIONS = exception_classes()
# Raised and caught inside helikon; the page says what becomes of each.
INTERNAL = {
    "MCPToolError", "InvalidArguments", "TooCostly", "UnsafePattern", "StreamFailed",
    "Stopped", "SetupRefused", "UsageError", "LoadError", "ShellError", "HTTPProblem",
    "_Fatal", "_Expired", "CutShort",
}  # fmt: skip


def offered_by(path: str, name: str) -> bool:
    try:
        module = importlib.import_module(path)
    except ImportError:
        return False
    return getattr(module, name, None) is not None


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_every_exception_has_a_row_with_its_bases_and_home(name: str) -> None:
    rows = page_rows()
    assert name in rows, f"{name} is not on docs/reference/errors.md"
    bases, home = rows[name][1:3]
    assert bases == "`" + ", ".join(base.__name__ for base in EXCEPTIONS[name].__bases__) + "`"
    assert offered_by(home.strip("`"), name), f"{name} is not importable from {home}"


@pytest.mark.parametrize("name", sorted(set(EXCEPTIONS) - INTERNAL))
def test_every_exception_a_caller_sees_is_in_the_tree_and_is_a_helikon_error(name: str) -> None:
    assert issubclass(EXCEPTIONS[name], HelikonError)
    assert name in tree_names(), f"{name} is not drawn in the tree"


def test_the_internal_ones_are_not_in_the_tree() -> None:
    assert set(EXCEPTIONS) >= INTERNAL
    assert not INTERNAL & tree_names()


def test_the_tree_draws_each_parent_above_its_children() -> None:
    """An entry indented under another names a subclass of it."""
    stack: list[tuple[int, str]] = []
    for line in drawn_tree().splitlines():
        found = re.search(r"(\w+)", line)
        assert found is not None
        depth = found.start()
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            assert issubclass(EXCEPTIONS[found.group(1)], EXCEPTIONS[stack[-1][1]]), line
        stack.append((depth, found.group(1)))


@pytest.mark.parametrize("value", typing.get_args(typing.get_args(AgentError)[0]))
def test_every_agent_error_value_has_a_row_with_its_fields(value: type) -> None:
    rows = page_rows()
    assert value.__name__ in rows, f"{value.__name__} is not on docs/reference/errors.md"
    fields = [name for name in value.__dataclass_fields__ if name != "kind"]
    assert rows[value.__name__][1] == ", ".join(f"`{name}`" for name in fields)


def test_the_row_reader_reads_a_row_and_skips_the_rest() -> None:
    text = "| Exception | Bases |\n| --- | --- |\n| `RunLeased` | `StoreError` | `a.b` | x |\n"
    assert table_rows(text) == {"RunLeased": ["`RunLeased`", "`StoreError`", "`a.b`", "x"]}
