"""The budgets in force and any running canary, as every search process reads them: from
Postgres (retrieval/models.py's canaries), so that they survive a restart, at most once a
second per process and never on a search's path. A search reads the value the process
has; a stale one starts a refresh behind it. Until a process's first read answers (its
warm-up makes one), the settings' budgets apply."""

import time
from collections.abc import Callable

from django.conf import settings

from resilience.single_flight import SingleFlight
from retrieval import metrics
from retrieval.bounds.arms import CanaryBudgets, InForce
from retrieval.bounds.deadline import Deadline
from retrieval.pg.route import PRIMARY, Route, routed
from retrieval.pg.statement import BUDGETS_TAG, fetch_with_local_settings

TTL_S = 1.0
READ_MS = 200.0

_READ = """
SELECT p.vector_budget_ms, p.deadline_ms, r.id, r.vector_budget_ms, r.deadline_ms, r.share
FROM (SELECT) AS one
LEFT JOIN LATERAL (
    SELECT vector_budget_ms, deadline_ms FROM retrieval_canary
    WHERE state = 'promoted' ORDER BY ended_at DESC LIMIT 1) AS p ON true
LEFT JOIN LATERAL (
    SELECT id, vector_budget_ms, deadline_ms, share FROM retrieval_canary
    WHERE state = 'running') AS r ON true
"""


def by_settings() -> InForce:
    return InForce(settings.SEARCH_VECTOR_BUDGET_MS, settings.SEARCH_DEADLINE_MS, None)


class BudgetsLookup:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._value: InForce | None = None
        self._fetched_at = float("-inf")
        # One read in flight per event loop, however many searches find the value stale.
        self._reads: SingleFlight[InForce] = SingleFlight()

    def current(self) -> InForce:
        """The budgets as last read (the settings' before any read), a refresh started
        behind the caller when they are older than a second."""
        if self._clock() - self._fetched_at >= TTL_S:
            # A failed read leaves the last value in force; the next search tries again.
            self._reads.run(self.refresh, name="budgets-read")
        return self._value or by_settings()

    async def refresh(self) -> InForce:
        with routed(Route(PRIMARY, fixed=True)):
            rows = await fetch_with_local_settings(
                BUDGETS_TAG, _READ, {}, Deadline.after(READ_MS, self._clock)
            )
        promoted_vector, promoted_deadline, canary_id, *canary = rows[0]
        defaults = by_settings()
        value = InForce(
            promoted_vector if promoted_vector is not None else defaults.vector_budget_ms,
            promoted_deadline if promoted_deadline is not None else defaults.deadline_ms,
            None if canary_id is None else CanaryBudgets(int(canary_id), *map(float, canary)),
        )
        self._value, self._fetched_at = value, self._clock()
        _export(value)
        return value


def _export(value: InForce) -> None:
    """The budgets in force and any canary's, on /metrics: what every search runs by."""
    canary = value.canary
    for arm, vector_ms, deadline_ms in (
        ("control", value.vector_budget_ms, value.deadline_ms),
        (
            "canary",
            canary.vector_budget_ms if canary else 0.0,
            canary.deadline_ms if canary else 0.0,
        ),
    ):
        metrics.BUDGET_MS.labels(arm=arm, budget="vector").set(vector_ms)
        metrics.BUDGET_MS.labels(arm=arm, budget="deadline").set(deadline_ms)
    metrics.CANARY_SHARE.set(canary.share if canary else 0.0)
