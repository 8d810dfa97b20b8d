"""How hard searches are pressing, as the web processes see it, for background work to
yield to (ingestion/pacing.py).

Each web process publishes, every `PUBLISH_INTERVAL_S`, one field of one Redis hash: the
searches it admitted over that interval and how many of them were slow. A reader sums the
fields published within `FRESH_S`: a web process that stopped publishing stops counting,
and the hash itself expires when none publishes. Nothing here is on a search's path: the
web process counts in memory and publishes from a thread of its own.

Raw queries never enter it: two counts and a time per process.
"""

import json
import time
from dataclasses import dataclass

import redis

from resilience import redis_keys

PUBLISH_INTERVAL_S = 0.1
# Two intervals and a margin: a publisher late by one tick still counts.
FRESH_S = 0.35


@dataclass(frozen=True)
class Pressure:
    """Searches a second across the web processes, and the share of them that were slow."""

    searches_per_s: float
    slow_share: float

    @property
    def quiet(self) -> bool:
        return self.searches_per_s == 0


QUIET = Pressure(0.0, 0.0)


def publish(
    client: redis.Redis,
    member: str,
    searches: int,
    slow: int,
    interval_s: float,
    now: float | None = None,
) -> None:
    """One web process's counts over its last interval."""
    at = time.time() if now is None else now
    sample = {"at": at, "n": searches, "slow": slow, "s": interval_s}
    pipe = client.pipeline(transaction=False)
    pipe.hset(redis_keys.SEARCH_PRESSURE, member, json.dumps(sample))
    pipe.pexpire(redis_keys.SEARCH_PRESSURE, int(FRESH_S * 4 * 1000))
    pipe.execute()


def read(client: redis.Redis, now: float | None = None) -> Pressure:
    """The pressure now; raises redis.RedisError when it cannot be read."""
    now = time.time() if now is None else now
    searches = slow = 0.0
    for raw in client.hvals(redis_keys.SEARCH_PRESSURE):
        sample = json.loads(raw)
        if now - float(sample["at"]) <= FRESH_S and sample["s"] > 0:
            searches += sample["n"] / sample["s"]
            slow += sample["slow"] / sample["s"]
    return Pressure(searches, slow / searches if searches else 0.0)
