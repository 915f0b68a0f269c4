"""`ToolSpec`: a tool as the model sees it. Tools build them; model adapters send them."""

from __future__ import annotations

from typing import Any

from helikon.core.values import value


@value
class ToolSpec:
    """A tool as the model sees it: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
