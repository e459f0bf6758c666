"""Bearer secrets, stored only as digests: the raw value is shown once, when it is made.

``token_new()`` makes a secret and the digest to store; ``token_digest(raw)`` is what a lookup
compares. A SHA-256 digest is enough (no slow hash): the secret is 256 random bits, not a
password, so the database leaking cannot be turned back into tokens by guessing. Used for users'
API tokens (iam.ApiToken) and meant for any other credential trainhub hands out (node credentials).
"""

from __future__ import annotations

import hashlib
import secrets

#: Every raw user API token starts with this (so a leaked one is recognisable, e.g. by secret
#: scanners); node join tokens and node credentials have their own (inventory.services).
TOKEN_PREFIX = "th_"


def token_digest(raw: str) -> str:
    """The hex SHA-256 digest (64 characters) stored for ``raw``."""
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def token_new(prefix: str = TOKEN_PREFIX) -> tuple[str, str]:
    """A new raw token and its digest: (raw, digest). Show ``raw`` once; store ``digest``."""
    raw = prefix + secrets.token_urlsafe(32)
    return raw, token_digest(raw)
