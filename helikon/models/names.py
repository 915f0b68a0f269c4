"""Model strings: `Agent(model="gpt-5-mini")` and what such a string means.

| string                          | model                                  |
|---------------------------------|----------------------------------------|
| ``"gpt-5-mini"``                | ``OpenAIModel.chat("gpt-5-mini")``      |
| ``"openai:gpt-5-mini"``         | ``OpenAIModel.chat("gpt-5-mini")``      |
| ``"openai:chat/gpt-5-mini"``    | ``OpenAIModel.chat("gpt-5-mini")``      |
| ``"openai:responses/gpt-5-mini"`` | ``OpenAIModel.responses("gpt-5-mini")`` |

A prefix is what comes before the first ``:``; after ``openai:``, what comes before the
first ``/`` is the wire format when there is a ``/``. Everything after it is the model's name,
as the server knows it, slashes and colons included (``"openai:chat/meta-llama/Llama-3.1-8B"``,
``"openai:chat/qwen2.5:7b"``). A bare name may hold slashes (``"meta-llama/Llama-3.1-8B"``)
but not a colon, which would read as a prefix: write such a name with its prefix.

The model reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` when it first calls the server
(the `openai` client does), so a string names a model on any OpenAI-compatible server.
"""

from __future__ import annotations

from helikon.models.base import Model

PROVIDERS = ("openai",)
WIRE_FORMATS = ("chat", "responses")


def parse_model_name(name: str) -> tuple[str, str, str]:
    """`name` as (provider, wire format, model name), defaults filled in.

    Raises:
        ValueError: an unknown provider or wire format, or no model name.
    """
    provider, colon, rest = name.partition(":")
    if not colon:
        provider, rest = "openai", name
    elif provider not in PROVIDERS:
        raise ValueError(
            f"model {name!r}: unknown provider {provider!r} (known: "
            f"{', '.join(PROVIDERS)}); a model whose name has a colon is written "
            f"'openai:chat/{name}'"
        )
    api, slash, model = rest.partition("/")
    if not slash or not colon:
        api, model = "chat", rest
    elif api not in WIRE_FORMATS:
        raise ValueError(
            f"model {name!r}: unknown wire format {api!r} (known: {', '.join(WIRE_FORMATS)}); "
            f"a model whose name has a slash is written 'openai:chat/{rest}'"
        )
    if not model.strip():
        raise ValueError(f"model {name!r}: no model name")
    return provider, api, model


def model_named(name: str) -> Model:
    """The model a model string names (see the module docstring).

    Raises:
        ValueError: the string names no model helikon knows how to build.
        ModuleNotFoundError: the model needs an extra that is not installed (the message
            says which: ``pip install 'helikon[openai]'``).
    """
    _, api, model = parse_model_name(name)
    try:
        from helikon.models.openai import OpenAIModel  # the `openai` extra: only when named
    except ModuleNotFoundError as exc:
        if exc.name != "openai":
            raise
        raise ModuleNotFoundError(
            f"model {name!r} needs the openai package: pip install 'helikon[openai]'",
            name="openai",
        ) from None
    return OpenAIModel.chat(model) if api == "chat" else OpenAIModel.responses(model)
