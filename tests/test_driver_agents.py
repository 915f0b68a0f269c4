"""Several agents and the checks around a run: handoffs, agents as tools, guardrails, and
compaction of a long conversation.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from driver_support import drain, ends_once, settle, types

from helikon import (
    Agent,
    AgentUpdated,
    AssistantMessage,
    Cancelled,
    FatalToolError,
    FinalOutput,
    GuardrailResult,
    GuardrailTriggered,
    GuardrailTripped,
    HandoffItem,
    HandoffTo,
    InputGuardrail,
    MaxTurnsExceeded,
    MessageOutput,
    OutputGuardrail,
    RunCompleted,
    RunConfig,
    RunContext,
    RunError,
    RunFailed,
    Runner,
    RunSuspended,
    ScriptedModel,
    ScriptedTurn,
    TimedOut,
    TokenDelta,
    ToolCall,
    ToolOutputItem,
    ToolResult,
    Usage,
    UserMessage,
    tool,
)
from helikon.core import CompactionSummary, Failed, MaxAgentDepthExceeded
from helikon.core.codec import dumps


def usage(tokens: int) -> Usage:
    return Usage(input_tokens=tokens, output_tokens=tokens, total_tokens=2 * tokens, requests=1)


@tool
async def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def results(items: Any) -> list[ToolResult]:
    return [item for item in items if isinstance(item, ToolResult)]


# -- handoffs -------------------------------------------------------------------------------


async def test_a_handoff_transfers_control_and_forwards_the_targets_events() -> None:
    billing_model = ScriptedModel([ScriptedTurn([AssistantMessage("Refund issued.")], usage(20))])
    billing = Agent("Billing Team", billing_model, description="Refunds and invoices.")
    triage_model = ScriptedModel(
        [
            ScriptedTurn(
                [
                    ToolCall("l1", "lookup", '{"topic": "refunds"}'),
                    ToolCall("h1", "transfer_to_billing_team", "{}"),
                    ToolCall("l2", "lookup", '{"topic": "invoices"}'),
                ],
                usage(5),
            )
        ]
    )
    triage = Agent("triage", triage_model, tools=[lookup], handoffs=[billing])
    streaming = triage.run("I want a refund")

    result = await streaming.collect()

    offered = [spec.name for spec in triage_model.requests[0].tools]
    assert offered == ["lookup", "transfer_to_billing_team"]
    assert "Refunds and invoices." in triage_model.requests[0].tools[1].description
    assert result.final_output == "Refund issued."
    assert result.usage == usage(5) + usage(20)
    assert result.output == FinalOutput("Refund issued.", None, usage(5) + usage(20))
    ends_once(result.events, RunCompleted)
    handoff = next(e for e in result.events if isinstance(e, HandoffItem))
    assert (handoff.from_agent, handoff.to_agent) == ("triage", "Billing Team")
    assert json.loads(dumps(handoff))["from"] == "triage"
    kinds = types(result.events)
    assert kinds.index("handoff_item") < kinds.index("agent_updated")
    assert AgentUpdated("Billing Team") in result.events
    after = result.events[kinds.index("agent_updated") :]
    assert "".join(e.text for e in after if isinstance(e, TokenDelta)) == "Refund issued."
    spoken = [e.item for e in after if isinstance(e, MessageOutput)]
    assert spoken == [AssistantMessage("Refund issued.", "Billing Team")]
    outputs = {e.item.call_id: e.item for e in result.events if isinstance(e, ToolOutputItem)}
    for skipped in ("l1", "l2"):
        assert outputs[skipped].status == "skipped"
        assert outputs[skipped].content == "skipped: control transferred to Billing Team"
    assert outputs["h1"].status == "executed"
    seen_by_billing = list(billing_model.requests[0].items)
    assert seen_by_billing[0] == UserMessage("I want a refund")
    assert results(seen_by_billing) == [outputs["l1"], outputs["h1"], outputs["l2"]]


async def test_a_handoff_target_that_uses_tools_runs_its_own_loop() -> None:
    support = Agent(
        "support",
        ScriptedModel([[ToolCall("s1", "lookup", '{"topic": "wifi"}')], "Restart the router."]),
        tools=[lookup],
    )
    front = Agent(
        "front", ScriptedModel([[ToolCall("h1", "transfer_to_support", "{}")]]), handoffs=[support]
    )

    result = await front.run("wifi broken").collect()

    assert result.final_output == "Restart the router."
    assert ToolOutputItem(ToolResult("s1", "facts about wifi")) in result.events
    assert result.usage.requests == 3


async def test_a_failing_handoff_target_fails_the_run_with_its_error() -> None:
    broken = Agent("broken", ScriptedModel([]))
    front = Agent(
        "front", ScriptedModel([[ToolCall("h1", "transfer_to_broken", "{}")]]), handoffs=[broken]
    )
    streaming = front.run("hi")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error.kind == "model_call_failed"
    ends_once(streaming.events, RunFailed)


async def test_a_handoff_target_waiting_for_approval_ends_the_stream_once() -> None:
    @tool(needs_approval=True)
    async def refund(amount: int) -> str:
        """Refund an amount."""
        return "refunded"

    billing = Agent(
        "billing",
        ScriptedModel([[ToolCall("r1", "refund", '{"amount": 5}')], "Refunded."]),
        tools=[refund],
    )
    front = Agent(
        "front", ScriptedModel([[ToolCall("h1", "transfer_to_billing", "{}")]]), handoffs=[billing]
    )

    events = await drain(front.run("refund me"))

    ends_once(events, (RunSuspended, RunFailed))


async def test_a_tool_named_like_a_handoff_tool_is_refused_at_start() -> None:
    billing = Agent("billing", ScriptedModel(["hi"]))

    @tool
    async def transfer_to_billing() -> str:
        """Pretend to transfer."""
        return "no"

    agent = Agent("front", ScriptedModel(["hi"]), tools=[transfer_to_billing], handoffs=[billing])

    with pytest.raises(ValueError, match="transfer_to_billing"):
        agent.run("hi")


async def test_two_handoffs_to_agents_with_the_same_slug_are_refused_at_start() -> None:
    one = Agent("Billing Team", ScriptedModel(["hi"]))
    two = Agent("billing-team", ScriptedModel(["hi"]))
    agent = Agent("front", ScriptedModel(["hi"]), handoffs=[one, two])

    with pytest.raises(ValueError, match="transfer_to_billing_team"):
        agent.run("hi")


async def test_a_handoff_with_its_own_tool_name_is_offered_under_that_name() -> None:
    billing = Agent("billing", ScriptedModel(["Paid."]))
    model = ScriptedModel([[ToolCall("h1", "escalate", "{}")]])
    front = Agent("front", model, handoffs=[HandoffTo(billing, "escalate", "Escalate it.")])

    result = await front.run("hi").collect()

    assert [(s.name, s.description) for s in model.requests[0].tools] == [
        ("escalate", "Escalate it.")
    ]
    assert result.final_output == "Paid."


async def test_a_handoff_past_max_agent_depth_fails_with_max_agent_depth_exceeded() -> None:
    billing = Agent("billing", ScriptedModel(["never"]))
    front = Agent(
        "front",
        ScriptedModel([[ToolCall("h1", "transfer_to_billing", "{}")]]),
        handoffs=[billing],
        config=RunConfig(max_agent_depth=0),
    )
    streaming = front.run("hi")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == MaxAgentDepthExceeded(0, "billing")
    assert billing.model.requests == []  # type: ignore[attr-defined]
    ends_once(streaming.events, RunFailed)


async def test_a_chain_of_handoffs_is_bounded_by_max_agent_depth() -> None:
    third = Agent("third", ScriptedModel(["never"]))
    second = Agent(
        "second", ScriptedModel([[ToolCall("h2", "transfer_to_third", "{}")]]), handoffs=[third]
    )
    first = Agent(
        "first",
        ScriptedModel([[ToolCall("h1", "transfer_to_second", "{}")]]),
        handoffs=[second],
        config=RunConfig(max_agent_depth=1),
    )

    with pytest.raises(RunError) as raised:
        await first.run("hi").collect()

    assert raised.value.error == MaxAgentDepthExceeded(1, "third")


async def test_cancel_reaches_a_tool_of_the_handoff_target() -> None:
    started = asyncio.Event()
    cancelled: list[str] = []

    @tool
    async def stall() -> str:
        """Wait forever."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("stall")
            raise
        return "unreachable"

    target = Agent("target", ScriptedModel([[ToolCall("s1", "stall", "{}")]]), tools=[stall])
    front = Agent(
        "front", ScriptedModel([[ToolCall("h1", "transfer_to_target", "{}")]]), handoffs=[target]
    )
    before = asyncio.all_tasks()
    streaming = front.run("hi")
    events_task = asyncio.create_task(drain(streaming))

    await started.wait()
    streaming.cancel()
    events = await events_task

    assert cancelled == ["stall"]
    assert ends_once(events, RunFailed).error == Cancelled("cancelled")
    assert asyncio.all_tasks() == before


