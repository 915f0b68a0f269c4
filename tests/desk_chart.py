"""A chart file whose one tool batch calls an agent as a tool beside a plain tool, and whose
nested agent calls another agent as a tool in turn: the desk asks for the weather and for
research at once; the researcher asks a fact checker. `helikon debug` accepts it as CHART
(tests/test_debug_live.py steps into the nested runs while they run).

One scripted model serves the three agents, so its turns interleave in run order: the
weather tool calls no model, so the order is fixed however the batch's calls interleave.
"""

from __future__ import annotations

from collections.abc import Sequence

from helikon import Agent, Model, ToolCall, tool
from helikon.models.scripted import Turn
from helikon.tools import Tool

ANSWER = "Sunny in Lyon; the bridge opened in 1834."


@tool(read_only=True)
def weather(city: str) -> str:
    """Today's weather.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


def desk(model: Model, forecast: Tool = weather) -> Agent:
    """The desk agent, with `forecast` as its plain tool beside the researcher."""
    checker = Agent(name="checker", model=model, instructions="Check one fact.")
    researcher = Agent(
        name="researcher",
        model=model,
        instructions="Research, and have facts checked.",
        tools=[checker.as_tool()],
    )
    return Agent(
        name="desk",
        model=model,
        instructions="Answer with the weather and the research.",
        tools=[forecast, researcher.as_tool()],
    )


def agent(model: Model) -> Agent:
    return desk(model)


EXAMPLE_INPUT = "Weather in Lyon, and when did its bridge open?"


def script() -> Sequence[Turn]:
    return [
        [
            ToolCall("call_weather", "weather", '{"city": "Lyon"}'),
            ToolCall("call_research", "researcher", '{"input": "When did the bridge open?"}'),
        ],
        [ToolCall("call_check", "checker", '{"input": "1834?"}')],
        "Confirmed: 1834.",
        "The bridge opened in 1834.",
        ANSWER,
    ]
