"""Triage: a front-desk agent that hands the conversation to the right specialist.

The triage agent has no tools of its own, only handoffs (`transfer_to_billing`,
`transfer_to_tech_support`); the specialist answers and the run completes with its output.
"""

from __future__ import annotations

from collections.abc import Sequence

from helikon import Agent, Model, RunConfig, ToolCall, tool
from helikon.models.scripted import Turn


@tool(read_only=True)
def invoice(number: str) -> dict[str, str | float]:
    """Look up an invoice.

    Args:
        number: the invoice number, e.g. "INV-1042".
    """
    return {"number": number, "amount": 49.0, "status": "paid twice", "refundable": 49.0}


def specialists(model: Model) -> tuple[Agent, Agent]:
    billing = Agent(
        name="billing",
        model=model,
        instructions="You resolve billing questions. Look invoices up before answering.",
        tools=[invoice],
        description="Invoices, refunds and payments.",
    )
    tech = Agent(
        name="tech-support",
        model=model,
        instructions="You fix technical problems step by step.",
        description="Log-in problems, errors and outages.",
    )
    return billing, tech


def agent(model: Model) -> Agent:
    billing, tech = specialists(model)
    return Agent(
        name="triage",
        model=model,
        instructions="Decide who should help the user and hand off. Do not answer yourself.",
        handoffs=[billing, tech],
        config=RunConfig(max_turns=6),
    )


def deps() -> None:
    return None


EXAMPLE_INPUT = "I was charged twice for invoice INV-1042."


def script() -> Sequence[Turn]:
    """Offline turns: triage hands off, billing looks the invoice up and answers.

    One scripted model serves both agents, so its turns interleave in run order.
    """
    return [
        [ToolCall("call_handoff", "transfer_to_billing", "{}")],
        [ToolCall("call_invoice", "invoice", '{"number": "INV-1042"}')],
        "Invoice INV-1042 was paid twice; I have refunded 49.00 EUR to your card.",
    ]
