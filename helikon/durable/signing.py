"""Keyed signatures of what a store holds, so an edited row is refused instead of believed.

Every record carries an HMAC-SHA256 over its run id, seq, the previous record's signature and
its own JSON: a chain, so a record edited, removed or reordered breaks every signature after
it. Calls, decisions, effects and the run's header are signed the same way (unchained). The
key never lives in the database: it is given (`key=`), or read from $HELIKON_STORE_KEY, or,
for an SQLite file, kept in a file beside it (`runs.db.key`, mode 0600, made on first use).
A store whose key is lost cannot be resumed from, by design.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

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

    One-shot `hmac.digest` (OpenSSL's, no HMAC object per row): it runs for every row a
    store writes or reads."""
    message = "\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")
    return hmac.digest(key, message, "sha256").hex()


def matches(signature: str, key: bytes, *parts: str | int) -> bool:
    return hmac.compare_digest(signature, sign(key, *parts))
