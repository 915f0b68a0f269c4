"""helikon.core.approvals: the argument hash that binds a decision to the exact call.

The hash is stored with every pending approval (snapshots, stores), so its value for a given
argument text is part of the contract: the known vectors below must never change.
"""

from __future__ import annotations

import hashlib

import pytest

from helikon import ApprovalRequest, ToolCall
from helikon.core.approvals import arguments_hash


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (
            '{"amount": 120, "to": "bob"}',
            "91a4ae34824884fdc9ff6377987ec7b1bfe61d4c519af1467d1660906b5d17b2",
        ),
        (
            '{"city": "Zürich 😀"}',
            "0c307f7afbf38217871ec4068d47aa63e6aa9502894323d5e0ae928539936c56",
        ),
    ],
)
def test_the_hash_of_ordinary_text_is_sha256_of_its_utf8(arguments: str, expected: str) -> None:
    assert arguments_hash(arguments) == expected
    assert expected == hashlib.sha256(arguments.encode("utf-8")).hexdigest()


LONE = '{"to": "\ud800"}'  # what json.loads makes of a wire's "\\ud800"


def test_a_lone_surrogate_hashes_without_error_and_losslessly() -> None:
    digest = arguments_hash(LONE)

    assert len(digest) == 64
    assert digest != arguments_hash('{"to": "\ufffd"}'), "not replaced before hashing"
    assert digest != arguments_hash('{"to": "\udc00"}')
    assert digest != arguments_hash('{"to": "\\ud800"}'), "not the escaped text either"


def test_an_approval_for_a_call_with_a_lone_surrogate_binds_to_it() -> None:
    request = ApprovalRequest.for_call(ToolCall("c1", "transfer", LONE))

    assert request.approve().binds(request)
    other = ApprovalRequest.for_call(ToolCall("c1", "transfer", '{"to": "\udc00"}'))
    assert not request.approve().binds(other)
