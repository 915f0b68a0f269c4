"""`helikon.durable.signing.sign`: what a store signs is HMAC-SHA256 over the parts, joined.

The signer keeps each key's HMAC state and copies it per message; these pin that the copy
gives the one-shot HMAC of the same bytes, for every key (a stored row signed before must
check out after), and that keys never share a state.
"""

from __future__ import annotations

import hashlib
import hmac

import pytest

from helikon.durable.signing import matches, sign


def one_shot(key: bytes, *parts: str | int) -> str:
    message = "\x1f".join(str(part) for part in parts).encode("utf-8", "surrogatepass")
    return hmac.new(key, message, hashlib.sha256).hexdigest()


@pytest.mark.parametrize(
    "parts",
    [
        ("record", "run-1", 1, "", '{"seq":1}'),
        ("head", "run-1", 7, "ab" * 32),
        ("call", "r", 3, "call_0", "echo", "0" * 64, ""),
        ("session", "s", 2, "caf\u00e9 \U0001f600 \udc80"),  # a lone surrogate is signed too
        ("record", "r", 1, "", "x" * 5000),
    ],
)
def test_a_signature_is_the_hmac_of_the_joined_parts(parts: tuple[str | int, ...]) -> None:
    key = b"store-key-0123456789"
    assert sign(key, *parts) == one_shot(key, *parts)
    assert sign(key, *parts) == sign(key, *parts)  # the kept state is copied, never spent
    assert matches(one_shot(key, *parts), key, *parts)


def test_every_key_signs_with_its_own_state() -> None:
    keys = [bytes([n]) * n for n in range(1, 40)] + [b"k" * 200]  # more than it keeps
    for key in keys * 2:  # each key again after the others
        assert sign(key, "record", "r", 1, "", "{}") == one_shot(key, "record", "r", 1, "", "{}")
    assert len({sign(key, "head", "r", 1, "m") for key in keys}) == len(keys)


def test_an_edited_part_does_not_match() -> None:
    key = b"k"
    signature = sign(key, "record", "r", 1, "", '{"a":1}')
    assert not matches(signature, key, "record", "r", 1, "", '{"a":2}')
    assert not matches(signature, b"other", "record", "r", 1, "", '{"a":1}')
    assert not matches(signature, key, "record", "r1", "", '{"a":1}')  # parts kept apart
