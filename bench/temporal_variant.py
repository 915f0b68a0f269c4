"""The full-conversation variant bench/temporal.py measures helikon's design against: the
same `transition` over the same agent, with the whole conversation in the workflow and in
every model activity's input (as `temporalio.contrib.openai_agents` passes the item list),
and no run store. It drives only the paths of the bench's run (model calls, tool batches).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from helikon.core.codec import from_data, to_data
    from helikon.core.items import Item
    from helikon.core.state import CallModel, ExecuteTools, ModelRequest, Start, ToolResults
    from helikon.core.transition import initial_state, transition
    from helikon.models.base import ModelInput, ResponseAssembler
    from helikon.run.spec import model_of
    from helikon.temporal import messages as m
    from helikon.temporal.registry import registry_for
    from helikon.tools import ToolContext, execute_batch

TIMEOUT = timedelta(seconds=60)


@workflow.defn(name="FullConversationWorkflow")
class FullConversationWorkflow:
    @workflow.run
    async def run(self, data: Any) -> Any:
        request: m.RunRequest = m.from_payload(m.RunRequest, data, "input")
        facts = registry_for(request.task_queue).facts(request.agent)
        state: Any = initial_state(facts.ctx)
        conversation: list[Item] = []
        inp: Any = Start(request.input)
        calls = 0
        while True:
            outcome = transition(state, inp, facts.ctx)
            state = outcome.next_state
            conversation.extend(outcome.conversation_appends)
            action = outcome.next_action
            if isinstance(action, CallModel):
                payload = {
                    "agent": request.agent,
                    "items": [to_data(item, Item) for item in conversation],
                    "request": to_data(action.request),
                    "calls_before": calls,
                    "task_queue": request.task_queue,
                }
                calls += 1
                answer = await workflow.execute_activity(
                    "full_model", payload, start_to_close_timeout=TIMEOUT
                )
                inp = m.from_payload(m.ModelAnswer, answer, "answer").input
            elif isinstance(action, ExecuteTools):
                answers = await asyncio.gather(
                    *(
                        workflow.execute_activity(
                            "full_tool",
                            args=[
                                m.to_payload(m.ToolRun(request.agent, request.run_id, 0, call)),
                                request.task_queue,
                            ],
                            start_to_close_timeout=TIMEOUT,
                        )
                        for call in action.calls
                    )
                )
                results = [m.from_payload(m.ToolAnswer, a, "answer").result for a in answers]
                inp = ToolResults(tuple(results))
            else:
                return {"phase": state.phase, "model_calls": calls}


@activity.defn
async def full_model(data: Any) -> Any:
    facts = registry_for(data["task_queue"]).facts(data["agent"])
    items = [from_data(Item, item) for item in data["items"]]
    request = from_data(ModelRequest, data["request"])
    model_input = ModelInput(
        facts.agent.instructions, items, facts.specs, request, calls_before=data["calls_before"]
    )
    assembler = ResponseAssembler()
    async for chunk in model_of(facts.agent).stream(model_input):
        assembler.add(chunk)
    return m.to_payload(m.ModelAnswer(assembler.response(facts.agent.name)))


@activity.defn
async def full_tool(data: Any, task_queue: str) -> Any:
    run: m.ToolRun = m.from_payload(m.ToolRun, data, "tool run")
    facts = registry_for(task_queue).facts(run.agent)

    def context(call: Any) -> ToolContext[Any]:
        return ToolContext(run.run_id, call.call_id, run.agent, None, run.seq)

    (result,) = await execute_batch((run.call,), facts.tools, context)
    return m.to_payload(m.ToolAnswer(result))
