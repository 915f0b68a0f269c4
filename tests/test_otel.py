"""OpenTelemetry spans of runs (helikon.otel), read back from the SDK's InMemorySpanExporter.

Each test gives its run a tracer provider of its own (`RunConfig(tracer_provider=...)`); no
test sets the global provider, so every other run of the suite has no spans. Models are the
scripted one and `OpenAIModel` against the local OpenAI wire server; the MCP case uses the
real stdio server of tests/mcp_server.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from driver_support import drain, settle
from mcp_support import http_server, weather_station
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from helikon import Agent, FatalToolError, RunConfig, RunFailed, ScriptedModel, ToolCall, tool
from helikon.durable.sqlite import SqliteRunStore
from helikon.models.openai import Backoff, OpenAIModel
from helikon.run.guardrails import GuardrailResult, InputGuardrail
from helikon.testing import OpenAIServer, PlannedFailure, PlannedReply, PlannedToolCall
from helikon.testing.openai_plan import PlannedUsage
from helikon.trace import TraceWriter, read_trace

ROOT = Path(__file__).resolve().parent.parent


class Spans:
    """A tracer provider whose finished spans are kept in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def config(self, **options: Any) -> RunConfig:
        return RunConfig(tracer_provider=self.provider, **options)

    @property
    def finished(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.exporter.get_finished_spans())

    def named(self, name: str) -> ReadableSpan:
        found = [span for span in self.finished if span.name == name]
        assert len(found) == 1, f"{name!r}: {[s.name for s in self.finished]}"
        return found[0]

    def names(self) -> list[str]:
        return sorted(span.name for span in self.finished)


@pytest.fixture
def spans() -> Iterator[Spans]:
    kept = Spans()
    yield kept
    kept.provider.shutdown()


def parent_of(span: ReadableSpan, spans: Spans) -> ReadableSpan | None:
    if span.parent is None:
        return None
    found = [s for s in spans.finished if s.context.span_id == span.parent.span_id]
    assert len(found) == 1, f"the parent of {span.name!r} was not exported"
    return found[0]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def call(call_id: str, name: str, arguments: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments or {}))


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def broken(reason: str) -> str:
    """Always raises."""
    raise ValueError(reason)


FAST = Backoff(base_delay=0.0, max_delay=0.05)


# -- names, parents, kinds, attributes ---------------------------------------------------------


async def test_a_run_with_a_tool_has_its_spans_nested_with_the_conventions_names(
    spans: Spans, tmp_path: Path
) -> None:
    plan = [
        PlannedReply(
            tool_calls=[PlannedToolCall("add", '{"a": 2, "b": 3}', "c1")],
            usage=PlannedUsage(11, 4),
        ),
        PlannedReply(text="five", usage=PlannedUsage(20, 2)),
    ]
    with OpenAIServer(plan) as server:
        model = OpenAIModel.chat("gpt-test", base_url=server.base_url, api_key="k", backoff=FAST)
        agent = Agent("calc", model, tools=[add], config=spans.config())
        with TraceWriter(tmp_path / "run.jsonl") as writer:
            result = await agent.run("2+3?", trace=writer).collect()
        await model.aclose()
    assert result.final_output == "five"

    run = spans.named("invoke_agent calc")
    assert run.kind is SpanKind.INTERNAL and run.parent is None
    assert attrs(run)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(run)["gen_ai.agent.name"] == "calc"
    assert attrs(run)["gen_ai.request.model"] == "gpt-test"
    assert attrs(run)["helikon.run.status"] == "completed"
    assert attrs(run)["gen_ai.usage.input_tokens"] == 31
    assert run.status.status_code is StatusCode.UNSET

    chats = [s for s in spans.finished if s.name == "chat gpt-test"]
    assert len(chats) == 2
    for chat in chats:
        assert chat.kind is SpanKind.CLIENT
        assert parent_of(chat, spans) is run
        assert attrs(chat)["gen_ai.operation.name"] == "chat"
        assert attrs(chat)["gen_ai.provider.name"] == "openai"
        assert attrs(chat)["gen_ai.request.model"] == "gpt-test"
    first, second = sorted(chats, key=lambda s: s.start_time or 0)
    assert attrs(first)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert (
        attrs(first)["gen_ai.usage.input_tokens"],
        attrs(first)["gen_ai.usage.output_tokens"],
    ) == (11, 4)
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)

    executed = spans.named("execute_tool add")
    assert executed.kind is SpanKind.INTERNAL
    assert parent_of(executed, spans) is run
    assert attrs(executed)["gen_ai.operation.name"] == "execute_tool"
    assert attrs(executed)["gen_ai.tool.name"] == "add"
    assert attrs(executed)["gen_ai.tool.call.id"] == "c1"
    assert attrs(executed)["gen_ai.tool.description"] == "Add two numbers."
    assert executed.status.status_code is StatusCode.UNSET
    assert (first.end_time or 0) <= (executed.start_time or 0)

    # Each transition is an event of the run span, naming the row the trace names.
    trace = read_trace(tmp_path / "run.jsonl")
    rows = [(t.seq, t.row.index, t.row.checked) for t in trace.transitions()]
    events = [e for e in run.events if e.name == "helikon.transition"]
    seen = [
        (
            e.attributes["helikon.seq"],
            e.attributes["helikon.row"],
            tuple(
                zip(
                    e.attributes["helikon.guards"],
                    e.attributes["helikon.guard_values"],
                    strict=True,
                )
            ),
        )
        for e in events
        if e.attributes is not None
    ]
    assert seen == rows and len(rows) >= 3
    first_event = events[0].attributes or {}
    assert (first_event["helikon.input"], first_event["helikon.source"]) == (
        "start",
        "CallingModel",
    )


