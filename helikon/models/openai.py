"""`OpenAIModel`: the Model protocol on the official `openai` client.

Two wire formats, one class: `OpenAIModel.chat(...)` speaks Chat Completions (what most
OpenAI-compatible servers offer), `OpenAIModel.responses(...)` the Responses API. Both always
stream, forward deltas as they arrive, and report usage and a finish reason at the end.

Retries are ours, not the client's (its ``max_retries`` is set to 0): a 429, a 408/409/5xx or
a connection error is tried again with exponential backoff, honouring the server's
``Retry-After`` up to `Backoff.max_delay`, but only while nothing has been yielded yet, since
a consumer cannot take back deltas it has already seen. What still fails is raised as
`ModelError` carrying a `ModelCallFailed` (see `helikon.models.openai_errors`).

The conversation (``messages``, ``input``) is handed to the client in ``extra_body``, not as
the typed parameter: the client would walk it against the parameter's types on every call,
which costs more than everything else helikon does per turn once a conversation is long
(`helikon.models.openai_request.as_given`). The body on the wire is the same; a wrapper
around ``create`` that reads the ``messages`` argument (some tracing integrations do) finds
the conversation in ``extra_body``.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal

try:
    import openai
except ModuleNotFoundError as exc:  # say which extra, not just which module
    if exc.name != "openai":
        raise
    raise ModuleNotFoundError(
        "OpenAIModel needs the openai package: pip install 'helikon[openai]'", name="openai"
    ) from exc

from helikon.core.errors import ModelError
from helikon.core.items import ModelSettings, Usage
from helikon.models.base import ModelChunk, ModelInput
from helikon.models.openai_chat import stream_chat
from helikon.models.openai_errors import Failure, StreamFailed, classify
from helikon.models.openai_responses import stream_responses

WireFormat = Literal["chat", "responses"]


@dataclass(frozen=True)
class Backoff:
    """How long to wait before each retry.

    The n-th retry (0-based) waits ``base_delay * 2**n``, jittered down by up to half, at
    most `max_delay`; when the server sent ``Retry-After``, that is waited instead, clamped
    to ``[0, max_delay]`` (a NaN falls back to the exponential delay), so no header can
    make a call sleep longer than `max_delay`.

    Raises:
        ValueError: a delay that is not finite, non-negative seconds.
    """

    base_delay: float = 0.5
    max_delay: float = 8.0

    def __post_init__(self) -> None:
        for name in ("base_delay", "max_delay"):
            seconds = getattr(self, name)
            if not (math.isfinite(seconds) and seconds >= 0):
                raise ValueError(f"Backoff.{name} must be finite seconds >= 0, got {seconds!r}")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None and not math.isnan(retry_after):
            return min(max(retry_after, 0.0), self.max_delay)
        exponential = min(self.base_delay * 2.0**attempt, self.max_delay)
        return exponential * random.uniform(0.5, 1.0)


def _spent(exc: Exception) -> Usage:
    """What the failed attempt spent: the usage its stream reported, else one request."""
    usage = exc.usage if isinstance(exc, StreamFailed) else None
    return usage if usage is not None else Usage(requests=1)


class OpenAIModel:
    """A model served over OpenAI's API, or any server that speaks it (set `base_url`).

    Build one with `OpenAIModel.chat` or `OpenAIModel.responses`. The client is created on
    first use (once per event loop), so building a model needs no API key yet.
    """

    def __init__(
        self,
        model: str,
        *,
        api: WireFormat = "chat",
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_retries: int = 3,
        backoff: Backoff | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
    ) -> None:
        self.model = model
        self.api: WireFormat = api
        self.max_retries = max_retries
        self.backoff = backoff or Backoff()
        self.settings = settings or ModelSettings()
        self._base_url = base_url
        self._api_key = api_key
        self._timeout = timeout
        self._given_client = client.with_options(max_retries=0) if client else None
        self._clients: dict[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = {}

    @classmethod
    def chat(
        cls,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_retries: int = 3,
        backoff: Backoff | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
    ) -> OpenAIModel:
        """A model called through Chat Completions (``POST {base_url}/chat/completions``).

        Args:
            model: the model name, e.g. "gpt-5-mini".
            base_url: the API root; defaults to OPENAI_BASE_URL, then OpenAI's.
            api_key: defaults to OPENAI_API_KEY; with neither, a server named by its URL
                alone (`base_url` or OPENAI_BASE_URL: a local one) is called without a key.
            client: an `openai.AsyncOpenAI` to use instead of building one (its own retries
                are turned off; `base_url` and `api_key` are then ignored).
            max_retries: retries after the first attempt, for retryable failures.
            backoff: the delays between retries.
            settings: default sampling settings; a request's own settings win field by field.
            timeout: seconds per request; the client's default when None.

        Returns:
            A model whose `stream` raises `ModelError` when a call fails for good.
        """
        return cls(
            model,
            api="chat",
            base_url=base_url,
            api_key=api_key,
            client=client,
            max_retries=max_retries,
            backoff=backoff,
            settings=settings,
            timeout=timeout,
        )

    @classmethod
    def responses(
        cls,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_retries: int = 3,
        backoff: Backoff | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
    ) -> OpenAIModel:
        """A model called through the Responses API (``POST {base_url}/responses``).

        Takes the same arguments as `OpenAIModel.chat`.
        """
        return cls(
            model,
            api="responses",
            base_url=base_url,
            api_key=api_key,
            client=client,
            max_retries=max_retries,
            backoff=backoff,
            settings=settings,
            timeout=timeout,
        )

    def __repr__(self) -> str:
        return f"OpenAIModel.{self.api}({self.model!r})"

    async def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        """Stream the model's answer to `request`, retrying what is worth retrying.

        Raises:
            ModelError: the call failed for good; ``.error.reason`` says why.
        """
        attempt = 0
        while True:
            started = False
            try:
                async with aclosing(self._attempt(request)) as chunks:
                    async for chunk in chunks:
                        started = True
                        yield chunk
                return
            except (openai.OpenAIError, StreamFailed) as exc:
                failure = exc.failure if isinstance(exc, StreamFailed) else classify(exc)
                if started or not failure.retryable or attempt >= self.max_retries:
                    raise ModelError(failure.error, usage=_spent(exc)) from exc
            await asyncio.sleep(self._delay(attempt, failure))
            attempt += 1

    async def aclose(self) -> None:
        """Close the clients this model created (not one it was given)."""
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.close()

    def _attempt(self, request: ModelInput) -> AsyncGenerator[ModelChunk, None]:
        client = self._client()
        if self.api == "chat":
            return stream_chat(client, self.model, request, self.settings)
        return stream_responses(client, self.model, request, self.settings)

    def _delay(self, attempt: int, failure: Failure) -> float:
        return self.backoff.delay(attempt, failure.retry_after)

    def _client(self) -> openai.AsyncOpenAI:
        if self._given_client is not None:
            return self._given_client
        # An httpx connection pool belongs to the event loop that opened it.
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for stale in [known for known in self._clients if known.is_closed()]:
                del self._clients[stale]
            client = openai.AsyncOpenAI(
                api_key=self._api_key or _keyless(self._base_url),
                base_url=self._base_url,
                max_retries=0,
                timeout=self._timeout if self._timeout is not None else openai.NOT_GIVEN,
            )
            self._clients[loop] = client
        return client


KEYLESS = "no-key"
"""What a keyless server is sent as its key: the openai client refuses to call without one."""


def _keyless(base_url: str | None) -> str | None:
    """A placeholder key for a server named by its URL with no OPENAI_API_KEY set (None: the
    client reads the key, or says it is missing, itself)."""
    if os.environ.get("OPENAI_API_KEY") or not (base_url or os.environ.get("OPENAI_BASE_URL")):
        return None
    return KEYLESS
