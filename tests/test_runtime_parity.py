"""Parity of the two runtimes: the same scripted scenarios run by the in-process driver
(`agent.run` / `agent.resume` with a run store) and by the Temporal runtime (a real dev
server, `temporal_address`, shared by the session, and a helikon worker per scenario), each
writing to a store of its own; the event streams and what the two stores hold afterwards
must be the same, but for the normalisations tests/parity_support.py names and explains.

Scenarios: tools (a parallel pair, a limit, denied, erring, fatal), handoffs and agents as
tools (and their depth limit, the child token budget, their parent's config), structured
output (repaired, invalid), guardrails, max turns, compaction, model errors,
continue-as-new, tool sources (MCP), every chart of charts/ (custom phases, an effect
phase), failing effects, what tools and effects are given, on SQLite and PostgreSQL stores;
and redaction, which the Temporal runtime refuses (a local run is checked against its own
store instead).
Approvals are in tests/test_runtime_parity_approvals.py, stops (cancel, timeout) in
tests/test_runtime_parity_stops.py. A scenario whose runtimes diverge is a finding, marked
`diverges(...)` (a strict xfail saying how).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from pydantic import JsonValue

pytest.importorskip("temporalio")

import parity_support
from parity_support import (
    WAIT,
    Input,
    Make,
    Stores,
    assert_same,
    assert_streams,
    both,
    drained,
    ended,
    new_queue,
    postgres_stores_at,
    run_locally,
    run_on_temporal,
)
from temporal_agents import (
    City,
    budget_manager,
    fatal_agent,
    guarded_agent,
    looping_agent,
    manager_agent,
    station_agent,
    structured_agent,
    triage_agent,
    weather_agent,
)
from temporalio.client import Client
from temporalio.service import RPCError

from helikon import (
    Agent,
    EffectContext,
    FatalToolError,
    InputGuardrail,
    OutputGuardrail,
    RunConfig,
    RunContext,
    ScriptedModel,
    ToolCall,
    tool,
)
from helikon.core.items import AssistantMessage, UserMessage
from helikon.durable import RunStore, SqliteRunStore
from helikon.run.chart_effects import Effect
from helikon.temporal import (
    RedactionUnsupported,
    TemporalOptions,
    events,
    helikon_worker,
    outcome,
    start_run,
)
from helikon.tools import ToolContext, ToolPolicy

# The fixtures every parity module takes, written once in parity_support.
client, run_id, stores = parity_support.client, parity_support.run_id, parity_support.stores


@pytest.fixture
def postgres_stores(postgres_url: str) -> Iterator[Stores]:
    with postgres_stores_at(postgres_url) as opened:
        yield opened


# ---------------------------------------------------------------- scenarios


def compacting_agent() -> Agent:
    """A tool result over the compaction threshold: the model summarises (Compacting),
    then answers from the summary."""
    script = [
        [ToolCall("c1", "weather", '{"city": "Oslo"}')],
        "Asked for the weather in Oslo: sunny.",
        "Sunny in Oslo.",
    ]
    return replace(weather_agent(compaction_threshold=1), model=ScriptedModel(script))


def mixed_manager() -> Agent:
    """One turn that asks a researcher agent as a tool and calls a plain tool beside it."""
    manager = manager_agent()
    weather = weather_agent().tools[0]
    script = [
        [
            ToolCall("a1", "researcher", '{"input": "where is Paris?"}'),
            ToolCall("w1", "weather", '{"city": "Paris"}'),
        ],
        "Paris is in France, and sunny.",
    ]
    return replace(manager, model=ScriptedModel(script), tools=[*manager.tools, weather])


def fatal_batch() -> Agent:
    """A batch whose second call fails the run (`FatalToolError`) once the first one has
    finished: the failure keeps the finished call's result."""
    first_done = asyncio.Event()

    @tool(read_only=True)
    async def quick() -> str:
        """Quick."""
        first_done.set()
        return "quick done"

    @tool
    async def launch() -> str:
        """Launch."""
        await first_done.wait()
        await asyncio.sleep(0.2)  # the first call's result lands first on Temporal too
        raise FatalToolError("the launch pad is gone")

    script = [[ToolCall("q1", "quick", "{}"), ToolCall("f1", "launch", "{}")], "Launched."]
    return Agent(name="fatal", model=ScriptedModel(script), tools=[quick, launch])