async def test_content_is_off_unless_the_run_opts_in_and_goes_through_redact(
    spans: Spans,
) -> None:
    def turns() -> ScriptedModel:
        return ScriptedModel([[call("c1", "add", {"a": 1, "b": 2})], "the sum is 3"])

    off = Agent("calc", turns(), tools=[add], instructions="be terse", config=spans.config())
    await off.run("secret question").collect()
    recorded = json.dumps([attrs(s) for s in spans.finished], default=str)
    for text in ("secret question", "be terse", "the sum is 3", '\\"a\\"', "gen_ai.input"):
        assert text not in recorded
    spans.exporter.clear()

    on = Agent(
        "calc",
        turns(),
        tools=[add],
        instructions="be terse",
        config=spans.config(otel_content=True, redact=lambda s: s.replace("secret", "[x]")),
    )
    await on.run("secret question").collect()
    chats = sorted((s for s in spans.finished if s.name == "chat"), key=lambda s: s.start_time or 0)
    sent = json.loads(attrs(chats[0])["gen_ai.input.messages"])
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": "[x] question"}]}]
    assert attrs(chats[0])["gen_ai.system_instructions"] == "be terse"
    answer = json.loads(attrs(chats[0])["gen_ai.output.messages"])
    assert answer[0]["parts"][0] == {
        "type": "tool_call",
        "id": "c1",
        "name": "add",
        "arguments": '{"a": 1, "b": 2}',
    }
    assert answer[0]["finish_reason"] == "tool_calls"
    later = json.loads(attrs(chats[1])["gen_ai.input.messages"])
    assert later[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": "3"}],
    }
    executed = spans.named("execute_tool add")
    assert attrs(executed)["gen_ai.tool.call.arguments"] == '{"a": 1, "b": 2}'
    assert attrs(executed)["gen_ai.tool.call.result"] == "3"
    assert "secret" not in json.dumps([attrs(s) for s in spans.finished], default=str)


# -- status on failure -------------------------------------------------------------------------


async def test_a_tool_error_result_marks_the_tool_span_and_the_run_goes_on(spans: Spans) -> None:
    model = ScriptedModel([[call("c1", "broken", {"reason": "disk full"})], "sorry"])
    agent = Agent("worker", model, tools=[broken], config=spans.config())
    assert (await agent.run("go").collect()).final_output == "sorry"
    executed = spans.named("execute_tool broken")
    assert executed.status.status_code is StatusCode.ERROR
    assert attrs(executed)["error.type"] == "errored"
    run = spans.named("invoke_agent worker")
    assert run.status.status_code is StatusCode.UNSET
    assert attrs(run)["helikon.run.status"] == "completed"


