"""`RunSpans`: the spans of one run, opened and closed at the few points the driver calls.

Theory of operation: the driver holds one `RunSpans` per run (`observer_for`) and calls it
when the run begins (`begin`), after each transition (`transition`, an event of the run
span), around each model call (`chat`), around a handoff or an approval (`action`), around
each tool call (`tool_call`, in the task that runs the tool, with the tool span current)
and when the run ends or suspends (`end`). A run nested in this one (a handoff target, an
agent as a tool) gets `nested(child)`: its span nests under the handoff span, or under the
tool span current while the agent-as-tool runs.

Tracing never changes a run's outcome: the first exception this code raises is logged once
on the `helikon.otel` logger and the run goes on unobserved.

Names are the GenAI semantic conventions' (status "Development"), hard-coded so that no
release of `opentelemetry-semantic-conventions` is needed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer

from helikon._version import __version__
from helikon.core.errors import describe
from helikon.core.items import ToolCall, ToolResult, Usage
from helikon.core.state import (
    ApprovalDecisions,
    AwaitApproval,
    Cancel,
    Fail,
    Handoff,
    HandoffResult,
    ModelResponse,
)
from helikon.otel.content import Redact, messages_json, output_json, text

_log = logging.getLogger("helikon.otel")

OPERATION = "gen_ai.operation.name"
AGENT = "gen_ai.agent.name"
MODEL = "gen_ai.request.model"
CONVERSATION = "gen_ai.conversation.id"
PROVIDER = "gen_ai.provider.name"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
ERROR_TYPE = "error.type"
RUN_ID = "helikon.run.id"
RUN_STATUS = "helikon.run.status"
TRANSITION = "helikon.transition"


class ObservedRun(Protocol):
    """What the spans read of a run (`helikon.run.driver.Run` is one)."""

    @property
    def run_id(self) -> str: ...
    @property
    def agent_name(self) -> str: ...
    @property
    def depth(self) -> int: ...
    @property
    def config(self) -> Any: ...
    @property
    def agent(self) -> Any: ...
    @property
    def tools(self) -> Mapping[str, Any]: ...
    @property
    def ctx(self) -> Any: ...
    @property
    def state(self) -> Any: ...
    @property
    def suspended(self) -> bool: ...
    @property
    def finished(self) -> bool: ...
    @property
    def seq(self) -> int: ...
    @property
    def session(self) -> Any: ...
    def exported_text(self, text: str) -> str: ...


_tracers: dict[int, tuple[Any, Tracer]] = {}


def tracer_of(provider: Any) -> Tracer | None:
    """The tracer of `provider`, else of the global provider; None when that is the API's
    default (no SDK configured): then a run has no spans at all."""
    if provider is None:
        provider = trace.get_tracer_provider()
        if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
            return None
    cached = _tracers.get(id(provider))
    if cached is None or cached[0] is not provider:
        cached = (provider, provider.get_tracer("helikon", __version__))
        _tracers[id(provider)] = cached
    return cached[1]


def observer_for(run: ObservedRun) -> RunSpans | None:
    """The spans of `run`, or None when it has no tracer provider (see `tracer_of`)."""
    tracer = tracer_of(run.config.tracer_provider)
    return None if tracer is None else RunSpans(run, tracer)


def model_name(model: Any) -> str | None:
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else None


class Guard:
    """The first failure of the spans' own code, shared by a run and the runs nested in it."""

    __slots__ = ("failure",)

    def __init__(self) -> None:
        self.failure: Exception | None = None

    def report(self, exc: Exception, where: str) -> None:
        if self.failure is None:
            self.failure = exc
            _log.error(
                "OpenTelemetry spans failed in %s; the run goes on without spans",
                where,
                exc_info=exc,
            )