# -- agents as tools ------------------------------------------------------------------------


async def test_an_agent_as_a_tool_answers_the_call_and_its_usage_counts() -> None:
    researcher_model = ScriptedModel(
        [ScriptedTurn([AssistantMessage("Paris is the capital.")], usage(30))]
    )
    researcher = Agent("re-searcher", researcher_model, description="Finds facts.")
    as_tool = researcher.as_tool()
    model = ScriptedModel(
        [
            ScriptedTurn([ToolCall("r1", "re_searcher", '{"input": "capital?"}')], usage(5)),
            ScriptedTurn([AssistantMessage("It is Paris.")], usage(7)),
        ]
    )
    boss = Agent("boss", model, tools=[as_tool])

    result = await boss.run("What is the capital of France?").collect()

    assert as_tool.name == "re_searcher"
    assert as_tool.description == "Finds facts."
    assert result.final_output == "It is Paris."
    assert ToolOutputItem(ToolResult("r1", "Paris is the capital.")) in result.events
    assert list(researcher_model.requests[0].items) == [UserMessage("capital?")]
    assert result.usage == usage(5) + usage(30) + usage(7)
    assert "agent_updated" not in types(result.events), "a sub-agent is opaque to the stream"


async def test_a_failing_sub_agent_gives_an_error_result_to_the_caller() -> None:
    broken = Agent("broken", ScriptedModel([]))
    model = ScriptedModel([[ToolCall("b1", "broken", '{"input": "x"}')], "It failed."])
    boss = Agent("boss", model, tools=[broken.as_tool()])

    result = await boss.run("try").collect()

    assert result.final_output == "It failed."
    (answer,) = results(model.requests[1].items)
    assert answer.content.startswith("error: broken failed")


