"""Setting up a chart module's agent as the command line asks: `run`, `debug` and `studio`.

A chart module defines `agent(model)` and, for offline runs, `script()` (the scripted model's
turns); optionally `deps()` (what its tools get as `context.deps`) and `EXAMPLE_INPUT`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from helikon.cli.loading import call, module_label
from helikon.cli.usage import UsageError
from helikon.core.errors import ModelCallFailed, ModelError
from helikon.export.console import safe_text
from helikon.models.base import ModelChunk, ModelInput
from helikon.models.names import model_named
from helikon.models.scripted import ScriptedModel
from helikon.run.config import RunContext


def add_agent_arguments(command: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """The arguments of commands that run an agent from a chart file: `run`, `debug`, `studio`.

    `optional` makes CHART optional (for commands that can replay a trace instead).
    """
    command.add_argument(
        "chart", nargs="?" if optional else None, help="a chart file (charts/triage.py) or module"
    )
    command.add_argument("--input", "-i", help="what to ask (default: the chart's example)")
    command.add_argument("--offline", action="store_true", help="use the scripted model")
    command.add_argument(
        "--model", help="model for a real endpoint: gpt-5-mini, openai:responses/gpt-5-mini"
    )


MODEL_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL")
"""Either one set means a real model: a local OpenAI-compatible server needs only the URL."""


def require_model(offline: bool, command: str) -> None:
    """Refuse to go on when `command` would call a real model and none is set up.

    Raises:
        UsageError: neither `--offline` nor OPENAI_API_KEY / OPENAI_BASE_URL.
    """
    if not offline and not model_set_up():
        raise UsageError(no_model_message(command))


def model_set_up() -> bool:
    """Whether the environment names a real model's server: a key, or a base URL."""
    return any(os.environ.get(name) for name in MODEL_VARIABLES)


def no_model_message(command: str) -> str:
    """The one line that says `helikon COMMAND` would call a real model but has none."""
    return (
        f"helikon {command} calls a real model: set OPENAI_API_KEY (or OPENAI_BASE_URL "
        "for an OpenAI-compatible server), or give --offline for the chart's scripted model"
    )


@dataclass(frozen=True)
class NoModel:
    """The model of a command that calls one only later, if at all (a replay: when a fork
    goes live), with none set up: each call fails with `no_model_message`, where it is made.
    """

    command: str

    async def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        for chunk in self._refuse():
            yield chunk

    def _refuse(self) -> list[ModelChunk]:
        raise ModelError(ModelCallFailed("unavailable", no_model_message(self.command)))


def scripted_note(offline: bool) -> str:
    """What to add to a command's first line so scripted output never passes for a model's."""
    return "  (scripted model, --offline)" if offline else ""


def model_for(module: Any, offline: bool, model_name: str | None, command: str) -> Any:
    """A real OpenAI-compatible model, or with `offline` the chart's scripted turns.

    Raises:
        UsageError: no real model is set up (`require_model`), `--model` with `--offline`,
            a model string that names no model, or an offline chart without `script()`.
    """
    if offline:
        if model_name:
            raise UsageError(f"--model {model_name!r} names a real model: drop it or --offline")
        if not hasattr(module, "script"):
            raise UsageError(
                f"{module_label(module)} has no offline script(): drop --offline and set "
                "OPENAI_API_KEY or OPENAI_BASE_URL"
            )
        return ScriptedModel(list(call(module, "script")))
    require_model(offline, command)
    return _real_model(model_name or os.environ.get("HELIKON_MODEL", "gpt-4o-mini"))


def _real_model(name: str) -> Any:
    try:
        return model_named(name)  # "gpt-5-mini", "openai:responses/gpt-5-mini", ...
    except ModuleNotFoundError as exc:
        if exc.name != "openai":
            raise
        raise UsageError(
            "a real model needs the openai package: pip install 'helikon[openai]' "
            "(or run with --offline)"
        ) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def approval_handler(mode: str) -> Any:
    """`ask` prompts y/n on the terminal; `all` / `none` decide without asking."""
    if mode == "all":
        return lambda request, context: True
    if mode == "none":
        return lambda request, context: False
    if mode == "ask" and sys.stdin.isatty():

        def ask(request: Any, context: Any) -> bool:
            call = request.call  # the model chose the name and arguments: show them escaped
            answer = input(f"  approve {safe_text(call.name)}({safe_text(call.arguments)})? [y/N] ")
            return answer.strip().lower() in ("y", "yes")

        return ask
    return None  # suspend: the run ends with RunSuspended


@dataclass(frozen=True)
class LiveAgent:
    """An agent a chart module defines, set up as the command line asked for a live run."""

    agent: Any
    text: str
    context: Any
    source: str


def live_agent(module: Any, args: argparse.Namespace, command: str, model: Any = None) -> LiveAgent:
    """The chart module's agent with the model (`model`, else as `args` choose), approvals
    and input `args` choose, for `helikon COMMAND`.

    Raises:
        UsageError: the module defines no agent, no model is set up (`model_for`), or there
            is nothing to ask it.
        LoadError: the module's agent(), script() or deps() raised.
    """

    if not hasattr(module, "agent"):
        raise UsageError(f"{module_label(module)} defines no agent(model) for helikon {command}")
    model = model or model_for(module, args.offline, args.model, command)
    agent = call(module, "agent", model)
    handler = approval_handler(args.approve)
    if handler is not None:
        agent = replace(agent, on_approval=handler)
    text = args.input or getattr(module, "EXAMPLE_INPUT", None)
    if not text:
        raise UsageError('give the agent something to do: --input "..."')
    return LiveAgent(agent, text, chart_context(module), chart_source(args.chart))


def chart_context(module: Any) -> RunContext[Any]:
    """The `RunContext` a chart module's runs get: its `deps()`, if it defines one."""
    return RunContext(call(module, "deps") if hasattr(module, "deps") else None)


def chart_source(chart: str) -> str:
    """How a trace names where its agent came from: a chart file's full path, or a module."""
    return str(Path(chart).resolve()) if Path(chart).is_file() else chart
