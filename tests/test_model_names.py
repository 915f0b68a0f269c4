"""Model strings: `Agent(model="gpt-5-mini")`, resolved when the agent is built.

The runs go to the local wire server, found through OPENAI_BASE_URL and authenticated with
OPENAI_API_KEY, as a user's environment would set them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helikon import Agent, RunConfig, RunFailed, tool
from helikon.models.names import parse_model_name
from helikon.models.openai import KEYLESS, OpenAIModel
from helikon.testing import OpenAIServer, PlannedReply, PlannedToolCall

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("gpt-5-mini", ("openai", "chat", "gpt-5-mini")),
        ("openai:gpt-5-mini", ("openai", "chat", "gpt-5-mini")),
        ("openai:chat/gpt-5-mini", ("openai", "chat", "gpt-5-mini")),
        ("openai:responses/gpt-5-mini", ("openai", "responses", "gpt-5-mini")),
        ("meta-llama/Llama-3.1-8B", ("openai", "chat", "meta-llama/Llama-3.1-8B")),
        ("openai:chat/meta-llama/Llama-3.1-8B", ("openai", "chat", "meta-llama/Llama-3.1-8B")),
        ("openai:chat/qwen2.5:7b", ("openai", "chat", "qwen2.5:7b")),
        ("openai:responses/ft:gpt-4o:acme::x1", ("openai", "responses", "ft:gpt-4o:acme::x1")),
    ],
)
def test_a_model_string_names_a_provider_a_wire_format_and_a_model(
    name: str, parsed: tuple[str, str, str]
) -> None:
    assert parse_model_name(name) == parsed


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "anthropic:claude",
            "model 'anthropic:claude': unknown provider 'anthropic' (known: openai); a model "
            "whose name has a colon is written 'openai:chat/anthropic:claude'",
        ),
        (
            "qwen2.5:7b",
            "model 'qwen2.5:7b': unknown provider 'qwen2.5' (known: openai); a model whose "
            "name has a colon is written 'openai:chat/qwen2.5:7b'",
        ),
        (
            "openai:completions/gpt-5-mini",
            "model 'openai:completions/gpt-5-mini': unknown wire format 'completions' (known: "
            "chat, responses); a model whose name has a slash is written "
            "'openai:chat/completions/gpt-5-mini'",
        ),
        ("", "model '': no model name"),
        ("openai:", "model 'openai:': no model name"),
        ("openai:responses/", "model 'openai:responses/': no model name"),
    ],
)
def test_a_string_that_names_no_model_is_refused_when_the_agent_is_built(
    name: str, message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        Agent("a", name)
    assert str(refused.value) == message


def test_the_string_becomes_the_agents_model_once() -> None:
    agent = Agent("a", "openai:responses/gpt-5-mini")
    assert isinstance(agent.model, OpenAIModel)
    assert repr(agent.model) == "OpenAIModel.responses('gpt-5-mini')"
    assert repr(Agent("b", "gpt-5-mini").model) == "OpenAIModel.chat('gpt-5-mini')"


# ------------------------------------------------------------------ on the wire


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        monkeypatch.setenv("OPENAI_BASE_URL", running.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "key-from-env")
        yield running


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("gpt-test", "/v1/chat/completions"),
        ("openai:chat/gpt-test", "/v1/chat/completions"),
        ("openai:responses/gpt-test", "/v1/responses"),
    ],
)
async def test_a_model_string_runs_on_the_server_the_environment_names(
    server: OpenAIServer, name: str, path: str
) -> None:
    server.plan(
        PlannedReply(tool_calls=[PlannedToolCall("add", '{"a": 2, "b": 40}', "c1")]),
        PlannedReply(text="42"),
    )
    agent = Agent("calculator", name, tools=[add])
    try:
        result = await agent.run("2 + 40?").collect()
    finally:
        await agent.model.aclose()  # type: ignore[union-attr]
    assert result.final_output == "42"
    assert [request.path for request in server.requests] == [path, path]
    assert {request.body["model"] for request in server.requests} == {"gpt-test"}
    assert server.requests[0].headers["authorization"] == "Bearer key-from-env"


async def test_without_a_key_the_agent_builds_and_its_run_fails_saying_so(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")  # OpenAI's own API, then: it needs a key
    agent = Agent("calculator", "gpt-test", config=RunConfig(max_turns=2))
    events = [event async for event in agent.run("2 + 40?")]
    failed = events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.error.reason == "bad_response"
    assert "OPENAI_API_KEY" in failed.error.message
    assert server.requests == []


async def test_a_server_named_by_its_url_alone_is_called_without_a_key(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local OpenAI-compatible server needs only OPENAI_BASE_URL."""
    monkeypatch.delenv("OPENAI_API_KEY")
    server.plan(PlannedReply(text="42"))
    agent = Agent("calculator", "gpt-test")
    try:
        result = await agent.run("2 + 40?").collect()
    finally:
        await agent.model.aclose()  # type: ignore[union-attr]
    assert result.final_output == "42"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEYLESS}"


def test_a_model_string_without_the_openai_extra_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "from helikon import Agent\n"
        "try:\n"
        "    Agent('a', 'gpt-5-mini')\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc.name, exc, sep='|')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.stdout == (
        "ModuleNotFoundError|openai|"
        "model 'gpt-5-mini' needs the openai package: pip install 'helikon[openai]'\n"
    ), done.stderr