async def test_a_sub_agent_waiting_for_approval_gives_an_error_result_to_the_caller() -> None:
    """It cannot suspend its caller: its call's result says so, and the caller goes on."""

    @tool(needs_approval=True)
    async def refund(amount: int) -> str:
        """Refund an amount."""
        return "refunded"

    billing = Agent(
        "billing", ScriptedModel([[ToolCall("r1", "refund", '{"amount": 5}')]]), tools=[refund]
    )
    model = ScriptedModel([[ToolCall("b1", "billing", '{"input": "refund"}')], "Not now."])
    boss = Agent("boss", model, tools=[billing.as_tool()])

    result = await boss.run("refund me").collect()

    assert result.final_output == "Not now."
    (answer,) = results(model.requests[1].items)
    assert answer.content == (
        "error: billing waited for approval; an agent run as a tool cannot suspend: give it "
        "an on_approval handler"
    )


async def test_a_sub_agent_past_max_agent_depth_fails_the_run() -> None:
    helper = Agent("helper", ScriptedModel(["never"]))
    boss = Agent(
        "boss",
        ScriptedModel([[ToolCall("h1", "helper", '{"input": "x"}')], "never"]),
        tools=[helper.as_tool()],
        config=RunConfig(max_agent_depth=0),
    )

    with pytest.raises(RunError) as raised:
        await boss.run("go").collect()

    assert raised.value.error == MaxAgentDepthExceeded(0, "helper")
    assert helper.model.requests == []  # type: ignore[attr-defined]


