"""Provider errors translated at the boundary: an `openai` exception becomes a `ModelCallFailed`.

| what the provider said                                  | reason           | retried |
|---------------------------------------------------------|------------------|---------|
| 429 (but not ``insufficient_quota``)                    | rate_limited     | yes     |
| 429 ``insufficient_quota``                              | rate_limited     | no      |
| context length exceeded (code or message)               | context_too_long | no      |
| content filter / policy violation                       | refused          | no      |
| 408, 409, 5xx, connection errors and timeouts           | unavailable      | yes     |
| a stream that ends without a finish reason              | unavailable      | yes     |
| an error event mid-stream with code ``server_error``    | unavailable      | yes     |
| anything else (400, 401, 404, malformed responses, ...) | bad_response     | no      |

"Retried" means: while the call has yielded nothing yet (see `OpenAIModel.stream`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import openai

from helikon.core.errors import ModelCallFailed, ModelFailureReason
from helikon.core.items import Usage

_CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_CONTEXT_PHRASES = ("maximum context length", "context window", "context_length_exceeded")
_REFUSAL_CODES = frozenset({"content_filter", "content_policy_violation"})
_REFUSAL_PHRASES = ("content management policy", "content filter", "content policy")


@dataclass(frozen=True)
class Failure:
    """How one failed attempt should be handled: its error, and whether to try again."""

    error: ModelCallFailed
    retryable: bool = False
    retry_after: float | None = None


def classify(exc: openai.OpenAIError) -> Failure:
    """Translate an exception from the `openai` client into a `Failure`."""
    if isinstance(exc, openai.APIStatusError):
        return _classify_status(exc)
    if isinstance(exc, openai.APIConnectionError):
        # The client's message is a bare "Connection error."; its cause says which.
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        return Failure(ModelCallFailed("unavailable", f"{exc}{cause}"), retryable=True)
    if isinstance(exc, openai.APIResponseValidationError):
        return Failure(ModelCallFailed("bad_response", str(exc), exc.status_code))
    if isinstance(exc, openai.APIError):
        return _classify_stream_error(exc)
    return Failure(ModelCallFailed("bad_response", str(exc)))


def failed(reason: ModelFailureReason, message: str) -> Failure:
    """A failure the adapter detected itself (not raised by the client)."""
    return Failure(ModelCallFailed(reason, message))


def cut_short() -> Failure:
    """A stream that ended before the provider said the answer was complete."""
    message = "the stream ended before the answer was complete"
    return Failure(ModelCallFailed("unavailable", message), retryable=True)


class StreamFailed(Exception):
    """Raised by a stream translation when the stream itself says the call failed.

    `usage` is what the stream reported before it failed, when it reported anything.
    """

    def __init__(self, failure: Failure, usage: Usage | None = None) -> None:
        super().__init__(failure.error.message)
        self.failure = failure
        self.usage = usage


def _classify_status(exc: openai.APIStatusError) -> Failure:
    status, message = exc.status_code, _message(exc)
    topic = _topic(exc.code, message)
    if topic is not None:
        return Failure(ModelCallFailed(topic, message, status))
    if status == 429:
        retryable = exc.code != "insufficient_quota"
        after = retry_after(exc.response.headers)
        return Failure(ModelCallFailed("rate_limited", message, status), retryable, after)
    if status in (408, 409) or status >= 500:
        after = retry_after(exc.response.headers)
        return Failure(ModelCallFailed("unavailable", message, status), True, after)
    return Failure(ModelCallFailed("bad_response", message, status))


def _classify_stream_error(exc: openai.APIError) -> Failure:
    """An error reported inside a 200 stream: only its code and message say what happened."""
    return from_code(exc.code or exc.type, _message(exc))


def from_code(code: str | None, message: str) -> Failure:
    """A failure the provider reported as an error code (in a stream, or a failed response)."""
    topic = _topic(code, message)
    if topic is not None:
        return Failure(ModelCallFailed(topic, message))
    if code == "rate_limit_exceeded":
        return Failure(ModelCallFailed("rate_limited", message), retryable=True)
    if code == "server_error":
        return Failure(ModelCallFailed("unavailable", message), retryable=True)
    return Failure(ModelCallFailed("bad_response", message))


def _topic(code: str | None, message: str) -> ModelFailureReason | None:
    """Errors recognised by what they are about, whatever their status."""
    lowered = message.lower()
    if code in _CONTEXT_CODES or any(phrase in lowered for phrase in _CONTEXT_PHRASES):
        return "context_too_long"
    if code in _REFUSAL_CODES or any(phrase in lowered for phrase in _REFUSAL_PHRASES):
        return "refused"
    return None


def _message(exc: openai.APIError) -> str:
    """The provider's own message from the error body, without the client's prefix."""
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    return exc.message


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, else ``retry-after``.

    ``retry-after`` may be a number of seconds or an HTTP date. A header is read
    defensively: a negative wait is 0, and a value that is not a finite number or a date
    (``nan``, ``inf``, garbage) is unreadable. Returns None when neither header is present
    or readable; the caller still caps what it returns (see `Backoff.delay`).
    """
    milliseconds = _finite(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return max(milliseconds / 1000, 0.0)
    raw = headers.get("retry-after")
    seconds = _finite(raw)
    if seconds is not None:
        return max(seconds, 0.0)
    return _date_wait(raw) if raw else None


def _finite(raw: str | None) -> float | None:
    try:
        number = float(raw) if raw else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def _date_wait(raw: str) -> float | None:
    """Seconds until the HTTP date `raw`, or None when it is not one."""
    try:
        wait = parsedate_to_datetime(raw).timestamp() - time.time()
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return max(wait, 0.0) if math.isfinite(wait) else None
