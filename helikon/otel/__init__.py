"""OpenTelemetry spans of runs, per the GenAI semantic conventions (extra `otel`).

A run observed here gets an `invoke_agent {agent}` span; under it a `chat {model}` span per
model call (kind CLIENT, with usage and finish reasons), an `execute_tool {tool}` span per
tool call (current while the tool runs, so what the tool calls, an MCP client included,
nests under it and propagates its trace context), `helikon.handoff {target}` with the
target's run inside, and `helikon.await_approval`. Every transition is an event of the run
span naming its row, so spans line up with helikon's traces and run stores.

The driver asks `observer_for(run)` once per run (`helikon.run.observing` imports this
package lazily, only when `opentelemetry-api` is installed): None when the run has no
tracer provider (`RunConfig(tracer_provider=...)`) and none is set globally, so a run
without one does nothing more than that check. Content (messages, tool arguments and
results) is recorded only with `RunConfig(otel_content=True)`, through `RunConfig.redact`,
which the run's listener port applies (`helikon.run.listening`).
"""

from __future__ import annotations

try:
    from opentelemetry import trace as _trace  # noqa: F401  (the API; this is helikon.otel)
except ModuleNotFoundError as exc:  # say which extra, not just which module
    if exc.name is None or not exc.name.startswith("opentelemetry"):
        raise
    raise ModuleNotFoundError(
        "helikon.otel needs opentelemetry-api: pip install 'helikon[otel]'", name="opentelemetry"
    ) from exc

from helikon.otel.spans import ObservedRun, RunSpans, observer_for

__all__ = ["ObservedRun", "RunSpans", "observer_for"]
