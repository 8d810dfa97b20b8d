"""A circuit breaker as pure functions over a small, serialisable state.

Ingestion keeps one per source in Postgres; retrieval keeps the vector stage's in Redis so
every web process agrees. Both use these functions, with the clock passed in, so tests
drive time instead of sleeping.

closed --(enough calls in the window, and too many of them failed or slow)--> open
open --(cool-down elapsed; one caller is let through as a probe)--> half_open
half_open --(probe succeeds)--> closed;  --(probe fails)--> open again

Hand-written, not a library's. pybreaker, and aiobreaker (its asyncio port), open after a
number of failures in a row and keep their state in a process's memory (pybreaker's Redis
storage takes a synchronous client); purgatory opens after a threshold of failures too,
shares its state through Redis, and wraps the call as a context manager. None decides on
the failed-or-slow share of the calls in a time window, and none keeps its state as a
plain value the caller stores where it lives (a source's breaker is a Postgres row), with
the clock passed in.
"""

from dataclasses import dataclass, field, replace
from typing import Any, Literal

State = Literal["closed", "open", "half_open"]


@dataclass(frozen=True)
class BreakerPolicy:
    window_s: float  # how far back outcomes count
    min_calls: int  # no verdict on fewer calls than this
    failure_ratio: float  # failed-or-slow share that opens the breaker
    cooldown_s: float  # how long it stays open before a probe


@dataclass(frozen=True)
class BreakerState:
    state: State = "closed"
    opened_at: float | None = None
    probe_started_at: float | None = None
    # (time, failed) pairs inside the window; slow calls are recorded as failed.
    outcomes: tuple[tuple[float, bool], ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "opened_at": self.opened_at,
            "probe_started_at": self.probe_started_at,
            "outcomes": [list(pair) for pair in self.outcomes],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "BreakerState":
        if not data:
            return cls()
        return cls(
            state=data.get("state", "closed"),
            opened_at=data.get("opened_at"),
            probe_started_at=data.get("probe_started_at"),
            outcomes=tuple((float(t), bool(f)) for t, f in data.get("outcomes", [])),
        )


def policy_from_settings(prefix: str) -> BreakerPolicy:
    """The policy configured as <prefix>_WINDOW_S, _MIN_CALLS, _FAILURE_RATIO, _COOLDOWN_S."""
    from django.conf import settings

    return BreakerPolicy(
        window_s=getattr(settings, f"{prefix}_WINDOW_S"),
        min_calls=getattr(settings, f"{prefix}_MIN_CALLS"),
        failure_ratio=getattr(settings, f"{prefix}_FAILURE_RATIO"),
        cooldown_s=getattr(settings, f"{prefix}_COOLDOWN_S"),
    )


def admit(breaker: BreakerState, policy: BreakerPolicy, now: float) -> tuple[bool, BreakerState]:
    """May a call go ahead? Returns the verdict and the (possibly changed) breaker."""
    if breaker.state == "closed":
        return True, breaker
    if breaker.state == "open":
        if breaker.opened_at is not None and now - breaker.opened_at < policy.cooldown_s:
            return False, breaker
        return True, replace(breaker, state="half_open", probe_started_at=now)
    # Half-open: one probe at a time; a probe that never reported back (its process died)
    # is given up on after a cool-down so the breaker cannot stay wedged half-open.
    if breaker.probe_started_at is not None and now - breaker.probe_started_at < policy.cooldown_s:
        return False, breaker
    return True, replace(breaker, probe_started_at=now)


def record(
    breaker: BreakerState, policy: BreakerPolicy, now: float, *, failed: bool
) -> BreakerState:
    """Fold one call's outcome into the breaker."""
    return record_many(breaker, policy, now, calls=1, failures=int(failed))


def record_many(
    breaker: BreakerState, policy: BreakerPolicy, now: float, *, calls: int, failures: int
) -> BreakerState:
    """Fold in `calls` outcomes at `now`, the first `failures` of them failed: the same
    breaker as `record` once per outcome, for one pass over the window instead of one per
    outcome (a process that lost Redis hands over many at a time)."""
    for number in range(calls):
        if breaker.state == "open":
            return breaker  # stragglers that started before the breaker opened
        if breaker.state == "half_open":  # the probe's outcome settles it
            breaker = opened(now) if number < failures else BreakerState()
            continue
        recent = [o for o in breaker.outcomes if now - o[0] < policy.window_s]
        failed = sum(1 for _, was_failure in recent if was_failure)
        for later in range(number, calls):
            recent.append((now, later < failures))
            failed += later < failures
            if trips(len(recent), failed, policy):
                return opened(now)
        return replace(breaker, outcomes=tuple(recent))
    return breaker


def opened(now: float) -> BreakerState:
    return BreakerState(state="open", opened_at=now)


def trips(calls: int, failures: int, policy: BreakerPolicy) -> bool:
    """Whether a closed breaker's window of `calls` outcomes, `failures` of them failed,
    opens it. Also used on counts kept elsewhere (resilience/shared_breaker.py)."""
    return calls > 0 and calls >= policy.min_calls and failures / calls >= policy.failure_ratio
