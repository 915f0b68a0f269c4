"""Retrieve, then answer: a retrieval runs before the model answers, its passages in the context.

The default loop, composed (`helikon.extend`) with one effect phase in front of it: `start`
now goes to Retrieving, which runs the `retrieve` effect on the user's question; its JSON
result comes back as an `effect_result` input and goes on to CallingModel, where the model
answers with the passages in its context (the tool loop is the default one from there on).

`retrieve` is a plain async function over a small in-memory handbook here; a real one would
query a search index or an HTTP service, passing `context.idempotency_key` on. It is
idempotent (a read), so a run resumed while it was in flight runs it again.
"""

from __future__ import annotations

from pydantic import JsonValue

from helikon import AGENT_LOOP, Agent, EffectContext, Model, compile_chart, effect, extend, to

RetrieveAnswerChart = (
    extend(AGENT_LOOP, "RetrieveAnswerChart")
    .phase("Retrieving", effect="retrieve")
    .retarget(
        "CallingModel", "start", "start_turn -> CallingModel", to="Retrieving", on="enter_effect"
    )
    .rows("Retrieving", "effect_result", to("CallingModel", on="keep_effect_result"))
    .build()
)
RETRIEVE_ANSWER_TABLE = compile_chart(RetrieveAnswerChart)
"""The compiled chart: `Agent(chart=RETRIEVE_ANSWER_TABLE, effects=[retrieve])`."""

HANDBOOK = {
    "expenses": "Expenses over 500 EUR need a manager's approval before the purchase.",
    "travel": "Book travel through the portal at least 14 days ahead; economy class only.",
    "laptop": "A new laptop is due every 3 years; request it from IT with form IT-7.",
    "holidays": "Everyone has 28 days of paid holiday; carry over at most 5 to March.",
}


@effect(idempotent=True)
async def retrieve(context: EffectContext) -> JsonValue:
    """The handbook passages whose topic the question names (at most three)."""
    args = context.args if isinstance(context.args, dict) else {}
    question = str(args.get("text", "")).lower()
    passages: list[JsonValue] = [
        {"topic": topic, "text": text} for topic, text in HANDBOOK.items() if topic in question
    ]
    return {"query": question, "passages": passages[:3]}


def agent(model: Model) -> Agent:
    """A handbook assistant: it answers from the passages retrieved for the question."""
    return Agent(
        name="handbook",
        model=model,
        instructions=(
            "You answer questions about the company handbook. Use only the passages given "
            "as the result of retrieve; when none applies, say so."
        ),
        chart=RETRIEVE_ANSWER_TABLE,
        effects=[retrieve],
    )


EXAMPLE_INPUT = "Do my travel expenses need approval?"


def script() -> list[str]:
    """The offline run's model turns: one answer, from the retrieved passages."""
    return [
        "Yes, if they are over 500 EUR: a manager approves them before you buy. Book the "
        "travel itself through the portal at least 14 days ahead."
    ]
