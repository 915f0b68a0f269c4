"""Plan, then act: the default loop, extended with a Planning phase in front of it."""

from helikon import AGENT_LOOP, Agent, Model, RunConfig, ToolCall, compile_chart, extend, to, tool

PLANNING_PROMPT = (
    "Before doing anything, write a short numbered plan for the user's request: the steps, "
    "the tools each step needs, and how you will know you are done. Do not call tools yet."
)
PlanActChart = (  # Planning is not a turn, and the plan's tool calls never run
    extend(AGENT_LOOP, "PlanActChart")
    .phase("Planning", initial=True, prompt=PLANNING_PROMPT)
    .rows("Planning", "start", "fail_budget", to("Planning", on="start_planning"))
    .rows("Planning", "model_response", "fail_empty", to("CallingModel", on="record_plan"))
    .actions(start_planning="enter_phase", record_plan="keep_reply")
    .build()
)
PLAN_ACT_TABLE = compile_chart(PlanActChart)
LAUNCH = "Launch moved to 12 March; marketing needs the final copy by 5 March."
NOTES = {"launch": LAUNCH, "budget": "Q1 budget approved: 40k EUR, 12k already committed."}
EXAMPLE_INPUT = "When is the launch, and what is due before it?"
CONFIG = RunConfig(max_turns=6)


@tool(read_only=True)
def search(query: str) -> list[str]:
    """Search the team's notes.
    Args:
        query: what to look for."""
    return [text for key, text in NOTES.items() if key in query.lower()]


def agent(model: Model) -> Agent:
    brief = "You answer questions about the team's plans using the notes."
    return Agent("planner", model, brief, [search], chart=PLAN_ACT_TABLE, config=CONFIG)


def script() -> list[object]:
    plan = "1. Search the notes for the launch date. 2. Find what is due before it. 3. Answer."
    call = ToolCall("call_search", "search", '{"query": "launch"}')
    return [plan, [call], "The launch is on 12 March; marketing needs the final copy by 5 March."]
