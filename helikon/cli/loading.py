"""Loading charts and agents named on the command line: a file path or `module:attr`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from helikon.core.chart.compile import compile_chart
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.chart.dsl import LoopChart
from helikon.core.chart.spec import ChartSpec
from helikon.core.errors import HelikonError
from helikon.core.quoting import cut, quoted
from helikon.core.table import TransitionTable
from helikon.models.scripted import ScriptedModel
from helikon.run.agent import Agent


def _charts_dir() -> Path:
    """The reference agents: the repository's charts/ when present, else the wheel's copy."""
    package = Path(__file__).resolve().parent.parent
    repository = package.parent / "charts"
    return repository if repository.is_dir() else package / "examples"


CHARTS = _charts_dir()
"""The reference chart files: a checkout's charts/, or the copy inside the wheel."""


class LoadError(Exception):
    """What the user named cannot be loaded; the message says what and why."""


FILE_MODULE_PREFIX = "helikon_user_"
"""How the modules `load_module` imports from a file path are named in sys.modules."""


def load_module(target: str) -> ModuleType:
    """Import a `.py` file by path, or a module by dotted name."""
    path = Path(target)
    if target.endswith(".py") or path.exists():
        if not path.is_file():
            raise LoadError(f"not a file: {target}" if path.exists() else f"no such file: {target}")
        name = f"{FILE_MODULE_PREFIX}{path.stem}_{abs(hash(path.resolve()))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise LoadError(f"cannot import {target}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise LoadError(f"{target} failed to import: {_reason(exc)}") from exc
        return module
    try:
        return importlib.import_module(target)
    except ImportError as exc:
        raise LoadError(f"cannot import module {quoted(target)}: {cut(str(exc))}") from exc


def module_label(module: ModuleType) -> str:
    """How to name `module` to the user: its file for a module imported from a path."""
    if module.__name__.startswith(FILE_MODULE_PREFIX) and module.__file__:
        return module.__file__
    return module.__name__


def call(module: ModuleType, name: str, *args: Any) -> Any:
    """Call the function `name` that a chart module defines (`agent`, `script`, `deps`).

    Raises:
        LoadError: the call raised; the message names the module, the function and the error
            (the error is the LoadError's `__cause__`).
    """
    try:
        return getattr(module, name)(*args)
    except Exception as exc:
        raise LoadError(f"{module_label(module)}: {name}() failed: {_reason(exc)}") from exc


def _reason(exc: Exception) -> str:
    """What a chart file raised: helikon's errors (a chart that does not compile, listing its
    problems) as they are, since they quote what they name cut short; the rest cut short."""
    reason = f"{type(exc).__name__}: {exc}"
    return reason if isinstance(exc, HelikonError) else cut(reason)


def _split(target: str) -> tuple[str, str]:
    """`where:attr` -> (where, attr); a target without a colon has no attr."""
    where, _, attr = target.rpartition(":") if ":" in target else (target, "", "")
    return where, attr


def _attribute(module: ModuleType, where: str, attr: str) -> Any:
    try:
        return getattr(module, attr)
    except AttributeError:
        raise LoadError(f"{where} has no attribute {quoted(attr)}") from None


def load(target: str) -> Any:
    """`path/to/file.py`, `module`, `path.py:attr` or `module:attr` -> the module or attr."""
    where, attr = _split(target)
    module = load_module(where)
    return _attribute(module, where, attr) if attr else module


def _registries(module: ModuleType, suffix: str) -> dict[str, Any]:
    """Guards or actions a chart module registers: dicts named `GUARDS` or `<X>_GUARDS`."""
    found: dict[str, Any] = {}
    for name, obj in vars(module).items():
        if (name == suffix or name.endswith("_" + suffix)) and isinstance(obj, dict):
            found.update(obj)
    return found


def charts_in(module: ModuleType) -> list[Any]:
    """The loop charts a module defines: its chart classes (not those it imports) and the
    chart specs it holds (`extend(...).build()`)."""

    return [
        obj
        for obj in vars(module).values()
        if isinstance(obj, ChartSpec)
        or (
            isinstance(obj, type)
            and issubclass(obj, LoopChart)
            and obj is not LoopChart
            and obj.__module__ == module.__name__
        )
    ]


def is_chart(found: Any) -> bool:
    """`found` is a chart to compile: a `ChartSpec` or a `LoopChart` class."""
    return isinstance(found, ChartSpec) or (
        isinstance(found, type) and issubclass(found, LoopChart)
    )


def chart_name(chart: Any) -> str:
    """A chart's name, a spec's or a class's."""
    return str(chart.name if isinstance(chart, ChartSpec) else chart.__name__)


def compile_in(module: ModuleType, chart: Any) -> Any:
    """Compile `chart` with the guards and actions its module registers."""

    return compile_chart(
        chart, guards=_registries(module, "GUARDS"), actions=_registries(module, "ACTIONS")
    )


def load_table(target: str) -> Any:
    """The compiled table `target` names.

    `default` is helikon's default loop. Otherwise a file or module (with `:attr` to pick a
    chart class, a compiled table or an agent): a module's compiled table, else the chart it
    defines, else its agent's chart.

    Raises:
        LoadError: nothing loadable, or more than one candidate.
        ChartDefinitionError: the chart does not compile.
    """

    if target == "default":
        return DEFAULT_TABLE
    where, attr = _split(target)
    module = load_module(where)  # once: a file imported twice would run its code twice
    found = _attribute(module, where, attr) if attr else module
    if isinstance(found, TransitionTable):
        return found
    if is_chart(found):
        return compile_in(module, found)
    if isinstance(found, Agent):
        return found.chart or DEFAULT_TABLE
    if not isinstance(found, ModuleType):
        raise LoadError(f"{target} is not a chart, a compiled table or an agent")
    tables = [obj for obj in vars(found).values() if isinstance(obj, TransitionTable)]
    if len(tables) == 1:
        return tables[0]
    charts = charts_in(found)
    if len(charts) == 1:
        return compile_in(found, charts[0])
    if len(charts) > 1:
        names = cut(", ".join(map(chart_name, charts)))
        raise LoadError(f"{target} defines several charts ({names}); pick one with :Name")
    if hasattr(found, "agent"):
        agent = call(found, "agent", ScriptedModel([]))
        return agent.chart or DEFAULT_TABLE
    raise LoadError(f"{target} defines no chart, compiled table or agent")
