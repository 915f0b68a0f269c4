"""Loading charts and agents named on the command line: a file path or `module:attr`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


class LoadError(Exception):
    """What the user named cannot be loaded; the message says what and why."""


def load_module(target: str) -> ModuleType:
    """Import a `.py` file by path, or a module by dotted name."""
    path = Path(target)
    if target.endswith(".py") or path.exists():
        if not path.is_file():
            raise LoadError(f"no such file: {target}")
        name = f"helikon_user_{path.stem}_{abs(hash(path.resolve()))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise LoadError(f"cannot import {target}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise LoadError(f"{target} failed to import: {type(exc).__name__}: {exc}") from exc
        return module
    try:
        return importlib.import_module(target)
    except ImportError as exc:
        raise LoadError(f"cannot import module {target!r}: {exc}") from exc


def load(target: str) -> Any:
    """`path/to/file.py`, `module`, `path.py:attr` or `module:attr` -> the module or attr."""
    where, _, attr = target.rpartition(":") if ":" in target else (target, "", "")
    module = load_module(where)
    if not attr:
        return module
    try:
        return getattr(module, attr)
    except AttributeError:
        raise LoadError(f"{where} has no attribute {attr!r}") from None
