"""One search request's time: its deadline, and how it is shared among the stages.

Budgets are planned once per request from the configured policy and the caller's own
timeout, and started once as a `SearchDeadline`: the one object every part of the search
is handed (both stages, the cache, loading the listings), so no part gets time of its own
again. It runs on an injectable clock, so tests move time instead of waiting."""

import dataclasses
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from retrieval.bounds.arms import Arm
from retrieval.query.parse import BadQueryError

Clock = Callable[[], float]  # seconds from an arbitrary origin; never goes backwards
_MILLISECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")  # no sign, exponent, inf or nan


@dataclass(frozen=True)
class Deadline:
    at: float  # absolute, in seconds on `clock`'s scale
    clock: Clock

    @classmethod
    def after(cls, ms: float, clock: Clock = time.monotonic) -> Self:
        return cls(at=clock() + ms / 1000, clock=clock)

    def remaining_ms(self) -> float:
        return max(0.0, (self.at - self.clock()) * 1000)

    def expired(self) -> bool:
        return self.clock() >= self.at


@dataclass(frozen=True)
class BudgetPolicy:
    """Configured once; every request is planned against it."""

    objective_ms: float  # our latency objective for a whole search
    caller_cap_ms: float  # the longest caller timeout we believe (guards against absurd values)
    reserve_ms: float  # kept back after the stages, for fusion, hydration and the response
    vector_budget_ms: float  # the most the vector stage may take
    min_vector_ms: float  # a vector search given less could not finish, so it is not started


@dataclass(frozen=True)
class Budgets:
    total_ms: float
    caller_limited: bool  # the caller's own timeout, not our objective, is the binding one
    lexical_ms: float
    vector_ms: float  # 0 when vector_skipped_no_budget
    vector_skipped_no_budget: bool


@dataclass(frozen=True)
class SearchDeadline:
    """The instants one search must keep, all on one clock, fixed when it starts.

    Invariant: `vector` <= `stages` <= `end`. Work handed one of these deadlines takes
    what is left of it, never a fresh budget: three lexical statements in a row share the
    stages' time, and loading the listings gets what the stages left of `end` (at least
    the reserve, which the stages never touch)."""

    end: Deadline  # the whole answer, listings loaded
    stages: Deadline  # lexical and vector retrieval; `end` less the reserve
    vector: Deadline | None  # None: too little time for a vector search to be worth starting
    caller_limited: bool  # the caller's own timeout, not our objective, is the binding one
    started_at: float  # on the deadlines' clock
    arm: Arm = "none"  # of a budget canary, whose budgets these are (retrieval/bounds/arms.py)

    def elapsed_ms(self) -> float:
        return (self.end.clock() - self.started_at) * 1000

    @classmethod
    def planned(
        cls,
        policy: BudgetPolicy,
        *,
        caller_timeout_ms: float | None = None,
        arrived_at: float | None = None,
        arm: Arm = "none",
    ) -> Self:
        """A request's deadline, the one way every caller makes it: the policy's budgets
        for this caller (`plan_budgets`), counted from its arrival."""
        budgets = plan_budgets(policy, caller_timeout_ms=caller_timeout_ms)
        return dataclasses.replace(cls.start(budgets, arrived_at=arrived_at), arm=arm)

    @classmethod
    def start(
        cls, budgets: Budgets, clock: Clock = time.monotonic, arrived_at: float | None = None
    ) -> Self:
        """The budgets counted from the request's arrival on `clock` (retrieval/bounds/arrival.py;
        now when not given): time it spent queued is time it no longer has."""
        now = clock() if arrived_at is None else arrived_at

        def after(ms: float) -> Deadline:
            return Deadline(at=now + ms / 1000, clock=clock)

        return cls(
            end=after(budgets.total_ms),
            stages=after(budgets.lexical_ms),
            vector=None if budgets.vector_skipped_no_budget else after(budgets.vector_ms),
            caller_limited=budgets.caller_limited,
            started_at=now,
        )


def plan_budgets(policy: BudgetPolicy, *, caller_timeout_ms: float | None) -> Budgets:
    caller_ms = (
        policy.objective_ms
        if caller_timeout_ms is None
        else min(caller_timeout_ms, policy.caller_cap_ms)
    )
    total_ms = min(policy.objective_ms, caller_ms)
    stages_ms = max(0.0, total_ms - policy.reserve_ms)
    vector_ms = min(policy.vector_budget_ms, stages_ms)
    skipped = vector_ms < policy.min_vector_ms
    return Budgets(
        total_ms=total_ms,
        caller_limited=caller_ms < policy.objective_ms,
        lexical_ms=stages_ms,
        vector_ms=0.0 if skipped else vector_ms,
        vector_skipped_no_budget=skipped,
    )


def parse_caller_timeout(param: str | None, header: str | None) -> float | None:
    """The caller's own timeout in ms, from the `timeout_ms` query parameter or else the
    X-Request-Timeout-Ms header; a blank value counts as absent. Capped in plan_budgets."""
    for name, raw in (("timeout_ms", param), ("X-Request-Timeout-Ms", header)):
        if raw:
            if not _MILLISECONDS.fullmatch(raw):
                raise BadQueryError(
                    f"{name} must be a number of milliseconds, 0 or more", parameter=name
                )
            return float(raw)
    return None
