"""The budget assistant: a tool-using agent over the user's ledger.

Offline (`helikon run charts/budget_assistant.py --offline`), a scripted model plays the turns
below; with OPENAI_API_KEY or OPENAI_BASE_URL (and optionally HELIKON_MODEL) set, a real model
does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from helikon import (
    Agent,
    AssistantMessage,
    Model,
    RunConfig,
    ScriptedTurn,
    ToolCall,
    ToolContext,
    Usage,
    tool,
)
from helikon.models.scripted import Turn


@dataclass
class Ledger:
    """The user's spending this month, by category, and their monthly budgets."""

    spent: dict[str, float] = field(
        default_factory=lambda: {"coffee": 42.5, "groceries": 310.0, "transport": 64.2}
    )
    budgets: dict[str, float] = field(
        default_factory=lambda: {"coffee": 30.0, "groceries": 400.0, "transport": 80.0}
    )


@tool(read_only=True)
def spending(category: str, context: ToolContext[Ledger]) -> dict[str, float | str]:
    """How much was spent in a category this month.

    Args:
        category: the spending category, e.g. "coffee".
    """
    ledger = context.deps
    if category not in ledger.spent:
        known = ", ".join(sorted(ledger.spent))
        raise ValueError(f"unknown category {category!r}; known: {known}")
    return {"category": category, "spent": ledger.spent[category], "currency": "EUR"}


@tool(read_only=True)
def budget(category: str, context: ToolContext[Ledger]) -> dict[str, float | str]:
    """The monthly budget of a category and what is left of it.

    Args:
        category: the spending category, e.g. "coffee".
    """
    ledger = context.deps
    limit = ledger.budgets.get(category, 0.0)
    left = round(limit - ledger.spent.get(category, 0.0), 2)
    return {"category": category, "budget": limit, "left": left, "currency": "EUR"}


INSTRUCTIONS = (
    "You are a budgeting assistant. Use the tools to look up spending and budgets before "
    "answering; never guess numbers. Answer in two sentences at most."
)


def agent(model: Model) -> Agent:
    return Agent(
        name="budget-assistant",
        model=model,
        instructions=INSTRUCTIONS,
        tools=[spending, budget],
        config=RunConfig(max_turns=8),
        description="Answers questions about the user's spending and budgets.",
    )


def deps() -> Ledger:
    return Ledger()


EXAMPLE_INPUT = "How am I doing on coffee this month?"


def script() -> Sequence[Turn]:
    """What the offline model answers to EXAMPLE_INPUT."""
    return [
        ScriptedTurn(
            [
                ToolCall("call_spent", "spending", '{"category": "coffee"}'),
                ToolCall("call_budget", "budget", '{"category": "coffee"}'),
            ],
            usage=Usage(212, 41, 253, 1),
        ),
        ScriptedTurn(
            [
                AssistantMessage(
                    "You spent 42.50 EUR on coffee, 12.50 EUR over your 30 EUR budget: "
                    "time to brew at home for the rest of the month."
                )
            ],
            usage=Usage(318, 33, 351, 1),
        ),
    ]
