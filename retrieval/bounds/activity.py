"""This web process's searches, counted for the background work that yields to them:
searches admitted, and those that took longer than SEARCH_PRESSURE_SLOW_MS. A thread
publishes what grew, each tenth of a second in which it grew
(resilience/search_pressure.py).

The handler counts on the event loop with two integer increments; the thread only reads
the totals and keeps its own last reading, so nothing is locked on a search's path, and
a Redis that is slow or gone delays the publication, never a search.
"""

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

import redis
from django.conf import settings

from resilience import search_pressure
from resilience.redis_clients import fast_redis

logger = logging.getLogger(__name__)


class SearchActivity:
    def __init__(self, slow_s: float) -> None:
        self._slow_s = slow_s
        self.admitted = 0
        self.slow = 0

    def started(self) -> None:
        self.admitted += 1

    def finished(self, seconds: float) -> None:
        if seconds > self._slow_s:
            self.slow += 1


class Publisher:
    """Publishes what an activity's totals grew by, every PUBLISH_INTERVAL_S in which they
    grew: readers already count a process that published nothing lately as quiet, so an
    idle process writes nothing."""

    def __init__(
        self,
        activity: SearchActivity,
        client: redis.Redis,
        member: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._activity, self._client, self._member, self._clock = activity, client, member, clock
        self._last = (activity.admitted, activity.slow, clock())

    def publish(self) -> None:
        admitted, slow, now = self._activity.admitted, self._activity.slow, self._clock()
        before_admitted, before_slow, before = self._last
        self._last = (admitted, slow, now)
        if (admitted, slow) == (before_admitted, before_slow):
            return
        search_pressure.publish(
            self._client, self._member, admitted - before_admitted, slow - before_slow, now - before
        )

    def run(self) -> None:
        while True:
            time.sleep(search_pressure.PUBLISH_INTERVAL_S)
            try:
                self.publish()
            except redis.RedisError as exc:  # this process's searches go uncounted meanwhile
                logger.debug("search pressure not published (%s)", type(exc).__name__)


# Until start_publishing: counted, none slow, published by nobody.
_activity = SearchActivity(float("inf"))


def activity() -> SearchActivity:
    return _activity


def start_publishing() -> threading.Thread:
    """Count this process's searches from now on and publish them from a daemon thread
    (web processes only)."""
    global _activity  # set once, at the web process's start-up
    _activity = SearchActivity(settings.SEARCH_PRESSURE_SLOW_MS / 1000)
    member = f"{socket.gethostname()}:{os.getpid()}"
    publisher = Publisher(_activity, fast_redis(), member)
    thread = threading.Thread(target=publisher.run, name="search-pressure", daemon=True)
    thread.start()
    return thread
