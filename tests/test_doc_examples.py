"""Every Python block in docs/ and README.md runs, or says why not.

The blocks of one page run in order in one namespace, as a reader pastes them into one
session, offline (scripted models; no API key is set) and in a scratch folder holding
`charts/` (the pages' commands run from the repository's root), with the repository on the
path for `import charts`. A block may use top-level `await`, as in a notebook or
`python -m asyncio`. A block that cannot run here (it needs a real model or a service) is
marked on the line before its fence, with the reason:

    <!-- not run: needs an OpenAI API key -->

A bare marker without a reason fails, and so does a marker that is not followed by a
Python block. Written here rather than with sybil or pytest-examples: neither runs
top-level `await`, and the one rule above is all this needs.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*.md") if "charts" not in p.parts)]
)
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")
NOT_RUN = re.compile(r"^<!-- not run:(.*)-->\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    code: str
    skipped: str | None  # the reason it is not run


def blocks(page: Path) -> list[Block]:
    """The page's top-level Python blocks, each with its not-run reason if marked."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opened = FENCE.match(lines[index])
        if opened is None:
            index += 1
            continue
        fence, language = opened.groups()
        end = index + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        if language in ("python", "py"):
            marker = NOT_RUN.match(lines[index - 1]) if index else None
            reason = marker.group(1).strip() if marker else None
            code = "\n".join(lines[index + 1 : end])
            found.append(Block(page, index + 1, code, reason))
        index = end + 1
    return found


def markers(page: Path) -> list[tuple[int, str]]:
    """Every not-run marker of the page: (line, the line after it)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    return [
        (number + 1, lines[number + 1] if number + 1 < len(lines) else "")
        for number, line in enumerate(lines)
        if line.startswith("<!-- not run")
    ]


def run(block: Block, namespace: dict[str, Any]) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    code = compile(block.code, f"{block.page.relative_to(ROOT)}:{block.line}", "exec", flags=flags)
    result = eval(code, namespace)
    if inspect.iscoroutine(result):
        asyncio.run(result)


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_python_block_of_the_page_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = blocks(page)
    if not found:
        pytest.skip("no Python block")
    (tmp_path / "charts").symlink_to(ROOT / "charts")  # the pages name charts/<file>.py
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HELIKON_MODEL"):
        monkeypatch.delenv(name, raising=False)
    # A module of its own, as a pasted session has (dataclasses look their module up).
    module = types.ModuleType(f"helikon_docs_{page.stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    environment = dict(os.environ)  # a block may set a variable, as the approvals page does
    try:
        for block in found:
            if block.skipped is None:
                run_checked(block, namespace)
    finally:
        os.environ.clear()
        os.environ.update(environment)


def run_checked(block: Block, namespace: dict[str, Any]) -> None:
    try:
        run(block, namespace)
    except BaseException as exc:
        where = f"{page_id(block.page)}, the block at line {block.line}"
        raise AssertionError(f"{where} failed: {type(exc).__name__}: {exc}") from exc


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_block_not_run_says_why(page: Path) -> None:
    for line, following in markers(page):
        marker = page.read_text(encoding="utf-8").splitlines()[line - 1]
        reason = NOT_RUN.match(marker)
        assert reason and reason.group(1).strip(), f"{page_id(page)}:{line}: give a reason"
        assert FENCE.match(following) and FENCE.match(following).group(2) in ("python", "py"), (  # type: ignore[union-attr]
            f"{page_id(page)}:{line}: the marker must stand right above a Python block"
        )


def test_the_pages_hold_python_blocks() -> None:
    counted = {page_id(page): len(blocks(page)) for page in PAGES}
    assert sum(counted.values()) >= 40, counted
    assert sys.version_info >= (3, 11)