async def test_a_fatal_tool_error_fails_the_tool_span_and_the_run_span(spans: Spans) -> None:
    @tool
    def halt() -> str:
        """Stops everything."""
        raise FatalToolError("the vault is sealed")

    agent = Agent(
        "worker", ScriptedModel([[call("c1", "halt")]]), tools=[halt], config=spans.config()
    )
    events = await drain(agent.run("go"))
    assert isinstance(events[-1], RunFailed)
    executed = spans.named("execute_tool halt")
    assert executed.status.status_code is StatusCode.ERROR
    assert attrs(executed)["error.type"] == "FatalToolError"
    run = spans.named("invoke_agent worker")
    assert run.status.status_code is StatusCode.ERROR
    assert attrs(run)["error.type"] == events[-1].error.kind == "tool_failed"
    assert attrs(run)["helikon.run.status"] == "failed"
    assert "the vault is sealed" in (run.status.description or "")


async def test_a_provider_error_fails_the_chat_span(spans: Spans) -> None:
    failure = PlannedFailure(400, "bad request body", code="invalid_request")
    with OpenAIServer([failure]) as server:
        model = OpenAIModel.chat("gpt-test", base_url=server.base_url, api_key="k", backoff=FAST)
        agent = Agent("asker", model, config=spans.config())
        events = await drain(agent.run("hello"))
        await model.aclose()
    assert isinstance(events[-1], RunFailed)
    chat = spans.named("chat gpt-test")
    assert chat.status.status_code is StatusCode.ERROR
    assert attrs(chat)["error.type"] == "model_call_failed"
    assert "bad request body" in (chat.status.description or "")
    run = spans.named("invoke_agent asker")
    assert attrs(run)["error.type"] == "model_call_failed"
    assert parent_of(chat, spans) is run


async def test_a_tripped_guardrail_fails_the_run_span_before_any_chat(spans: Spans) -> None:
    guard = InputGuardrail("no_secrets", lambda text, ctx: GuardrailResult(True, "a secret"))
    agent = Agent(
        "guarded", ScriptedModel(["never"]), input_guardrails=[guard], config=spans.config()
    )
    events = await drain(agent.run("the password is hunter2"))
    assert isinstance(events[-1], RunFailed)
    assert spans.names() == ["invoke_agent guarded"]
    run = spans.named("invoke_agent guarded")
    assert run.status.status_code is StatusCode.ERROR
    assert attrs(run)["error.type"] == "guardrail_tripped"


async def test_a_cancelled_run_ends_its_tool_span_and_run_span_as_cancelled(
    spans: Spans,
) -> None:
    started, gate = asyncio.Event(), asyncio.Event()

    @tool
    async def wait() -> str:
        """Waits at the gate."""
        started.set()
        await gate.wait()
        return "never"

    agent = Agent(
        "waiter", ScriptedModel([[call("c1", "wait")]]), tools=[wait], config=spans.config()
    )
    stream = agent.run("go")
    running = asyncio.create_task(drain(stream))
    await started.wait()
    await settle()
    stream.cancel("user left")
    events = await running
    assert isinstance(events[-1], RunFailed)
    executed = spans.named("execute_tool wait")
    assert executed.status.status_code is StatusCode.ERROR
    assert attrs(executed)["error.type"] == "CancelledError"
    run = spans.named("invoke_agent waiter")
    assert attrs(run)["error.type"] == "cancelled"
    assert run.status.status_code is StatusCode.ERROR


# -- approvals ---------------------------------------------------------------------------------


@tool(needs_approval=True)
def transfer(to: str, amount: int) -> str:
    """Move money."""
    return f"sent {amount} to {to}"


async def test_a_suspension_ends_the_run_span_as_suspended_and_a_resume_opens_another(
    spans: Spans,
) -> None:
    model = ScriptedModel([[call("t1", "transfer", {"to": "ann", "amount": 5})], "done"])
    agent = Agent("bank", model, tools=[transfer], config=spans.config())
    suspended = await agent.run("pay ann").collect()
    assert suspended.suspended

    waited = spans.named("helikon.await_approval")
    first = spans.named("invoke_agent bank")
    assert parent_of(waited, spans) is first
    assert attrs(waited)["helikon.approval.outcome"] == "suspended"
    assert attrs(waited)["helikon.approval.tools"] == ("transfer",)
    assert attrs(first)["helikon.run.status"] == "suspended"
    assert first.status.status_code is StatusCode.UNSET
    assert spans.names() == ["chat", "helikon.await_approval", "invoke_agent bank"]
    spans.exporter.clear()

    decision = suspended.pending[0].approve()
    resumed = await agent.resume(suspended.snapshot, decisions=[decision]).collect()
    assert resumed.final_output == "done"
    again = spans.named("invoke_agent bank")
    assert attrs(again)["helikon.run.resumed"] is True
    assert attrs(again)["helikon.run.id"] == attrs(first)["helikon.run.id"]
    assert attrs(again)["helikon.run.status"] == "completed"
    assert parent_of(spans.named("execute_tool transfer"), spans) is again


