"""A chart file whose model and tool answer with terminal control sequences, for the tests
that every printer shows them escaped (`helikon run / debug / trace` accept it as CHART).

The payload sets the terminal's title (OSC 0 ... BEL), clears the screen (CSI 2J) and turns
the text red (CSI 31m); `C1_CSI` is the one-byte CSI of the C1 set. Every text the model or
the tool can fill carries it: the answer, the reasoning, the tool name and call id, the
arguments, the tool's output and the error a missing tool gets.
"""

from __future__ import annotations

from collections.abc import Sequence

from helikon import Agent, Model, RunConfig, ToolCall, tool
from helikon.core import Reasoning
from helikon.models.scripted import Turn

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred"
C1_CSI = "\x9b2J"
PAYLOAD = HOSTILE + C1_CSI
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\x9b2J"
"""`PAYLOAD` as every printer shows it."""


@tool(needs_approval=True)
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: what to look up.
    """
    return f"found {PAYLOAD} for {query}"


def agent(model: Model) -> Agent:
    return Agent(
        name="hostile",
        model=model,
        instructions="Look things up.",
        tools=[lookup],
        config=RunConfig(max_turns=4),
    )


EXAMPLE_INPUT = "Look up the weather."


def script() -> Sequence[Turn]:
    # Raw control characters inside a JSON string are invalid JSON, but a C1 one is not:
    # the arguments carry the payload raw where they can, as a model could send them.
    arguments = '{"query": "' + C1_CSI + '"}'
    return [
        [
            Reasoning(f"thinking {PAYLOAD}"),
            ToolCall(f"call_{PAYLOAD}", "lookup", arguments),
            ToolCall("call_2", f"missing{PAYLOAD}", "{}"),
        ],
        f"The weather:\n{PAYLOAD}\n\tdone",
    ]