def nested(answers: list[Any], call: str, **options: Any) -> Agent:
    """A manager that asks a researcher (answering `answers`, built with `options`) as a
    tool with `call`'s arguments, then answers; its researcher's end is what is compared."""
    researcher = Agent(name="researcher", model=ScriptedModel(answers), **options)
    script = [[ToolCall("a1", "researcher", call)], "So says the researcher."]
    return Agent(name="manager", model=ScriptedModel(script), tools=[researcher.as_tool()])


def measuring(handoff: bool = False, **config: Any) -> Agent:
    """A manager (with `config`) that asks a researcher as a tool, or hands off to it; the
    researcher, of the default config, measures with a tool of its own, then answers."""

    @tool(read_only=True)
    def measure() -> str:
        """Measure."""
        return "42 km"

    answers = [[ToolCall("m1", "measure", "{}")], "42 km"]
    researcher = Agent(name="researcher", model=ScriptedModel(answers), tools=[measure])
    if handoff:
        script: list[Any] = [[ToolCall("h1", "transfer_to_researcher", "{}")]]
        nesting: dict[str, Any] = {"handoffs": [researcher]}
    else:
        script = [[ToolCall("a1", "researcher", '{"input": "how far?"}')], "42 km, they say."]
        nesting = {"tools": [researcher.as_tool()]}
    return Agent(name="manager", model=ScriptedModel(script), config=RunConfig(**config), **nesting)


def guarded_handoff(where: str) -> Agent:
    """triage_agent with guardrails on "bill": an output guardrail on triage, or an input
    or an output guardrail on its target, billing."""
    trips_input = InputGuardrail("no_bill", lambda text, context: "bill" in text)
    trips_output = OutputGuardrail("no_bill", lambda output, context: "bill" in output.text)
    billing = Agent(
        name="billing",
        model=ScriptedModel(["Your bill is 10 EUR."]),
        input_guardrails=[trips_input] if where == "target-input" else [],
        output_guardrails=[trips_output] if where == "target-output" else [],
    )
    script = [[ToolCall("h1", "transfer_to_billing", "{}")]]
    return Agent(
        name="triage",
        model=ScriptedModel(script),
        handoffs=[billing],
        output_guardrails=[trips_output] if where == "output" else [],
    )


def failing_target() -> Agent:
    """Hands off to billing, whose model has no answer."""
    billing = Agent(name="billing", model=ScriptedModel([]))
    script = [[ToolCall("h1", "transfer_to_billing", "{}")]]
    return Agent(name="triage", model=ScriptedModel(script), handoffs=[billing])


def miscalling_agent() -> Agent:
    """Calls a tool it does not have, and one with arguments that are not JSON."""
    weather = weather_agent().tools[0]
    script = [
        [
            ToolCall("u1", "umbrella", "{}"),
            ToolCall("w1", "weather", '{"city": '),
        ],
        "Sorry.",
    ]
    return Agent(name="clumsy", model=ScriptedModel(script), tools=[weather])


def erring_agent() -> Agent:
    """A tool that raises (an error result the model reads), then an answer."""

    @tool
    def broken(path: str) -> str:
        """Break.

        Args:
            path: where.
        """
        raise ValueError(f"no such file: {path}")

    script = [[ToolCall("b1", "broken", '{"path": "a.txt"}')], "It is broken."]
    return Agent(name="erring", model=ScriptedModel(script), tools=[broken])


