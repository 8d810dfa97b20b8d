"""One Redis client per process for application data (cache, breaker state, heartbeats)."""

from functools import cache

import redis
from django.conf import settings


@cache
def get_redis() -> redis.Redis:
    # Short timeouts: a stalled Redis must cost a request milliseconds, not seconds.
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=0.5, socket_connect_timeout=0.5)