async def test_cancel_reaches_a_tool_inside_a_sub_agent() -> None:
    started = asyncio.Event()
    cancelled: list[str] = []

    @tool
    async def stall() -> str:
        """Wait forever."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("stall")
            raise
        return "unreachable"

    helper = Agent("helper", ScriptedModel([[ToolCall("s1", "stall", "{}")]]), tools=[stall])
    boss = Agent(
        "boss",
        ScriptedModel(
            [
                [
                    ToolCall("h1", "helper", '{"input": "x"}'),
                    ToolCall("l1", "lookup", '{"topic": "a"}'),
                ]
            ]
        ),
        tools=[helper.as_tool(), lookup],
    )
    before = asyncio.all_tasks()
    streaming = boss.run("go")
    events_task = asyncio.create_task(drain(streaming))

    await started.wait()
    streaming.cancel()
    events = await events_task

    assert cancelled == ["stall"]
    assert ends_once(events, RunFailed).error == Cancelled("cancelled")
    assert asyncio.all_tasks() == before


def researcher_and_boss(other: Any, **config: Any) -> tuple[Agent, Agent]:
    """A boss whose one turn calls the researcher (as a tool) beside `other`."""
    researcher = Agent(
        "researcher", ScriptedModel([ScriptedTurn([AssistantMessage("Paris.")], usage(30))])
    )
    calls = [
        ToolCall("r1", "researcher", '{"input": "capital?"}'),
        ToolCall("o1", other.name, "{}"),
    ]
    boss = Agent(
        "boss",
        ScriptedModel([ScriptedTurn(calls, usage(5)), "never"]),
        tools=[researcher.as_tool(), other],
        config=RunConfig(**config),
    )
    return researcher, boss


def failed_usage(streaming: Any) -> Usage:
    run = streaming.run
    assert run is not None and run.state.phase == "Failed"
    assert run.usage == run.state.usage
    spent: Usage = run.usage
    return spent


async def test_a_sub_agents_usage_counts_when_a_fatal_tool_fails_the_batch() -> None:
    @tool
    async def explode() -> str:
        """Fail the run."""
        raise FatalToolError("disk on fire")

    # One call at a time, in batch order: the researcher finishes before explode starts.
    _, boss = researcher_and_boss(explode, parallel_tool_call_limit=1)
    streaming = boss.run("go")
    events = await drain(streaming)

    assert ends_once(events, RunFailed).error.kind == "tool_failed"
    run = streaming.run
    assert run is not None
    assert ToolResult("r1", "Paris.") in run.conversation.items()
    assert failed_usage(streaming) == usage(5) + usage(30)


async def test_a_sub_agents_usage_counts_when_the_run_times_out() -> None:
    @tool
    async def slow() -> str:
        """Take forever."""
        await asyncio.Event().wait()
        return "unreachable"

    _, boss = researcher_and_boss(slow, timeout=0.5)
    streaming = Runner.run_streamed(boss, "go")
    events = await drain(streaming)

    assert ends_once(events, RunFailed).error == TimedOut(0.5)
    run = streaming.run
    assert run is not None
    assert ToolResult("r1", "Paris.") in run.conversation.items()
    assert failed_usage(streaming) == usage(5) + usage(30)


async def test_a_sub_agents_usage_counts_when_the_run_is_cancelled() -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Take forever."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    _, boss = researcher_and_boss(slow, parallel_tool_call_limit=1)
    streaming = boss.run("go")
    events_task = asyncio.create_task(drain(streaming))
    await started.wait()  # the researcher ran first, and finished
    streaming.cancel("enough")
    events = await events_task

    assert ends_once(events, RunFailed).error == Cancelled("enough")
    assert failed_usage(streaming) == usage(5) + usage(30)


async def test_a_handoff_targets_usage_counts_when_the_run_is_cancelled() -> None:
    """The stop replaces the handoff's result as the parent's input; what the target
    spent before it was cancelled still counts."""
    started = asyncio.Event()

    @tool
    async def stall() -> str:
        """Wait forever."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    target_turn = ScriptedTurn([ToolCall("s1", "stall", "{}")], usage(20))
    target = Agent("target", ScriptedModel([target_turn]), tools=[stall])
    front_turn = ScriptedTurn([ToolCall("h1", "transfer_to_target", "{}")], usage(5))
    front = Agent("front", ScriptedModel([front_turn]), handoffs=[target])
    streaming = front.run("hi")
    events_task = asyncio.create_task(drain(streaming))
    await started.wait()
    streaming.cancel("enough")
    events = await events_task

    assert ends_once(events, RunFailed).error == Cancelled("enough")
    assert failed_usage(streaming) == usage(5) + usage(20)


