"""Test helpers that ship with helikon, so users can test agents without a network.

`OpenAIServer` is a scripted local server speaking OpenAI's wire format (Chat Completions and
Responses, streamed or not); plan its answers with `PlannedReply` and `PlannedFailure`.
"""

from helikon.testing.openai_plan import (
    Planned,
    PlannedFailure,
    PlannedReply,
    PlannedToolCall,
    PlannedUsage,
)
from helikon.testing.openai_server import OpenAIServer, RecordedRequest

__all__ = [
    "OpenAIServer",
    "Planned",
    "PlannedFailure",
    "PlannedReply",
    "PlannedToolCall",
    "PlannedUsage",
    "RecordedRequest",
]