async def test_tools_in_parallel(
    client: Client, stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """One call, then a parallel pair, then an answer."""
    await both(client, stores, run_id, weather_agent, "weather?")
    assert ended(stores[0], run_id) == "Done"
    assert_same(*stores)


@pytest.mark.parametrize(
    ("make", "text", "ends"),
    [
        pytest.param(triage_agent, "my bill?", "Done", id="handoff"),
        pytest.param(
            lambda: triage_agent(max_agent_depth=0),
            "bill?",
            "max_agent_depth_exceeded",
            id="handoff-too-deep",
        ),
        pytest.param(manager_agent, "where is Paris?", "Done", id="agent-as-tool"),
        pytest.param(
            lambda: manager_agent(max_agent_depth=0),
            "where?",
            "max_agent_depth_exceeded",
            id="agent-as-tool-too-deep",
        ),
        pytest.param(
            lambda: budget_manager(100), "how far?", "budget_exceeded", id="child-token-budget"
        ),
        pytest.param(structured_agent, "a city", "Done", id="structured-output-repaired"),
        pytest.param(
            weather_agent,
            [
                UserMessage("I am off to Oslo."),
                AssistantMessage("Have a good trip.", agent="weather"),
                UserMessage("weather?"),
            ],
            "Done",
            id="items-as-input",
        ),
        pytest.param(
            lambda: guarded_agent("fine"),
            "something forbidden",
            "guardrail_tripped",
            id="input-guardrail",
        ),
        pytest.param(
            lambda: guarded_agent("a secret"), "hello", "guardrail_tripped", id="output-guardrail"
        ),
        pytest.param(lambda: guarded_agent("fine"), "hello", "Done", id="guardrails-pass"),
        pytest.param(fatal_agent, "launch", "tool_failed", id="fatal-tool-error"),
        pytest.param(fatal_batch, "launch", "tool_failed", id="fatal-tool-error-in-a-batch"),
        pytest.param(mixed_manager, "where is Paris?", "Done", id="agent-and-tool-in-a-batch"),
        pytest.param(failing_target, "bill?", "model_call_failed", id="handoff-target-fails"),
        pytest.param(
            lambda: guarded_handoff("output"),
            "my bill?",
            "guardrail_tripped",
            id="handoff-under-an-output-guardrail",
        ),
        pytest.param(
            lambda: guarded_handoff("target-input"),
            "my bill?",
            "guardrail_tripped",
            id="handoff-target-input-guardrail",
        ),
        pytest.param(
            lambda: guarded_handoff("target-output"),
            "my bill?",
            "guardrail_tripped",
            id="handoff-target-output-guardrail",
        ),
        pytest.param(
            lambda: nested([], '{"input": "where?"}'), "where?", "Done", id="agent-as-tool-fails"
        ),
        pytest.param(
            lambda: nested(
                ['{"name": "Paris", "people": 2100000}'], '{"input": "a city"}', output_type=City
            ),
            "a city",
            "Done",
            id="agent-as-tool-typed",
        ),
        pytest.param(
            lambda: nested(["never"], '{"query": "where?"}'),
            "where?",
            "Done",
            id="agent-as-tool-bad-arguments",
        ),
        pytest.param(miscalling_agent, "rain?", "Done", id="unknown-tool-and-bad-json"),
        pytest.param(
            lambda: measuring(tool_policy=ToolPolicy(deny={"measure"})),
            "how far?",
            "Done",
            id="nested-run-under-parent-policy",
        ),
        pytest.param(
            lambda: measuring(max_turns=1),
            "how far?",
            "max_turns_exceeded",
            id="nested-run-under-parent-max-turns",
        ),
        pytest.param(
            lambda: measuring(handoff=True, tool_policy=ToolPolicy(deny={"measure"})),
            "how far?",
            "Done",
            id="handoff-under-parent-policy",
        ),
        pytest.param(
            lambda: measuring(handoff=True, max_turns=1),
            "how far?",
            "max_turns_exceeded",
            id="handoff-under-parent-max-turns",
        ),
        pytest.param(lambda: looping_agent(2), "ping", "max_turns_exceeded", id="max-turns"),
        pytest.param(
            lambda: weather_agent(parallel_tool_call_limit=1),
            "weather?",
            "Done",
            id="parallel-limit",
        ),
        pytest.param(
            lambda: weather_agent(tool_policy=ToolPolicy(deny={"weather"})),
            "weather?",
            "Done",
            id="tool-denied",
        ),
        pytest.param(compacting_agent, "weather?", "Done", id="compaction"),
        pytest.param(erring_agent, "go", "Done", id="tool-error"),
        pytest.param(
            lambda: Agent(name="mute", model=ScriptedModel([])),
            "hello?",
            "model_call_failed",
            id="model-error",
        ),
        pytest.param(
            lambda: Agent(
                name="structured",
                model=ScriptedModel(['{"name": "Oslo"}', "not even JSON"]),
                output_type=City,
            ),
            "a city",
            "invalid_structured_output",
            id="structured-output-invalid",
        ),
    ],
)
async def test_a_run_to_its_end(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    make: Make,
    text: Input,
    ends: str,
) -> None:
    """`ends`: the phase the run ends in when it completes, else its error's kind."""
    await both(client, stores, run_id, make, text)
    assert ended(stores[0], run_id) == ends
    assert_same(*stores)


def redacting_agent() -> Agent:
    return weather_agent(redact=lambda text: text.replace("Oslo", "[city]"))


async def test_a_run_that_redacts_is_stored_redacted_locally_and_refused_on_temporal(
    client: Client, stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """`RunConfig.redact`: a local run streams its texts whole and its store holds them
    redacted. The Temporal runtime cannot apply it (its store is the run's memory, its
    history holds every text), so it fails closed: a worker refuses the agent, and so does
    `start_run`, before any workflow starts."""
    local, temporal = stores
    mine = await run_locally(redacting_agent, "weather in Oslo?", local, run_id)
    assert ended(local, run_id) == "Done"
    stored = [event async for event in events(local, run_id)]
    assert "Oslo" in repr(mine) and "Oslo" not in repr(local.get(run_id))
    assert repr(stored) == repr(mine).replace("Oslo", "[city]")
    refusal = "agent 'weather' sets RunConfig.redact, which the Temporal runtime does not apply"
    with pytest.raises(RedactionUnsupported, match=refusal):
        helikon_worker(client, new_queue(), [redacting_agent()], temporal)
    with pytest.raises(RedactionUnsupported, match=refusal):
        await start_run(client, redacting_agent(), "hi", task_queue=new_queue(), run_id=run_id)
    with pytest.raises(RPCError, match="not found"):
        await client.get_workflow_handle(run_id).describe()
    assert temporal.runs(include_nested=True) == []


async def test_a_run_that_continues_as_new(
    client: Client, stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """A workflow whose history grows long continues as new, reading its head from the
    store: what it stores is still what one local run stores."""
    local, temporal = stores
    options = TemporalOptions(continue_after_events=12)
    mine = await run_locally(weather_agent, "weather?", local, run_id)
    theirs = await run_on_temporal(client, weather_agent, "weather?", temporal, run_id, options)
    handle = client.get_workflow_handle(run_id)
    assert (await handle.describe()).run_id != handle.first_execution_run_id  # it continued
    assert_streams(mine, theirs)
    assert_same(local, temporal)


def paged_agent() -> Agent:
    """A tool source whose listing pages in a circle (tests/mcp_hostile_server.py)."""
    from mcp_support import hostile

    return Agent("paged", ScriptedModel(["never"]), mcp_servers=[hostile("circle")])


@pytest.mark.parametrize(
    ("make", "ends"),
    [
        pytest.param(station_agent, "Done", id="listed-and-called"),
        pytest.param(paged_agent, "tools_unavailable", id="listing-fails"),
    ],
)
async def test_tools_from_a_tool_source(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    make: Make,
    ends: str,
) -> None:
    """An MCP server's tools (tests/mcp_server.py over stdio), listed once as the run
    starts and kept in its header; or a listing that fails the run."""
    pytest.importorskip("mcp")
    local, temporal = stores
    agent = make()
    async with agent.mcp_servers[0]:  # a local run lists a connected source; a worker
        mine = await drained(agent.run("2+3?", store=local, run_id=run_id))  # connects its own
    theirs = await run_on_temporal(client, make, "2+3?", temporal, run_id)
    assert ended(local, run_id) == ends
    assert_streams(mine, theirs)
    assert_same(local, temporal)


@pytest.mark.parametrize(
    ("make", "text"),
    [
        pytest.param(weather_agent, "weather?", id="tools"),
        pytest.param(triage_agent, "my bill?", id="handoff"),
        pytest.param(manager_agent, "where is Paris?", id="agent-as-tool"),
    ],
)
async def test_on_postgresql(
    client: Client,
    postgres_stores: tuple[RunStore, RunStore],
    run_id: str,
    make: Make,
    text: str,
) -> None:
    """Both runtimes on PostgreSQL stores (the scenarios above run on SQLite ones)."""
    await both(client, postgres_stores, run_id, make, text)
    assert ended(postgres_stores[0], run_id) == "Done"
    assert_same(*postgres_stores)


# ---------------------------------------------------------------- charts


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("retrieve_answer", "completed"),
        ("plan_act", "completed"),
        ("approval_gated", "suspended"),
        ("budget_assistant", "completed"),
        ("triage", "completed"),
    ],
)
async def test_the_example_charts(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    name: str,
    status: str,
) -> None:
    """Each chart of charts/ on its offline script: custom phases (Planning), an effect
    phase (Retrieving: the `retrieve` effect's result is an input), tools with deps, a
    suspension for approval (compared there), a handoff."""
    chart = importlib.import_module(f"charts.{name}")
    deps = chart.deps() if hasattr(chart, "deps") else None

    def make() -> Agent:
        agent: Agent = chart.agent(ScriptedModel(chart.script()))
        return agent

    local, temporal = stores
    context = RunContext(deps)
    mine = await drained(
        make().run(chart.EXAMPLE_INPUT, store=local, run_id=run_id, context=context)
    )
    queue = new_queue()
    async with helikon_worker(client, queue, [make()], temporal, deps=deps):
        handle = await start_run(
            client, make(), chart.EXAMPLE_INPUT, task_queue=queue, run_id=run_id
        )
        theirs = [e async for e in events(temporal, run_id)]  # to its end or suspension
        if theirs[-1].type != "run_suspended":
            await asyncio.wait_for(outcome(handle), WAIT)
    assert local.get(run_id).info.status == status
    assert_streams(mine, theirs)
    assert_same(local, temporal)


async def failing_effect(context: EffectContext) -> JsonValue:
    raise OSError("the index is down")


async def hostile_effect(context: EffectContext) -> JsonValue:
    return {"passages": float("nan")}  # not JSON: never written, never fed to the chart


@pytest.mark.parametrize(
    "retrieve",
    [
        pytest.param(failing_effect, id="raises"),
        pytest.param(hostile_effect, id="returns-no-json"),
    ],
)
async def test_an_effect_that_fails(
    client: Client,
    stores: tuple[SqliteRunStore, SqliteRunStore],
    run_id: str,
    retrieve: Callable[[EffectContext], Awaitable[JsonValue]],
) -> None:
    """charts/retrieve_answer.py with an effect that fails the run, naming it."""
    from charts.retrieve_answer import EXAMPLE_INPUT, agent, script

    def make() -> Agent:
        built = agent(ScriptedModel(script()))
        return replace(built, effects=[Effect("retrieve", retrieve)])

    await both(client, stores, run_id, make, EXAMPLE_INPUT)
    assert ended(stores[0], run_id) == "effect_failed"
    assert_same(*stores)


def seeing_agent(seen: list[Any]) -> Agent:
    """charts/retrieve_answer.py's agent whose effect, and a tool of its own and of a nested
    agent's (asked as a tool), note what they are given in `seen`."""
    from charts.retrieve_answer import agent

    async def retrieve(context: EffectContext) -> JsonValue:
        seen.append(context)
        return {"passages": []}

    @tool(read_only=True)
    def note(text: str, context: ToolContext[Any]) -> str:
        """Note.

        Args:
            text: what.
        """
        seen.append((context.run_id, context.call_id, context.agent, context.seq))
        seen.append(context.idempotency_key)
        return "noted"

    inner = Agent(
        "inner",
        ScriptedModel([[ToolCall("n2", "note", '{"text": "in"}')], "Noted inside."]),
        tools=[note],
    )
    script = [
        [ToolCall("n1", "note", '{"text": "out"}'), ToolCall("i1", "inner", '{"input": "go"}')],
        "Noted.",
    ]
    built = agent(ScriptedModel(script))
    return replace(built, effects=[Effect("retrieve", retrieve)], tools=[note, inner.as_tool()])


async def test_what_tools_and_effects_are_given(
    client: Client, stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """Tools and effects see the same run ids, call ids, agents, seqs and idempotency keys
    on both runtimes (in the order they ran, nested calls in their own run)."""
    here: list[Any] = []
    there: list[Any] = []
    mine = await run_locally(lambda: seeing_agent(here), "go", stores[0], run_id)
    theirs = await run_on_temporal(client, lambda: seeing_agent(there), "go", stores[1], run_id)
    assert len(here) == 5 and sorted(map(repr, here)) == sorted(map(repr, there))
    assert_streams(mine, theirs)
    assert_same(*stores)


async def test_the_comparison_tells_a_difference(
    stores: tuple[SqliteRunStore, SqliteRunStore], run_id: str
) -> None:
    """Two local runs whose models answer differently at the end: `assert_same` names the
    record that differs (a comparison that cannot fail would make every scenario pass)."""

    def other() -> Agent:
        agent = weather_agent()
        turns = list(agent.model.turns)  # type: ignore[attr-defined]
        return replace(agent, model=ScriptedModel([*turns[:-1], "Rain everywhere."]))

    local, temporal = stores
    await run_locally(weather_agent, "weather?", local, run_id)
    await run_locally(other, "weather?", temporal, run_id)
    with pytest.raises(AssertionError, match=f"{run_id} record 6 input: ModelResponse"):
        assert_same(local, temporal)
