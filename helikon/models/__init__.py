"""Models: the `Model` protocol a run calls, and the models helikon ships.

`ScriptedModel` plays scripted turns (tests and docs, offline), `ReplayModel` answers from a
recorded trace, `OpenAIModel` calls the OpenAI API (the `openai` extra: imported only when
asked for). `ModelInput` is what a model is given for one call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helikon.models.base import Model, ModelInput
from helikon.models.replay import ReplayModel
from helikon.models.scripted import ScriptedModel, ScriptedTurn

if TYPE_CHECKING:
    from helikon.models.openai import OpenAIModel


def __getattr__(name: str) -> object:
    # OpenAIModel needs the `openai` extra; import it only when asked for.
    if name == "OpenAIModel":
        from helikon.models.openai import OpenAIModel

        return OpenAIModel
    raise AttributeError(f"module 'helikon.models' has no attribute {name!r}")


__all__ = [
    "Model",
    "ModelInput",
    "OpenAIModel",
    "ReplayModel",
    "ScriptedModel",
    "ScriptedTurn",
]
