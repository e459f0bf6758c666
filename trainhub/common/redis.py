"""The one Redis connection of a process (Celery broker and scheduler working memory)."""

from functools import lru_cache

import redis
from django.conf import settings


class RedisNotConfigured(RuntimeError):
    pass


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5, health_check_interval=30)


def get_redis() -> redis.Redis:
    url = settings.REDIS_URL
    if not url:
        raise RedisNotConfigured(
            "REDIS_URL is not set: start trainhub with `make run` (embedded Redis) or set REDIS_URL."
        )
    return _client(url)
