"""Secrets that authenticate a caller: made from the OS's random source, stored only as digests."""

from __future__ import annotations

import hashlib
import secrets


def token_digest(raw: str) -> str:
    """The SHA-256 hex digest stored in place of a token (a high-entropy secret needs no salt)."""
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def token_new(prefix: str = "") -> tuple[str, str]:
    """A new random token and its digest; the raw value is shown once and never stored."""
    raw = prefix + secrets.token_urlsafe(32)
    return raw, token_digest(raw)
