"""`TransitionCtx`: the fixed facts a transition reads (limits, tools, output type, table).

A context is built once per run (the driver derives it from the agent and its `RunConfig`)
and passed unchanged to every `transition`. The model requests a run issues are computed
here once, so a transition allocates none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from helikon.core.items import ToolCall
from helikon.core.state import CallModel, ModelRequest
from helikon.core.table import TransitionTable

Permission = Literal["allow", "deny", "ask"]
_STRICTNESS: Mapping[str, int] = {"allow": 0, "ask": 1, "deny": 2}

COMPACT_PROMPT = (
    "Summarise the conversation so far for your own later use: the user's goal, what has "
    "been done, every fact and tool result still needed, and what remains to do."
)


def strictest(*permissions: Permission) -> Permission:
    """The most restrictive of several permissions: deny over ask over allow."""
    return max(permissions, key=_STRICTNESS.__getitem__)


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """The configured output type: its JSON schema and a pure validator for model text."""

    name: str
    schema: Mapping[str, Any]
    adapter: TypeAdapter[Any]

    @classmethod
    def of(cls, output_type: Any) -> OutputSpec:
        """The spec of `output_type`, built once per type: a pydantic adapter and its schema
        cost far more than a run's turns (about 130 us here), and every run needs them."""
        try:
            return _output_spec(output_type)
        except TypeError:  # an unhashable type annotation: build it every time
            return _build_output_spec(output_type)

    def validate(self, text: str) -> tuple[Any, tuple[str, ...]]:
        """(the value in JSON form, ()) when `text` is valid, else (None, the errors)."""
        try:
            value = self.adapter.validate_json(text)
        except ValidationError as exc:
            return None, tuple(_describe(err) for err in exc.errors(include_url=False))
        return self.adapter.dump_python(value, mode="json"), ()

    def response_format(self) -> dict[str, Any]:
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": dict(self.schema), "strict": True},
        }


def _build_output_spec(output_type: Any) -> OutputSpec:
    adapter: TypeAdapter[Any] = TypeAdapter(output_type)
    name = getattr(output_type, "__name__", "output")
    return OutputSpec(name, adapter.json_schema(), adapter)


_output_spec = functools.lru_cache(maxsize=256)(_build_output_spec)


def _describe(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "(root)"
    return f"{where}: {error['msg']}"


@dataclass(frozen=True, slots=True)
class TransitionCtx:
    """Everything a transition may read besides the state and the input.

    Args:
        agent: the agent's name, used in handoff events and results.
        max_turns: turns allowed, model calls in CallingModel and custom model-calling
            phases (docs/semantics.md, "Turns").
        token_budget: total tokens the run may spend; None for no budget.
        compaction_threshold: context tokens at which the loop compacts; None never compacts.
        tools: every tool's name with its static permission (the tool's and the run's policy).
        handoffs: handoff tool name -> target agent name.
        call_policy: an optional pure per-call permission (e.g. `needs_approval(args)`);
            its answer is combined with `tools` by `strictest`.
        output: the output type's spec, or None for a plain-text run.
        prompts: extra instructions for model-calling phases, by phase name.
        output_guardrails: names of the agent's output guardrails: with any, the answer
            waits in CheckingOutput for their verdict before the run completes.
        input_guardrails: names of the agent's input guardrails: with any, on a chart that
            checks its input as rows, the run's start waits in CheckingInput for their
            verdict.
        table: the compiled chart (keyword only): `DEFAULT_TABLE` for helikon's default
            loop. The run layer picks it from the agent (`Agent.chart`).
    """

    agent: str = "agent"
    max_turns: int = 16
    token_budget: int | None = None
    compaction_threshold: int | None = None
    tools: Mapping[str, Permission] = field(default_factory=dict)
    handoffs: Mapping[str, str] = field(default_factory=dict)
    call_policy: Callable[[ToolCall], Permission | None] | None = None
    output: OutputSpec | None = None
    prompts: Mapping[str, str] = field(default_factory=dict)
    output_guardrails: tuple[str, ...] = ()
    input_guardrails: tuple[str, ...] = ()
    table: TransitionTable = field(kw_only=True)
    requests: Mapping[str, ModelRequest] = field(init=False, repr=False, compare=False)
    calls: Mapping[str, CallModel] = field(init=False, repr=False, compare=False)
    restricted: bool = field(init=False, repr=False, compare=False)
    asks: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        requests = self._requests()
        object.__setattr__(self, "requests", MappingProxyType(requests))
        calls = {phase: CallModel(request) for phase, request in requests.items()}
        object.__setattr__(self, "calls", calls)  # read-only by contract: a proxy costs a call
        policy = self.call_policy is not None
        object.__setattr__(self, "asks", policy or "ask" in self.tools.values())
        object.__setattr__(
            self, "restricted", policy or any(p != "allow" for p in self.tools.values())
        )

    def _requests(self) -> dict[str, ModelRequest]:
        schema = self.output.response_format() if self.output else None
        prompts = {**self.table.prompts, **self.prompts}
        requests = {
            "CallingModel": ModelRequest("turn", prompt=prompts.get("CallingModel")),
            "Finalizing": ModelRequest("finalize", tools=False, response_format=schema),
            "Compacting": ModelRequest(
                "compact", tools=False, prompt=prompts.get("Compacting", COMPACT_PROMPT)
            ),
        }
        for phase, prompt in prompts.items():
            requests.setdefault(phase, ModelRequest(phase, tools=False, prompt=prompt))
        return requests

    def request_for(self, phase: str) -> ModelRequest:
        """The model request a model-calling phase issues."""
        request = self.requests.get(phase)
        return request if request is not None else ModelRequest(phase, tools=False)

    def call_for(self, phase: str) -> CallModel:
        """The `CallModel` action of a model-calling phase (built once per context)."""
        call = self.calls.get(phase)
        return call if call is not None else CallModel(self.request_for(phase))

    def permission(self, call: ToolCall) -> Permission:
        """The call's permission: the tool's static one, tightened by `call_policy`.

        A handoff cannot wait for approval, so "ask" on a handoff call is "deny": it fails
        closed rather than transferring control unapproved.
        """
        static = self.tools.get(call.name, "allow")
        said = None if self.call_policy is None else self.call_policy(call)
        permission = static if said is None else strictest(static, said)
        if permission == "ask" and call.name in self.handoffs:
            return "deny"
        return permission

    def repair_request(self, errors: tuple[str, ...]) -> ModelRequest:
        schema = self.output.response_format() if self.output else None
        return ModelRequest("repair", tools=False, response_format=schema, repair_errors=errors)
