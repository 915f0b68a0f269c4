"""helikon's version: the package metadata reads it (pyproject's `[tool.hatch.version]`)."""

__version__ = "0.1.0"
