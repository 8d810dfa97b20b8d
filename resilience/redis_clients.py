"""Redis clients that fail fast: a stalled Redis must cost a request milliseconds, not
seconds."""

from functools import cache

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry


@cache
def get_redis() -> redis.Redis:
    """One client per process for application data (cache, heartbeats, task bookkeeping)."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=0.5, socket_connect_timeout=0.5)


def breaker_redis_client(url: str, *, timeout_s: float = 0.05) -> redis.Redis:
    """A client for a shared breaker, which the hot path asks: short timeouts and no
    retries (redis-py retries a failed command 10 times by default, which would turn an
    outage into seconds per search)."""
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


def fast_redis() -> redis.Redis:
    """One fail-fast client per process (per REDIS_URL) for the signals that background
    work reads and writes beside searches (search pressure, the sweep's pace): a slow
    Redis costs them 50 ms."""
    return _fast(settings.REDIS_URL)


@cache
def _fast(url: str) -> redis.Redis:
    return breaker_redis_client(url)
