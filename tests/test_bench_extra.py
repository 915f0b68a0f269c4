"""The `bench` extra installs what bench/driver.py itself imports (its peers are optional:
a peer whose package is missing is skipped, bench/peers.py)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import distribution, packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported(path: Path) -> set[str]:
    """The dotted modules `path` imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def third_party(modules: set[str]) -> set[str]:
    local = {"helikon", *(p.stem for p in BENCH.glob("*.py"))}
    return {m for m in modules if m.split(".")[0] not in (*sys.stdlib_module_names, *local)}


def providers(module: str) -> set[str]:
    """The installed distributions holding `module`'s files (by its dotted path)."""
    starts = (module.replace(".", "/") + "/", module.replace(".", "/") + ".py")
    return {
        canonical(name)
        for name in packages_distributions().get(module.split(".")[0], [])
        if any(str(file).startswith(starts) for file in distribution(name).files or ())
    }


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["bench"]]
    return {canonical(re.match(r"[A-Za-z0-9._-]+", r)[0]) for r in requirements}  # type: ignore[index]


def test_the_bench_extra_holds_what_the_driver_benchmark_imports() -> None:
    wanted = third_party(imported(BENCH / "driver.py"))
    assert wanted, "bench/driver.py imports no third-party module: nothing to check"
    missing = {module: providers(module) for module in wanted if not providers(module) & declared()}
    assert missing == {}