async def test_an_approval_handler_answer_is_recorded_on_the_approval_span(spans: Spans) -> None:
    model = ScriptedModel([[call("t1", "transfer", {"to": "ann", "amount": 5})], "done"])
    agent = Agent(
        "bank",
        model,
        tools=[transfer],
        on_approval=lambda request, context: False,
        config=spans.config(),
    )
    await agent.run("pay ann").collect()
    waited = spans.named("helikon.await_approval")
    assert attrs(waited)["helikon.approval.outcome"] == "decided"
    assert (
        attrs(waited)["helikon.approval.approved"],
        attrs(waited)["helikon.approval.rejected"],
    ) == (0, 1)
    assert not [s for s in spans.finished if s.name == "execute_tool transfer"]


# -- nested runs -------------------------------------------------------------------------------


async def test_a_handoff_target_runs_inside_the_handoff_span(spans: Spans) -> None:
    support = Agent("support", ScriptedModel(["fixed it"]))
    front = Agent(
        "front",
        ScriptedModel([[call("h1", "transfer_to_support")]]),
        handoffs=[support],
        config=spans.config(),
    )
    assert (await front.run("help").collect()).final_output == "fixed it"
    outer = spans.named("invoke_agent front")
    handoff = spans.named("helikon.handoff support")
    inner = spans.named("invoke_agent support")
    assert parent_of(handoff, spans) is outer
    assert parent_of(inner, spans) is handoff
    assert attrs(handoff)["gen_ai.tool.call.id"] == "h1"
    assert attrs(inner)["helikon.run.depth"] == 1
    assert [parent_of(s, spans) for s in spans.finished if s.name == "chat"].count(inner) == 1


async def test_an_agent_as_a_tool_runs_inside_its_tool_span(spans: Spans) -> None:
    helper = Agent("helper", ScriptedModel(["42"]))
    boss = Agent(
        "boss",
        ScriptedModel([[call("a1", "helper", {"input": "answer?"})], "it is 42"]),
        tools=[helper.as_tool()],
        config=spans.config(),
    )
    assert (await boss.run("ask helper").collect()).final_output == "it is 42"
    executed = spans.named("execute_tool helper")
    inner = spans.named("invoke_agent helper")
    assert parent_of(executed, spans) is spans.named("invoke_agent boss")
    assert parent_of(inner, spans) is executed
    assert inner.context.trace_id == executed.context.trace_id


# -- the tool span is current: an MCP call carries it ---------------------------------------


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with http_server() as served:
        yield served


@pytest.mark.parametrize("transport", ["stdio", "http", "in-process"])
async def test_an_mcp_call_carries_the_tool_span_as_its_traceparent(
    spans: Spans, transport: str, url: str
) -> None:
    server = weather_station(transport, url, tool_filter=["traceparent"], needs_approval=False)
    async with server:
        agent = Agent(
            "tracer",
            ScriptedModel([[call("m1", "traceparent")], "ok"]),
            mcp_servers=[server],
            config=spans.config(),
        )
        result = await agent.run("which trace?").collect()
    sent = next(e for e in result.events if e.type == "tool_output_item")
    executed = spans.named("execute_tool traceparent")
    context = executed.context
    version, trace_id, span_id, flags = sent.item.content.split("-")
    assert (version, trace_id, span_id) == (
        "00",
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
    )
    assert int(flags, 16) & 1  # sampled


# -- off ---------------------------------------------------------------------------------------


