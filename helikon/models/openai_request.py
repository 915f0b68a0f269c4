"""What both OpenAI wire formats share when building a request from a `ModelInput`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import TypeVar

import openai

from helikon.core.items import CompactionSummary, Item, ModelSettings
from helikon.core.state import ModelRequest

T = TypeVar("T")

SUMMARY_PREFIX = "Summary of the conversation so far:\n"


def model_view(items: Sequence[Item]) -> Sequence[Item]:
    """The items the model sees: from the latest compaction summary on, if there is one."""
    for index in range(len(items) - 1, -1, -1):
        if isinstance(items[index], CompactionSummary):
            return items[index:]
    return items


def extra_instruction(request: ModelRequest) -> str | None:
    """The instruction appended after the conversation: the request's prompt, repair errors."""
    parts: list[str] = []
    if request.prompt:
        parts.append(request.prompt)
    if request.repair_errors:
        errors = "; ".join(request.repair_errors)
        parts.append(
            f"Your previous answer did not validate: {errors}. "
            "Answer again with JSON that matches the schema."
        )
    return "\n\n".join(parts) or None


def merged(settings: ModelSettings, defaults: ModelSettings) -> ModelSettings:
    """`settings`, with each field it leaves unset taken from `defaults`."""
    values = {}
    for name in (f.name for f in fields(ModelSettings)):
        own = getattr(settings, name)
        values[name] = own if own is not None else getattr(defaults, name)
    return ModelSettings(**values)


def given(value: T | None) -> T | openai.Omit:
    """`value`, or the client's "leave it out" marker when it is None."""
    return openai.omit if value is None else value