class RunSpans:
    """The spans of one run (see the module docstring)."""

    def __init__(
        self,
        run: ObservedRun,
        tracer: Tracer,
        *,
        parent: Context | None = None,
        guard: Guard | None = None,
    ) -> None:
        self.run = run
        self.tracer = tracer
        self.parent = parent  # None: the context current when the run begins
        self.guard = guard or Guard()
        self.span: Span | None = None
        self.context: Context | None = None
        self.ended = False
        self.handoff: Span | None = None
        self.content: bool = bool(run.config.otel_content)
        # Each text a span exports passes through the run's listener port, which redacts
        # it when the run redacts (helikon.run.listening: the one redaction exit).
        self.redact: Redact | None = run.exported_text

    # ------------------------------------------------------------ the run

    def begin(self) -> None:
        """Open the run's span (once; a no-op after)."""
        if self.span is not None or self.ended or self.guard.failure is not None:
            return
        try:
            self._begin()
        except Exception as exc:
            self.guard.report(exc, "begin")

    def _begin(self) -> None:
        run = self.run
        attributes: dict[str, Any] = {
            OPERATION: "invoke_agent",
            AGENT: run.agent_name,
            RUN_ID: run.run_id,
            "helikon.run.depth": run.depth,
            "helikon.chart": run.ctx.table.name,
            "helikon.chart.digest": run.ctx.table.digest,
        }
        model = model_name(run.agent.model)
        if model is not None:
            attributes[MODEL] = model
        if run.session is not None:  # the conversation the run continues
            attributes[CONVERSATION] = run.session.session_id
        if run.seq > 0:  # resumed from a snapshot or a store: not its first stretch
            attributes["helikon.run.resumed"] = True
        self.span = self.tracer.start_span(
            f"invoke_agent {run.agent_name}",
            context=self.parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        self.context = trace.set_span_in_context(self.span)

    def transition(self, record: Any) -> None:
        """One transition, as an event of the run span: its seq, the row, the guards."""
        if self.span is None:
            self.begin()
        if self.span is None or self.ended:
            return
        try:
            self.span.add_event(TRANSITION, transition_attributes(record))
        except Exception as exc:
            self.guard.report(exc, "transition")

    def end(self) -> None:
        """Close the run's span: completed, failed (with `error.type`), suspended, or
        abandoned (its stream was closed before it ended)."""
        if self.ended:
            return
        self.ended = True
        span, self.span = self.span, None
        if span is None or self.guard.failure is not None:
            return
        try:
            self._end(span)
        except Exception as exc:
            self.guard.report(exc, "end")

    def _end(self, span: Span) -> None:
        state = self.run.state
        _usage(span, state.output.usage if state.phase == "Done" else state.usage)
        if state.phase == "Done":
            span.set_attribute(RUN_STATUS, "completed")
        elif state.phase == "Failed":
            span.set_attribute(RUN_STATUS, "failed")
            self._failed(span, state.error)
        elif self.run.suspended:
            span.set_attribute(RUN_STATUS, "suspended")
        else:
            span.set_attribute(RUN_STATUS, "abandoned")
        span.end()

    def nested(self, child: ObservedRun) -> RunSpans:
        """The spans of a run nested in this one: under the open handoff span, else under
        the context current when it begins (the tool span of an agent run as a tool)."""
        parent = trace.set_span_in_context(self.handoff) if self.handoff is not None else None
        return RunSpans(child, self.tracer, parent=parent, guard=self.guard)

    # ------------------------------------------------------------ effects

    def chat(self, request: Any) -> Ending | None:
        """Open the span of one model call; end it with the call's outcome."""
        if self.span is None or self.guard.failure is not None:
            return None
        try:
            return self._chat(request)
        except Exception as exc:
            self.guard.report(exc, "chat")
            return None

    def _chat(self, request: Any) -> Ending:
        model = self.run.agent.model
        name = model_name(model)
        attributes: dict[str, Any] = {OPERATION: "chat", AGENT: self.run.agent_name}
        if name is not None:
            attributes[MODEL] = name
        if type(model).__module__.startswith("helikon.models.openai"):
            attributes[PROVIDER] = "openai"
        if self.content:
            attributes[INPUT_MESSAGES] = messages_json(request.items, self.redact)
            if request.instructions:
                attributes[SYSTEM_INSTRUCTIONS] = text(request.instructions, self.redact)
        span = self.tracer.start_span(
            f"chat {name}" if name else "chat",
            context=self.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )
        return Ending(self, span, self._chat_ended)

    def _chat_ended(self, span: Span, outcome: Any) -> None:
        if isinstance(outcome, ModelResponse):
            _usage(span, outcome.usage)
            span.set_attribute(FINISH_REASONS, (outcome.finish_reason,))
            if self.content:
                answer = output_json(outcome.items, outcome.finish_reason, self.redact)
                span.set_attribute(OUTPUT_MESSAGES, answer)
        else:
            self._stopped(span, outcome)

    def action(self, action: Any) -> Ending | None:
        """Open the span of a handoff or of waiting for approval (other actions have their
        own spans, or none); end it with what the action gave."""
        if self.span is None or self.guard.failure is not None:
            return None
        try:
            if isinstance(action, Handoff):
                return self._handoff(action)
            if isinstance(action, AwaitApproval):
                return self._approval(action)
        except Exception as exc:
            self.guard.report(exc, "action")
        return None

    def _handoff(self, action: Handoff) -> Ending:
        attributes = {
            AGENT: self.run.agent_name,
            "helikon.handoff.target": action.target,
            TOOL_CALL_ID: action.call_id,
        }
        span = self.tracer.start_span(
            f"helikon.handoff {action.target}", context=self.context, attributes=attributes
        )
        self.handoff = span
        return Ending(self, span, self._handoff_ended)

    def _handoff_ended(self, span: Span, outcome: Any) -> None:
        self.handoff = None
        if isinstance(outcome, HandoffResult):
            _usage(span, outcome.usage)
            if outcome.error is not None:
                self._failed(span, outcome.error)
        else:
            self._stopped(span, outcome)

    def _approval(self, action: AwaitApproval) -> Ending:
        attributes: dict[str, Any] = {
            AGENT: self.run.agent_name,
            "helikon.approval.pending": len(action.pending),
            "helikon.approval.tools": tuple(r.call.name for r in action.pending),
            "helikon.approval.call_ids": tuple(r.call.call_id for r in action.pending),
        }
        span = self.tracer.start_span(
            "helikon.await_approval", context=self.context, attributes=attributes
        )
        return Ending(self, span, self._approval_ended)

    def _approval_ended(self, span: Span, outcome: Any) -> None:
        if isinstance(outcome, ApprovalDecisions):
            approved = sum(1 for d in outcome.decisions if d.approved)
            span.set_attribute("helikon.approval.outcome", "decided")
            span.set_attribute("helikon.approval.approved", approved)
            span.set_attribute("helikon.approval.rejected", len(outcome.decisions) - approved)
        elif outcome is None and self.run.suspended:
            span.set_attribute("helikon.approval.outcome", "suspended")
        else:
            self._stopped(span, outcome)

    async def tool_call(
        self, call: ToolCall, invoke: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        """Run one tool call with its `execute_tool` span current, in the task that runs it."""
        span = self._tool_span(call) if self.guard.failure is None else None
        if span is None:
            return await invoke()
        with trace.use_span(span, end_on_exit=True, record_exception=False):
            try:
                result = await invoke()
            except BaseException as exc:
                self._guarded(self._raised, span, exc)
                raise
            self._guarded(self._tool_ended, span, result)
            return result

    def _tool_span(self, call: ToolCall) -> Span | None:
        if self.span is None:
            return None
        try:
            attributes: dict[str, Any] = {
                OPERATION: "execute_tool",
                AGENT: self.run.agent_name,
                TOOL_NAME: call.name,
                TOOL_CALL_ID: call.call_id,
                TOOL_TYPE: "function",
            }
            tool = self.run.tools.get(call.name)
            description = getattr(getattr(tool, "spec", None), "description", None)
            if description:
                attributes[TOOL_DESCRIPTION] = description
            if self.content:
                attributes[TOOL_ARGUMENTS] = text(call.arguments, self.redact)
            return self.tracer.start_span(
                f"execute_tool {call.name}", context=self.context, attributes=attributes
            )
        except Exception as exc:
            self.guard.report(exc, "tool_call")
            return None

    def _tool_ended(self, span: Span, result: ToolResult) -> None:
        if self.content:
            span.set_attribute(TOOL_RESULT, text(result.content, self.redact))
        if result.is_error:
            span.set_attribute(ERROR_TYPE, result.status)
            span.set_status(StatusCode.ERROR, "the tool answered with an error result")

    def _raised(self, span: Span, exc: BaseException) -> None:
        span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
        span.set_status(StatusCode.ERROR, text(str(exc), self.redact))

    # ------------------------------------------------------------ shared

    def _failed(self, span: Span, error: Any) -> None:
        span.set_attribute(ERROR_TYPE, error.kind)
        span.set_status(StatusCode.ERROR, text(describe(error), self.redact))

    def _stopped(self, span: Span, outcome: Any) -> None:
        """An effect that did not give its result: it failed, or the run was stopped."""
        if isinstance(outcome, (Fail, Cancel)):
            _usage(span, outcome.usage)
        if isinstance(outcome, Fail):
            self._failed(span, outcome.error)
        elif isinstance(outcome, Cancel):
            span.set_attribute(ERROR_TYPE, "cancelled")
            span.set_status(StatusCode.ERROR, text(outcome.reason, self.redact))
        else:
            span.set_attribute(ERROR_TYPE, "abandoned")
            span.set_status(StatusCode.ERROR, "the run's stream was closed during the call")

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            self.guard.report(exc, getattr(fn, "__name__", "span"))


class Ending:
    """An open span of an effect; `end(outcome)` closes it with what the effect gave (the
    next input, or None when the stream was closed during it)."""

    __slots__ = ("close", "span", "spans")

    def __init__(self, spans: RunSpans, span: Span, close: Callable[[Span, Any], None]) -> None:
        self.spans, self.span, self.close = spans, span, close

    def end(self, outcome: Any) -> None:
        try:
            if self.spans.guard.failure is None:
                self.close(self.span, outcome)
        except Exception as exc:
            self.spans.guard.report(exc, "end of an effect")
        finally:
            self.span.end()


def transition_attributes(record: Any) -> dict[str, Any]:
    """A transition as span event attributes: the seq, the input, the row (its id is the
    index every helikon view names it by), every guard checked with its value."""
    outcome = record.outcome
    attributes: dict[str, Any] = {
        "helikon.seq": record.seq,
        "helikon.input": record.input.kind,
        "helikon.source": record.state_before.phase,
        "helikon.target": outcome.next_state.phase,
        "helikon.action": outcome.next_action.kind,
    }
    match = record.match
    if match is not None:
        attributes["helikon.row"] = match.row.index
        attributes["helikon.guards"] = tuple(name for name, _ in match.checked)
        attributes["helikon.guard_values"] = tuple(held for _, held in match.checked)
    return attributes


def _usage(span: Span, usage: Usage) -> None:
    span.set_attribute(INPUT_TOKENS, usage.input_tokens)
    span.set_attribute(OUTPUT_TOKENS, usage.output_tokens)
