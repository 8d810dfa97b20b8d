"""Celery workers announce themselves in Redis so /healthz can tell a live worker from a
queue that nobody consumes."""

import socket
import time
from contextlib import suppress
from typing import Any

import redis
from celery import bootsteps
from django.conf import settings

from resilience import redis_keys
from resilience.redis_clients import get_redis

HEARTBEAT_KEY = redis_keys.WORKER_HEARTBEATS


def beat(client: redis.Redis, hostname: str, now: float | None = None) -> None:
    client.hset(HEARTBEAT_KEY, hostname, now if now is not None else time.time())


def newest_age_s(client: redis.Redis, now: float | None = None) -> float | None:
    """Seconds since the most recent heartbeat of any worker, or None if there was none."""
    stamps = [float(value) for value in client.hvals(HEARTBEAT_KEY)]
    if not stamps:
        return None
    return (now if now is not None else time.time()) - max(stamps)


class HeartbeatStep(bootsteps.StartStopStep):
    requires = ("celery.worker.components:Timer",)

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.tref: Any = None
        self.hostname = getattr(worker, "hostname", None) or socket.gethostname()

    def start(self, worker: Any) -> None:
        self._beat()
        self.tref = worker.timer.call_repeatedly(settings.WORKER_HEARTBEAT_INTERVAL_S, self._beat)

    def stop(self, worker: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
        # Shutting down: if Redis is gone too, the stale heartbeat simply ages out.
        with suppress(redis.RedisError):
            get_redis().hdel(HEARTBEAT_KEY, self.hostname)

    def _beat(self) -> None:
        # The next tick retries; /healthz reports Redis itself.
        with suppress(redis.RedisError):
            beat(get_redis(), self.hostname)
