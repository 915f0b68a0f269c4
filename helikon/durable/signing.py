"""Keyed signatures of what a store holds, so an edited row is refused instead of believed.

A run's header, and the head of its hash chain (`helikon.durable.chain`: every row it owns,
each a link), carry an HMAC-SHA256; so does the head of a session's chain. Rows carry no
signature of their own: the chain covers them, one hash a row and one HMAC a transaction.
The key never lives in the database: it is given (`key=`), or read from $HELIKON_STORE_KEY, or,
for an SQLite file, kept in a file beside it (`runs.db.key`, mode 0600, made on first use).
A store whose key is lost cannot be resumed from, by design.
"""

from __future__ import annotations

import hmac
import os
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

try:  # OpenSSL's HMAC object, as the `hmac` module uses it itself
    import _hashlib

    _hmac_new: Any = _hashlib.hmac_new
except ImportError:  # pragma: no cover - a Python built without OpenSSL
    _hmac_new = None


class _Keyed(Protocol):
    def copy(self) -> _Keyed: ...
    def update(self, message: bytes) -> None: ...
    def hexdigest(self) -> str: ...


KEY_VARIABLE = "HELIKON_STORE_KEY"


def resolve_key(given: bytes | str | None, key_file: Path | None) -> bytes:
    """The store's key: `given`, else $HELIKON_STORE_KEY, else `key_file`'s (made when
    missing), else a random key for this store object alone (an in-memory store)."""
    if given is not None:
        return given.encode("utf-8") if isinstance(given, str) else bytes(given)
    from_env = os.environ.get(KEY_VARIABLE)
    if from_env:
        return from_env.encode("utf-8")
    if key_file is None:
        return secrets.token_bytes(32)
    return _key_from_file(key_file)


def _key_from_file(path: Path) -> bytes:
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    except ValueError:
        raise ValueError(f"{path} does not hold a store key (64 hex digits)") from None
    key = secrets.token_bytes(32)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        descriptor = os.open(path, flags, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return bytes.fromhex(path.read_text().strip())
    with os.fdopen(descriptor, "w") as file:
        file.write(key.hex() + "\n")
    return key


def sign(key: bytes, *parts: str | int) -> str:
    """HMAC-SHA256 (hex) of `parts`, each kept apart from the next (no two splits collide).

    It runs for every row a store writes or reads, so the key's HMAC state (its padded
    blocks, hashed once) is kept per key and copied for each message: a copy and one update
    cost about half of a one-shot `hmac.digest`, which hashes the key's blocks again."""
    message = "\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")
    keyed = _keyed(key).copy()
    keyed.update(message)
    return keyed.hexdigest()


@lru_cache(maxsize=16)
def _keyed(key: bytes) -> _Keyed:
    """The HMAC-SHA256 state of `key` before any message (OpenSSL's object when there is
    one: the pure-Python `hmac.HMAC` wrapper around it costs its copy again)."""
    if _hmac_new is not None:
        keyed: _Keyed = _hmac_new(key, digestmod="sha256")
        return keyed
    return hmac.new(key, digestmod="sha256")


def matches(signature: str, key: bytes, *parts: str | int) -> bool:
    return hmac.compare_digest(signature, sign(key, *parts))
