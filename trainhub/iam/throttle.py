"""Failed sign-ins, counted per account and per client address in Redis, shared by every web and
API process; every login (the web /login/, the admin's /admin/login/ and the API's /auth/token)
starts an attempt before it checks a password (the attempt counts as a failure from then on) and
reports a success after.

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


#: Atomically: refuse (answering the seconds to wait) when the account or the address has used its
#: failures, else count this attempt as a failure now and restart both windows (answering 0). An
#: attempt counts before its password is checked, so concurrent attempts cannot all pass the check
#: before any of them is counted (30 at once were all checked against a limit of 10).
_START = """
local account = tonumber(redis.call('GET', KEYS[1]) or '0')
local address = tonumber(redis.call('GET', KEYS[2]) or '0')
local wait = 0
if account >= tonumber(ARGV[1]) then wait = math.max(wait, redis.call('TTL', KEYS[1]), 1) end
if address >= tonumber(ARGV[2]) then wait = math.max(wait, redis.call('TTL', KEYS[2]), 1) end
if wait > 0 then return wait end
for _, key in ipairs(KEYS) do
  redis.call('INCR', key)
  redis.call('EXPIRE', key, ARGV[3])
end
return 0
"""
#: A success: the account's count is cleared; the address's loses the attempt counted at its start.
_SUCCEEDED = """
redis.call('DEL', KEYS[1])
if tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then redis.call('DECR', KEYS[2]) end
"""


def login_attempt_start(*, username: str, address: str) -> int:
    """0 if a sign-in may be tried now (the attempt then counts as a failure until
    login_succeeded), else how many seconds until one may."""
    try:
        return int(get_redis().eval(_START, 2, *_keys(username, address),
                                    settings.TRAINHUB_LOGIN_FAILURES_PER_ACCOUNT,
                                    settings.TRAINHUB_LOGIN_FAILURES_PER_ADDRESS,
                                    settings.TRAINHUB_LOGIN_WINDOW_SECONDS))
    except (RedisError, RedisNotConfigured):
        logger.warning("Sign-in throttling is off: Redis is not reachable")
        return 0


def login_succeeded(*, username: str, address: str) -> None:
    try:
        get_redis().eval(_SUCCEEDED, 2, *_keys(username, address))
    except (RedisError, RedisNotConfigured):
        pass


def blocked_message(seconds: int) -> str:
    minutes = -(-seconds // 60)
    return f"Too many failed sign-in attempts. Try again in {minutes} minute{'s' if minutes != 1 else ''}."
