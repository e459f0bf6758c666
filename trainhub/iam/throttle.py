"""Failed sign-ins, counted per account and per client address in Redis, shared by every web and
API process; every login (the web /login/, the admin's /admin/login/ and the API's /auth/token)
asks before it checks a password and reports what happened after.

An account or an address with TRAINHUB_LOGIN_FAILURES_PER_ACCOUNT / _PER_ADDRESS failures inside
TRAINHUB_LOGIN_WINDOW_SECONDS is refused, the right password included, until the window (which
each failure restarts) has passed. A success clears the account's count. The client address is
REMOTE_ADDR; X-Forwarded-For is read only behind TRAINHUB_TRUSTED_PROXY_COUNT proxies, and then
only the entry the outermost trusted proxy appended (the ones to its left are the client's to
write). Without Redis, sign-ins are not throttled (logged), rather than refused.
"""

from __future__ import annotations

import hashlib
import logging

from django.conf import settings
from django.http import HttpRequest
from redis.exceptions import RedisError

from trainhub.common.redis import RedisNotConfigured, get_redis

logger = logging.getLogger(__name__)
PREFIX = "trainhub:login-failures:"


def client_address(request: HttpRequest) -> str:
    """The address of the client: REMOTE_ADDR, or the X-Forwarded-For entry that the outermost of
    TRAINHUB_TRUSTED_PROXY_COUNT proxies appended."""
    proxies = settings.TRAINHUB_TRUSTED_PROXY_COUNT
    remote = request.META.get("REMOTE_ADDR", "")
    if proxies <= 0:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    return forwarded[-proxies] if len(forwarded) >= proxies else remote


def _keys(username: str, address: str) -> tuple[str, str]:
    # Hashed: a username may be any text a client sends, of any length.
    account = hashlib.sha256(username.strip().lower().encode("utf-8", "replace")).hexdigest()
    return PREFIX + "account:" + account, PREFIX + "address:" + address


def login_blocked_seconds(*, username: str, address: str) -> int:
    """0 if a sign-in may be tried now, else how many seconds until it may."""
    account_key, address_key = _keys(username, address)
    try:
        client = get_redis()
        with client.pipeline(transaction=False) as pipe:
            pipe.get(account_key).get(address_key).ttl(account_key).ttl(address_key)
            account, by_address, account_ttl, address_ttl = pipe.execute()
    except (RedisError, RedisNotConfigured):
        logger.warning("Sign-in throttling is off: Redis is not reachable")
        return 0
    waits = []
    if account is not None and int(account) >= settings.TRAINHUB_LOGIN_FAILURES_PER_ACCOUNT:
        waits.append(max(account_ttl, 1))
    if by_address is not None and int(by_address) >= settings.TRAINHUB_LOGIN_FAILURES_PER_ADDRESS:
        waits.append(max(address_ttl, 1))
    return max(waits, default=0)


def login_failed(*, username: str, address: str) -> None:
    window = settings.TRAINHUB_LOGIN_WINDOW_SECONDS
    try:
        with get_redis().pipeline(transaction=False) as pipe:
            for key in _keys(username, address):
                pipe.incr(key).expire(key, window)
            pipe.execute()
    except (RedisError, RedisNotConfigured):
        logger.warning("Sign-in throttling is off: Redis is not reachable")


def login_succeeded(*, username: str, address: str) -> None:
    try:
        get_redis().delete(_keys(username, address)[0])
    except (RedisError, RedisNotConfigured):
        pass


def blocked_message(seconds: int) -> str:
    minutes = -(-seconds // 60)
    return f"Too many failed sign-in attempts. Try again in {minutes} minute{'s' if minutes != 1 else ''}."
