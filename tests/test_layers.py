"""The package's layers: imports point down only, and no module imports itself back.

The layer order and the pure core's forbidden imports are import-linter contracts in
pyproject.toml (`lint-imports` runs them); these tests run the contracts, show that they can
fail, and check the stricter rule the contracts cannot state: no import circle between any
two modules, packages' `__init__` included, static imports inside functions and under
`TYPE_CHECKING` included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

import helikon

PACKAGE = Path(helikon.__file__).resolve().parent
ROOT = PACKAGE.parent
LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))


def lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_hold() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "7 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_layers_contract(tmp_path: Path) -> None:
    """A copy of the package whose core imports the driver fails, naming both modules."""
    shutil.copytree(PACKAGE, tmp_path / "helikon", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    items = tmp_path / "helikon" / "core" / "items.py"
    items.write_text(items.read_text() + "\nfrom helikon.run.driver import Run  # upward\n")
    result = lint_imports(tmp_path, pythonpath=tmp_path)
    assert result.returncode == 1
    assert "helikon.core is not allowed to import helikon.run" in result.stdout
    assert "helikon.core.items -> helikon.run.driver" in result.stdout


def test_the_driver_importing_the_temporal_runtime_breaks_the_layers(tmp_path: Path) -> None:
    """helikon.temporal sits above the driver and the run store: nothing below imports it."""
    shutil.copytree(PACKAGE, tmp_path / "helikon", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    journal = tmp_path / "helikon" / "run" / "journal.py"
    journal.write_text(journal.read_text() + "\nimport helikon.temporal.writes  # upward\n")
    result = lint_imports(tmp_path, pythonpath=tmp_path)
    assert result.returncode == 1
    assert "helikon.run is not allowed to import helikon.temporal" in result.stdout


def test_an_io_import_in_the_core_breaks_the_purity_contract(tmp_path: Path) -> None:
    shutil.copytree(PACKAGE, tmp_path / "helikon", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    state = tmp_path / "helikon" / "core" / "state.py"
    state.write_text(state.read_text() + "\nimport sqlite3  # IO in the core\n")
    result = lint_imports(tmp_path, pythonpath=tmp_path)
    assert result.returncode == 1
    assert "helikon.core.state -> sqlite3" in result.stdout


def imports_back(graph: grimp.ImportGraph) -> list[str]:
    """Every import `a -> b` where `b` imports `a` back, directly or through other modules."""
    return sorted(
        f"{importer} -> {imported}"
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if graph.chain_exists(importer=imported, imported=importer)
    )


def test_no_module_imports_another_that_imports_it_back() -> None:
    assert imports_back(grimp.build_graph("helikon")) == []


def test_the_circle_finder_sees_a_circle() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")]:
        graph.add_import(importer=importer, imported=imported)
    assert imports_back(graph) == ["p.a -> p.b", "p.b -> p.c", "p.c -> p.a"]
