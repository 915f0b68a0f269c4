"""An approval-gated payments agent: moving money waits for a human.

`transfer` needs approval. Run it in the terminal and `helikon run` asks you (y/n) for each
call; from code, without an `on_approval` handler, the stream ends with `RunSuspended` and
`agent.resume(snapshot, decisions=[request.approve()])` continues the run later.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helikon import Agent, Model, RunConfig, ToolCall, tool
from helikon.models.scripted import Turn


@tool(read_only=True)
def balance(account: str) -> dict[str, Any]:
    """The balance of one of the user's accounts.

    Args:
        account: "checking" or "savings".
    """
    balances = {"checking": 1250.0, "savings": 8400.0}
    return {"account": account, "balance": balances.get(account, 0.0), "currency": "EUR"}


def _large(arguments: dict[str, Any]) -> bool:
    return float(arguments.get("amount", 0)) >= 100


@tool(needs_approval=_large)
def transfer(source: str, target: str, amount: float) -> str:
    """Move money between the user's accounts. Amounts of 100 or more need approval.

    Args:
        source: the account to take the money from.
        target: the account to put it in.
        amount: how much, in EUR.
    """
    return f"moved {amount:.2f} EUR from {source} to {target}"


def agent(model: Model) -> Agent:
    return Agent(
        name="payments",
        model=model,
        instructions="You move money between the user's own accounts when asked.",
        tools=[balance, transfer],
        config=RunConfig(max_turns=6),
    )


def deps() -> None:
    return None


EXAMPLE_INPUT = "Move 500 EUR from checking to savings."


def script() -> Sequence[Turn]:
    return [
        [ToolCall("call_balance", "balance", '{"account": "checking"}')],
        [
            ToolCall(
                "call_transfer",
                "transfer",
                '{"source": "checking", "target": "savings", "amount": 500}',
            )
        ],
        "Done: 500.00 EUR moved from checking to savings.",
    ]
