"""Vector work yields to searches: the arbiter between the embedding sweep and the search
pressure the web processes publish (resilience/search_pressure.py).

Work goes in slices (the sweep's model work, a few texts at a time; a payload's listings,
a chunk of drafts at a time), and each slice asks the pacer first:
- searches quiet (none admitted in the last few tenths of a second, or no web process):
  the slice runs at once, the sweep at full speed;
- searches arriving: the floor, let through as credit accrues, so the slices come at a
  steady interval: the policy's `floor_per_s` listings a second, or for the vectors what
  the listings waiting need to have their vectors within EMBED_CATCH_UP_S of the oldest
  one's fetch (`catch_up_rate`), whichever is more, and never more than
  EMBED_CATCH_UP_MOST_PER_S. The vector lag stays bounded under pressure that never ends,
  searches pay for no more vector work a second than the freshness objective asks, and a
  stream of listings past that bound makes the lag grow, not the searches wait;
- where the policy gives the work a `share` (a payload's listings; the vectors only if
  EMBED_BUSY_SHARE is set), also at most that share of the time, resting after each slice
  for as long as it took times (1 - share) / share. The share halves while more searches
  than the policy allows were slow, and grows back while none were. Model work on idle
  cores (ingestion/idle_cores.py) rests at a fixed share of its own instead.
The vectors get no share by default: beside searches at 0.5 and 0.7 of the capacity limit,
the share's work moved their p99 more than the floor's steady slices did at the same or a
higher rate (docs/decisions/vector-work-yields-to-searches.md).
An unreadable pressure (Redis down) counts as searches arriving: searches first, and the
floor still holds. While searches arrive, a sweep someone queued waits a little before its
first claim (`gather`), so that a trickle's listings go into one sweep, not one sweep each.

The pacer only waits between slices, so it backs off within one slice's time (a tenth of a
second or so) and resumes within one poll of the pressure. Work that must not wait where
it runs (the sweep's vector writes, HNSW inserts on pages the vector searches read, done
while their listings are locked) is charged to the pacer instead: where there is a share,
the next slice rests for it, so the share covers both of the sweep's threads.
"""

import enum
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis
from django.conf import settings

from ingestion import metrics
from ingestion.embedding_lag import EmbeddingLag, embedding_lag
from resilience import redis_keys, search_pressure
from resilience.redis_clients import fast_redis
from resilience.search_pressure import Pressure

logger = logging.getLogger(__name__)

# How often the pressure is read again: a slice never waits longer than this to notice
# that searches went quiet.
POLL_S = 0.1
# A wait shorter than this would be spent on rounding (the credit a hair short of a slice).
SHORTEST_WAIT_S = 0.001
# The share's smallest value, as a fraction of the policy's: below it only the floor
# matters.
SMALLEST_SHARE = 1 / 32
# The share of slow searches is averaged over about this long; the share halves at most
# this often (the slices in hand when it halves still end), and grows back from its
# smallest to the policy's over RECOVER_S.
SLOW_WINDOW_S = 1.0
HALVE_EVERY_S = 0.5
RECOVER_S = 5.0
# The pace is reported when it changes and at least this often while a sweep runs; the
# report lives a little longer (PACE_TTL_S), so it is gone soon after the sweep ends.
REPORT_EVERY_S = 2.0
PACE_TTL_S = 5
# Read pressure that is unknown: as if searches arrived, none of them slow.
UNKNOWN = Pressure(float("inf"), 0.0)


class Mode(enum.StrEnum):
    FULL = "full"  # searches quiet
    SHARED = "shared"  # searches arriving: a share of the time
    FLOOR = "floor"  # searches arriving: only the floor's progress


@dataclass(frozen=True)
class PacePolicy:
    # The most of the time the work runs while searches arrive; 0: none, the floor alone.
    busy_share: float
    slow_share: float  # past this share of slow searches, the work's share halves
    floor_per_s: float  # listings a second at the least, whatever the pressure
    # The share it starts at, of busy_share: the vector sweep starts cautious, at the
    # smallest, and earns the rest while searches stay fast; a payload's listings, whose
    # lexical freshness is measured in seconds, start at the whole of it.
    start: float = SMALLEST_SHARE

    @classmethod
    def for_vectors(cls) -> "PacePolicy":
        return cls(settings.EMBED_BUSY_SHARE, settings.EMBED_SLOW_SHARE, settings.EMBED_FLOOR_PER_S)

    @classmethod
    def for_listings(cls) -> "PacePolicy":
        return cls(
            settings.INGEST_BUSY_SHARE,
            settings.EMBED_SLOW_SHARE,
            settings.INGEST_FLOOR_PER_S,
            start=1.0,
        )


@dataclass(frozen=True)
class Pace:
    """What a sweep's pacer last said: its mode, its share of the time and its floor."""

    mode: Mode
    share: float
    floor_per_s: float