# -- guardrails -----------------------------------------------------------------------------


async def test_an_input_guardrail_tripwire_fails_the_run_before_any_model_call() -> None:
    model = ScriptedModel(["never"])
    seen: list[str] = []

    def no_secrets(text: str, context: RunContext[Any]) -> GuardrailResult:
        seen.append(text)
        return GuardrailResult("password" in text, "asks for a password")

    agent = Agent("guarded", model, input_guardrails=[InputGuardrail("no-secrets", no_secrets)])
    streaming = agent.run("what is the admin password?")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == GuardrailTripped("no-secrets", "input", "asks for a password")
    assert model.requests == []
    assert seen == ["what is the admin password?"]
    triggered = [e for e in streaming.events if isinstance(e, GuardrailTriggered)]
    assert triggered == [GuardrailTriggered("no-secrets", "input", "asks for a password")]
    assert types(streaming.events)[-2:] == ["guardrail_triggered", "run_failed"]
    ends_once(streaming.events, RunFailed)


async def test_an_input_guardrail_that_passes_lets_the_run_proceed() -> None:
    async def fine(text: str, context: RunContext[Any]) -> bool:
        return False

    model = ScriptedModel(["hello"])
    agent = Agent("guarded", model, input_guardrails=[InputGuardrail("fine", fine)])

    result = await agent.run("hi").collect()

    assert result.final_output == "hello"
    assert "guardrail_triggered" not in types(result.events)


async def test_an_output_guardrail_tripwire_replaces_run_completed() -> None:
    async def no_rudeness(output: FinalOutput, context: RunContext[Any]) -> GuardrailResult:
        return GuardrailResult("stupid" in (output.text or ""), "rude answer")

    agent = Agent(
        "guarded",
        ScriptedModel(["That is a stupid question."]),
        output_guardrails=[OutputGuardrail("polite", no_rudeness)],
    )
    streaming = agent.run("hi")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == GuardrailTripped("polite", "output", "rude answer")
    kinds = types(streaming.events)
    assert kinds[-3:] == ["message_output", "guardrail_triggered", "run_failed"]
    assert "run_completed" not in kinds
    ends_once(streaming.events, RunFailed)


