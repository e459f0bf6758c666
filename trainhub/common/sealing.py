"""Secrets trainhub must give back later (a registry password), sealed at rest.

Fernet (AES-128-CBC with HMAC-SHA256, from ``cryptography``) under a key derived from
SECRET_KEY with HKDF, so a copy of the database alone reveals nothing. Changing SECRET_KEY makes
sealed values unreadable: they must be set again.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_INFO = b"trainhub sealed secrets v1"


class Unsealable(ValueError):
    """The value was sealed under another SECRET_KEY (or was altered)."""


@lru_cache(maxsize=4)
def _fernet(secret_key: str) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(key))


def seal(plain: str) -> str:
    return _fernet(settings.SECRET_KEY).encrypt(plain.encode()).decode("ascii")


def unseal(sealed: str) -> str:
    try:
        return _fernet(settings.SECRET_KEY).decrypt(sealed.encode("ascii")).decode()
    except InvalidToken:
        raise Unsealable("a sealed secret could not be opened: SECRET_KEY changed since it was set") from None