class Pacer:
    def __init__(
        self,
        pressure: Callable[[], Pressure],
        policy: PacePolicy,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        report: Callable[[Pace], None] = lambda pace: None,
        work: str = "vectors",
        need: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self._work = work  # the metrics' label: "vectors" or "listings"
        self._pressure, self._policy, self._clock, self._sleep = pressure, policy, clock, sleep
        # Listings a second the backlog needs, read with the pressure: the floor is at
        # least that.
        self._need = need
        self.floor_per_s = policy.floor_per_s
        self._report = report
        self._reported_at = float("-inf")
        self._lock = threading.Lock()
        # When searches are quiet the work runs at full speed, whatever the share.
        self.share = policy.busy_share * policy.start
        self._searches = self._slow = 0.0  # a second's averages, a second
        self._halved_at = float("-inf")
        self.mode = Mode.FULL
        now = clock()
        self._rest_until = now
        self._read_at = float("-inf")
        self._last = search_pressure.QUIET
        # Listings the floor allows before the share does: accrued while searches arrive.
        self._credit = 0.0
        self._credit_at = now

    @contextmanager
    def slice(self, items: int, *, share: float | None = None) -> Iterator[None]:
        """Around a slice of `items` listings' work: waits until it may run, and counts
        the time it took against the pacer's share, or against a fixed `share` of its own:
        work that takes only CPU searches leave (ingestion/idle_cores.py) is not held to
        the share slow searches shrink, but it is not free to them either."""
        self.admit(items)
        started = self._clock()
        yield
        self.charge(self._clock() - started, share)

    def charge(self, seconds: float, share: float | None = None) -> None:
        """Count work that ran without asking (it could not wait where it ran) against the
        share, or a fixed `share`: the next slice rests for it."""
        with self._lock:
            share = self.share if share is None else share
            if self.mode != Mode.FULL and share > 0:  # else only the floor lets work through
                start = max(self._rest_until, self._clock())
                self._rest_until = start + seconds * (1 - share) / share

    def admit(self, items: int) -> None:
        """Wait until `items` listings' work may run: for work not timed here (a claim's
        vectors made before, whose writes still cost the searches)."""
        while True:
            pressure = self._read()
            with self._lock:
                now = self._clock()
                if pressure.quiet:
                    self._credit, self._credit_at = 0.0, now
                    self._let_through(Mode.FULL, items)
                    return
                self._accrue(now, items)
                if self.share > 0 and now >= self._rest_until:
                    self._credit = max(0.0, self._credit - items)
                    self._let_through(Mode.SHARED, items)
                    return
                if self._credit >= items:
                    self._credit -= items
                    self._let_through(Mode.FLOOR, items)
                    return
                wait = min(POLL_S, max(SHORTEST_WAIT_S, self._until_admitted(now, items)))
            metrics.PACED_REST.labels(work=self._work).inc(wait)
            self._sleep(wait)

    def _until_admitted(self, now: float, items: int) -> float:
        """How long until the floor's credit, or the share's rest, lets `items` through."""
        waits = [self._rest_until - now] if self.share > 0 else []
        if self.floor_per_s > 0:
            waits.append((items - self._credit) / self.floor_per_s)
        return min(waits, default=POLL_S)

    def _read(self) -> Pressure:
        """The pressure, read again once a poll; the share follows what it says. Redis is
        read outside the lock, so the sweep's other thread, charging its writes, never
        waits behind the read's round trip."""
        with self._lock:
            now = self._clock()
            if now - self._read_at < POLL_S:
                return self._last
            self._read_at = now  # this poll's: another thread meanwhile uses the last
        pressure = pressure_or_unknown(self._pressure)
        need = self._need()
        with self._lock:
            self._last = pressure
            self.floor_per_s = max(self._policy.floor_per_s, need)
            if pressure is not UNKNOWN:  # else the share stays: nothing is known of searches
                self._steer(now, pressure)
        return pressure

    def _steer(self, now: float, pressure: Pressure) -> None:
        """Additive increase, multiplicative decrease, on the share of slow searches over
        about the last second: halved at most twice a second while more than the policy's
        share are slow, grown back to the policy's share over RECOVER_S while none are. A
        poll holds a few searches, so one slow search in it would say little alone."""
        weight = POLL_S / SLOW_WINDOW_S
        self._searches += weight * (pressure.searches_per_s - self._searches)
        slow = pressure.searches_per_s * pressure.slow_share
        self._slow += weight * (slow - self._slow)
        busy = self._policy.busy_share
        if self._searches > 0 and self._slow / self._searches > self._policy.slow_share:
            if now - self._halved_at >= HALVE_EVERY_S:
                self._halved_at = now
                self.share = max(busy * SMALLEST_SHARE, self.share / 2)
        elif not pressure.quiet:
            self.share = min(busy, self.share + busy * POLL_S / RECOVER_S)

    def _accrue(self, now: float, items: int) -> None:
        # At most one slice's worth, or one second's, is kept: a quiet spell's credit would
        # otherwise let a burst through all at once when searches come back.
        cap = max(float(items), self.floor_per_s)
        self._credit = min(cap, self._credit + (now - self._credit_at) * self.floor_per_s)
        self._credit_at = now

    def _let_through(self, mode: Mode, items: int) -> None:
        metrics.PACED.labels(work=self._work, mode=mode.value).inc(items)
        changed = mode != self.mode
        self.mode = mode
        now = self._clock()
        if changed or now - self._reported_at >= REPORT_EVERY_S:
            self._reported_at = now
            self._report(Pace(mode, self.share, self.floor_per_s))


def read_pressure() -> Pressure:
    return search_pressure.read(fast_redis())


def gather(
    pressure: Callable[[], Pressure] = read_pressure,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Before a sweep's first claim: while searches arrive (or their pressure cannot be
    read), wait EMBED_GATHER_S, and less if they go quiet meanwhile, so that the listings
    arriving in that time go into this sweep. A sweep's claims, commits and model calls
    cost per sweep about as much as per listing: beside searches at 52 a second, a trickle
    of 5 listings a second made about four sweeps a second, and gathered for 2 s it cost
    Postgres +0.01-0.02 of a core instead of +0.06-0.08 (docs/decisions/vector-work-yields-
    to-searches.md). It waits in the task, not as a Celery countdown: a worker holding a
    countdown's message when Valkey stopped exited instead of reconnecting. The wait counts
    among the vectors' rests (`ingestion_paced_rest_seconds_total`)."""
    until = clock() + settings.EMBED_GATHER_S
    while (now := clock()) < until and not pressure_or_unknown(pressure).quiet:
        wait = min(POLL_S, until - now)
        metrics.PACED_REST.labels(work="vectors").inc(wait)
        sleep(wait)


def pressure_or_unknown(pressure: Callable[[], Pressure]) -> Pressure:
    """The search pressure, or UNKNOWN (searches arriving, none slow) when it cannot be
    read: searches first."""
    try:
        return pressure()
    except (redis.RedisError, ValueError, KeyError) as exc:
        logger.debug("search pressure unreadable (%s): yielding", type(exc).__name__)
        return UNKNOWN


def report_pace(pace: Pace) -> None:
    try:
        value = json.dumps(
            {"mode": pace.mode.value, "share": pace.share, "floor": pace.floor_per_s}
        )
        fast_redis().set(redis_keys.VECTOR_PACE, value, ex=PACE_TTL_S)
    except redis.RedisError as exc:  # the ops page says "not known" meanwhile
        logger.debug("vector pace not reported (%s)", type(exc).__name__)


def reported_pace(client: redis.Redis) -> Pace | None:
    """The pace a sweep reported lately, or None when no sweep runs (or Redis is down)."""
    try:
        raw = client.get(redis_keys.VECTOR_PACE)
    except redis.RedisError:
        return None
    if not isinstance(raw, bytes):
        return None
    found = json.loads(raw)
    # A worker of the release before reported no floor (for the few seconds its report
    # lives after a deploy): its floor was the setting.
    floor = found.get("floor", settings.EMBED_FLOOR_PER_S)
    return Pace(Mode(found["mode"]), float(found["share"]), float(floor))


def sweep_pacer() -> Pacer:
    """A pacer for one sweep, by the settings, the web processes' published pressure and
    the listings waiting for their vectors, reporting its pace for the ops page."""
    return Pacer(read_pressure, PacePolicy.for_vectors(), report=report_pace, need=backlog_rate)


def backlog_rate() -> float:
    return catch_up_rate(
        embedding_lag(), settings.EMBED_CATCH_UP_S, settings.EMBED_CATCH_UP_MOST_PER_S
    )


def catch_up_rate(lag: EmbeddingLag | None, within_s: float, most_per_s: float) -> float:
    """Listings a second that give every listing waiting its vector within `within_s` of
    the oldest one's fetch (at that rate from now on, the last is done as the oldest comes
    due), and never more than `most_per_s`, the oldest already late included. A floor sized
    so does a 5,000-listing burst in about the objective's time, and no sooner, whatever
    the searches leave: beside searches at half the capacity limit the vectors' work moved
    their p99 by more the more of it there was a second
    (docs/decisions/vector-work-yields-to-searches.md). 0 with nothing waiting, the lag
    unknown, or `within_s` 0 (the configured floor alone)."""
    if lag is None or lag.pending == 0 or lag.oldest_s is None or within_s <= 0:
        return 0.0
    left = within_s - lag.oldest_s
    return most_per_s if left <= 0 else min(most_per_s, lag.pending / left)


def payload_pacer() -> Pacer:
    """A pacer for one payload's listings (a poll, an upload, the editorial API,
    `manage.py ingest`)."""
    return Pacer(read_pressure, PacePolicy.for_listings(), work="listings")