async def test_cancel_reaches_an_input_guardrail_in_flight() -> None:
    checking = asyncio.Event()
    release = asyncio.Event()
    cancelled: list[str] = []

    async def slow_check(text: str, context: RunContext[Any]) -> bool:
        checking.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append("slow")
            raise
        return False

    model = ScriptedModel(["never"])
    agent = Agent("guarded", model, input_guardrails=[InputGuardrail("slow", slow_check)])
    streaming = agent.run("hi")
    events_task = asyncio.create_task(drain(streaming))

    await checking.wait()
    streaming.cancel()
    await settle()
    stopped = events_task.done()
    release.set()  # let a guardrail the cancel did not reach finish, so the test ends
    events = await events_task

    assert stopped, "cancel() did not stop the guardrail in flight"
    assert cancelled == ["slow"]
    assert ends_once(events, RunFailed).error == Cancelled("cancelled")
    assert model.requests == []


async def test_cancel_reaches_an_output_guardrail_in_flight() -> None:
    checking = asyncio.Event()
    release = asyncio.Event()
    cancelled: list[str] = []

    async def slow_check(output: FinalOutput, context: RunContext[Any]) -> bool:
        checking.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append("slow")
            raise
        return False

    agent = Agent(
        "guarded",
        ScriptedModel(["hello"]),
        output_guardrails=[OutputGuardrail("slow", slow_check)],
    )
    streaming = agent.run("hi")
    events_task = asyncio.create_task(drain(streaming))

    await checking.wait()
    streaming.cancel()
    await settle()
    stopped = events_task.done()
    release.set()  # let a guardrail the cancel did not reach finish, so the test ends
    events = await events_task

    assert ends_once(events, RunFailed).error == Cancelled("cancelled")
    assert stopped, "cancel() did not stop the guardrail in flight"
    assert cancelled == ["slow"]


async def test_a_cancel_during_the_output_guardrail_keeps_the_last_calls_usage() -> None:
    checking = asyncio.Event()

    async def slow_check(output: FinalOutput, context: RunContext[Any]) -> bool:
        checking.set()
        await asyncio.Event().wait()  # until cancelled
        return False

    model = ScriptedModel([ScriptedTurn([AssistantMessage("hello")], usage(30))])
    agent = Agent("guarded", model, output_guardrails=[OutputGuardrail("slow", slow_check)])
    streaming = agent.run("hi")
    events_task = asyncio.create_task(drain(streaming))
    await checking.wait()
    streaming.cancel()
    events = await events_task

    assert ends_once(events, RunFailed).error == Cancelled("cancelled")
    assert streaming.run is not None and streaming.run.usage == usage(30)


async def test_a_cancel_during_the_output_guardrail_lands_in_the_checking_phase() -> None:
    """The check is the CheckingOutput phase's action: a stop during it is that phase's
    input (as during any action), after the answer was kept and streamed."""
    checking = asyncio.Event()

    async def slow_check(output: FinalOutput, context: RunContext[Any]) -> bool:
        checking.set()
        await asyncio.Event().wait()  # until cancelled
        return False

    model = ScriptedModel([ScriptedTurn([AssistantMessage("hello")], usage(30))])
    agent = Agent("guarded", model, output_guardrails=[OutputGuardrail("slow", slow_check)])
    streaming = agent.run("hi")
    events_task = asyncio.create_task(drain(streaming))
    await checking.wait()
    run = streaming.run
    assert run is not None and run.state.phase == "CheckingOutput"
    streaming.cancel()
    events = await events_task

    assert types(events)[-2:] == ["message_output", "run_failed"]
    assert run.state == Failed(Cancelled("cancelled"), usage(30))
    assert [item.content for item in run.conversation.items()][-1] == "hello"


async def test_a_failed_runs_error_carries_what_it_spent() -> None:
    model = ScriptedModel([ScriptedTurn([ToolCall("l1", "lookup", '{"topic": "x"}')], usage(7))])
    agent = Agent("looping", model, tools=[lookup], config=RunConfig(max_turns=1))
    with pytest.raises(RunError) as raised:
        await agent.run("go").collect()
    assert raised.value.error == MaxTurnsExceeded(1)
    assert raised.value.usage == usage(7)


# -- compaction -----------------------------------------------------------------------------