def test_without_a_provider_a_run_has_no_observer() -> None:
    """No global provider is set in this process; and in one where opentelemetry cannot be
    imported, runs work and have no observer either."""
    from helikon.run.driver import Run

    assert Run(Agent("plain", ScriptedModel(["hi"]))).observer is None
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import asyncio\n"
        "from helikon import Agent, ScriptedModel\n"
        "from helikon.run.driver import Run\n"
        "agent = Agent('plain', ScriptedModel(['hi']))\n"
        "assert Run(agent).observer is None\n"
        "print(asyncio.run(agent.run('x').collect()).final_output)\n"
        "try:\n"
        "    import helikon.otel\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "hi",
        "helikon.otel needs opentelemetry-api: pip install 'helikon[otel]'",
    ]


class BrokenTracer:
    """A tracer whose every span fails to start."""

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("exporter on fire")


class BrokenProvider:
    def get_tracer(self, *args: Any, **kwargs: Any) -> BrokenTracer:
        return BrokenTracer()


async def test_spans_that_fail_never_fail_the_run(caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent(
        "calc",
        ScriptedModel([[call("c1", "add", {"a": 1, "b": 2})], "3"]),
        tools=[add],
        config=RunConfig(tracer_provider=BrokenProvider()),
    )
    assert (await agent.run("1+2").collect()).final_output == "3"
    failures = [r for r in caplog.records if r.name == "helikon.otel"]
    assert len(failures) == 1
    assert "exporter on fire" in str(failures[0].exc_info[1] if failures[0].exc_info else "")


GLOBAL_PROVIDER_RUN = """
import asyncio, json, sys
sys.path.insert(0, "tests")
from mcp_support import http_server, weather_station
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from helikon import Agent, ScriptedModel, ToolCall

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

async def main():
    server = weather_station("stdio", "", tool_filter=["traceparent"], needs_approval=False)
    async with server:
        model = ScriptedModel([[ToolCall("m1", "traceparent", "{}")], "ok"])
        agent = Agent("tracer", model, mcp_servers=[server])
        result = await agent.run("which trace?").collect()
    sent = next(e.item.content for e in result.events if e.type == "tool_output_item")
    spans = [
        [s.name, f"{s.context.span_id:016x}", s.parent and f"{s.parent.span_id:016x}"]
        for s in exporter.get_finished_spans()
    ]
    print(json.dumps({"sent": sent, "spans": spans}))

asyncio.run(main())
provider.shutdown()
"""


def test_with_the_global_provider_the_mcp_client_span_nests_under_the_tool_span() -> None:
    """In a process of its own (the global provider can be set once): a run with no
    `tracer_provider` uses the global one, and the MCP SDK's client span for `tools/call`
    is a child of the tool span, and is what the server receives as its parent."""
    done = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROVIDER_RUN],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    ids = {name: (span_id, parent) for name, span_id, parent in seen["spans"]}
    tool_id, tool_parent = ids["execute_tool traceparent"]
    assert tool_parent == ids["invoke_agent tracer"][0]
    client_id, client_parent = ids["MCP send tools/call traceparent"]
    assert client_parent == tool_id
    assert seen["sent"].split("-")[2] == client_id


async def test_a_sync_tool_in_its_worker_thread_sees_its_tool_span_as_current(
    spans: Spans,
) -> None:
    tracer = spans.provider.get_tracer("tests")

    @tool
    def lookup(key: str) -> str:
        """Looks a key up, traced by the tool itself."""
        with tracer.start_as_current_span("lookup db"):
            return key.upper()

    agent = Agent(
        "reader",
        ScriptedModel([[call("k1", "lookup", {"key": "a"})], "A"]),
        tools=[lookup],
        config=spans.config(),
    )
    assert (await agent.run("look a up").collect()).final_output == "A"
    assert parent_of(spans.named("lookup db"), spans) is spans.named("execute_tool lookup")


async def test_a_run_in_a_session_names_it_as_its_conversation(
    spans: Spans, tmp_path: Path
) -> None:
    with SqliteRunStore(tmp_path / "runs.db") as store:
        agent = Agent("chatty", ScriptedModel(["hi"]), config=spans.config())
        await agent.run("hello", store=store, session=store.session("s-7")).collect()
    run = spans.named("invoke_agent chatty")
    assert attrs(run)["gen_ai.conversation.id"] == "s-7"
    assert "gen_ai.conversation.id" not in attrs(spans.named("chat"))
