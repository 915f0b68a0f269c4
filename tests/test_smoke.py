from helikon import DEFAULT_TABLE, CallingModel, ModelResponse, Start, TransitionCtx, transition
from helikon.core.items import AssistantMessage, UserMessage


def test_a_text_answer_completes_the_run() -> None:
    ctx = TransitionCtx(table=DEFAULT_TABLE)
    started = transition(CallingModel(), Start((UserMessage("hi"),)), ctx)
    outcome = transition(started.next_state, ModelResponse((AssistantMessage("hello"),)), ctx)
    assert outcome.next_state.phase == "Done"
    assert [event.type for event in outcome.events] == ["message_output", "run_completed"]
    assert ctx.table is DEFAULT_TABLE