async def test_compaction_summarises_and_the_next_call_sees_the_summary_onward() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn([ToolCall("l1", "lookup", '{"topic": "tides"}')], usage(600)),
            ScriptedTurn([AssistantMessage("Summary: tides were looked up.")], usage(50)),
            ScriptedTurn([AssistantMessage("High tide is at noon.")], usage(60)),
        ]
    )
    agent = Agent("sailor", model, tools=[lookup], config=RunConfig(compaction_threshold=1000))
    streaming = agent.run("When is high tide?")

    result = await streaming.collect()

    assert result.final_output == "High tide is at noon."
    turn, compact, after = model.requests
    assert turn.request.purpose == "turn"
    assert compact.request.purpose == "compact"
    assert compact.tools == ()
    assert compact.request.prompt
    assert ToolResult("l1", "facts about tides") in list(compact.items)
    assert list(after.items) == [CompactionSummary("Summary: tides were looked up.")]
    assert after.request.purpose == "turn"
    run = streaming.run
    assert run is not None
    log = run.conversation.items()
    assert log[:3] == (
        UserMessage("When is high tide?"),
        ToolCall("l1", "lookup", '{"topic": "tides"}'),
        ToolResult("l1", "facts about tides"),
    )
    assert log[3] == CompactionSummary("Summary: tides were looked up.")
    assert result.usage == usage(600) + usage(50) + usage(60)


async def test_no_compaction_below_the_threshold() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn([ToolCall("l1", "lookup", '{"topic": "tides"}')], usage(10)),
            "Noon.",
        ]
    )
    agent = Agent("sailor", model, tools=[lookup], config=RunConfig(compaction_threshold=1000))

    await agent.run("When?").collect()

    assert [r.request.purpose for r in model.requests] == ["turn", "turn"]


# -- handoffs by name -----------------------------------------------------------------------


def transfer(to: str, call_id: str = "h") -> ToolCall:
    return ToolCall(call_id, f"transfer_to_{to}", "{}")


async def test_a_handoff_by_name_closes_a_cycle_and_the_depth_limit_bounds_it() -> None:
    """triage hands off to billing, billing back to triage by name: a cycle that
    `max_agent_depth` ends instead of letting it run forever."""
    billing = Agent("billing", ScriptedModel([[transfer("triage")]] * 10), handoffs=["triage"])
    triage = Agent(
        "triage",
        ScriptedModel([[transfer("billing")]] * 10),
        handoffs=[billing],
        config=RunConfig(max_agent_depth=3),
    )
    events = await drain(triage.run("help"))

    failed = ends_once(events, RunFailed)
    assert failed.error == MaxAgentDepthExceeded(3, "triage")
    updated = [event.agent for event in events if isinstance(event, AgentUpdated)]
    assert updated == ["billing", "triage", "billing"]


async def test_a_handoff_by_name_reaches_the_agent_of_that_name() -> None:
    billing = Agent(
        "billing", ScriptedModel([[transfer("triage")]]), handoffs=[HandoffTo("triage")]
    )
    triage = Agent(
        "triage",
        ScriptedModel([[transfer("billing")], "Back at triage: done."]),
        handoffs=[billing],
    )
    # billing hands back to triage, a run of its own that answers.
    result = await triage.run("help").collect()
    assert result.final_output == "Back at triage: done."


def test_an_unknown_or_ambiguous_handoff_name_is_refused_when_the_run_starts() -> None:
    lost = Agent("billing", ScriptedModel([]), handoffs=["refunds"])
    with pytest.raises(ValueError, match="agent 'billing': handoff to 'refunds': no agent"):
        Agent("triage", ScriptedModel([]), handoffs=[lost]).run("hi")
    twins = [Agent("twin", ScriptedModel([])), Agent("twin", ScriptedModel([]))]
    one, other = (Agent(f"a{i}", ScriptedModel([]), handoffs=[t]) for i, t in enumerate(twins))
    with pytest.raises(ValueError, match="two different agents named 'twin'"):
        Agent("root", ScriptedModel([]), handoffs=[one, other]).run("hi")
