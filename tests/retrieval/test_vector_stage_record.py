"""The vector stage's time on record for the what-if of other budgets (ops/whatif.py):
a stage in time counted at its time, one cut at its budget only as longer, and a watched
one let run on past the budget, its answer still cut there. Injected stages; a stage
answers when the test releases it, never after a sleep."""

import asyncio
import dataclasses

import numpy as np
import numpy.typing as npt
import pytest
from prometheus_client import REGISTRY

from retrieval.bounds.deadline import BudgetPolicy, Deadline, SearchDeadline, plan_budgets
from retrieval.hybrid import hybrid_search
from retrieval.types import DEFAULT_FILTERS, Candidate, Mode, Query, Reason, SearchFilters
from tests.retrieval_fakes import FixedLexical, FixedVector, dependencies

QUERY = Query("jazz night", "jazz night", 5, "short")
POLICY = BudgetPolicy(
    objective_ms=300, caller_cap_ms=1000, reserve_ms=10, vector_budget_ms=30, min_vector_ms=1
)


class ReleasedVector(FixedVector):
    """Answers once the test sets `release` (or fails by its statement's deadline, as a
    statement_timeout would end it)."""

    def __init__(self, generation: int) -> None:
        super().__init__([9, 8], generation=generation, locked=True)
        self.release = asyncio.Event()
        self.deadlines: list[Deadline] = []

    async def search(
        self,
        embedding: npt.NDArray[np.float32],
        generation: int,
        limit: int,
        deadline: Deadline,
        filters: SearchFilters = DEFAULT_FILTERS,
    ) -> list[Candidate]:
        self.deadlines.append(deadline)
        released = asyncio.create_task(self.release.wait())
        held = asyncio.create_task(super().search(embedding, generation, limit, deadline))
        try:
            done, _ = await asyncio.wait({released, held}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            released.cancel()
            held.cancel()
        if released in done:
            return [Candidate(9, 0.9)]
        return held.result()  # its deadline passed: the server's timeout, raised


def recorded(name: str, generation: int, le: str) -> float:
    labels = {"query_class": "short", "generation": str(generation), "le": le}
    return REGISTRY.get_sample_value(f"retrieval_vector_stage{name}_seconds_bucket", labels) or 0.0


def deadline(caller_timeout_ms: float | None = None) -> SearchDeadline:
    return SearchDeadline.start(plan_budgets(POLICY, caller_timeout_ms=caller_timeout_ms))


async def test_a_stage_in_time_is_counted_at_its_time() -> None:
    vector = FixedVector([9], generation=901)
    deps = dependencies(FixedLexical([3]), vector, generation=901)
    outcome = await hybrid_search(QUERY, deadline(), deps)
    assert outcome.mode == Mode.HYBRID
    assert recorded("", 901, "0.03") == 1  # within the 30 ms budget
    assert recorded("", 901, "+Inf") == 1


async def test_a_stage_cut_at_its_budget_counts_only_as_longer() -> None:
    vector = ReleasedVector(902)
    deps = dependencies(FixedLexical([3]), vector, generation=902)
    outcome = await hybrid_search(QUERY, deadline(), deps)
    assert outcome.reasons == [Reason.VECTOR_TIMEOUT]
    assert recorded("", 902, "0.15") == 0  # no time: it is not known
    assert recorded("", 902, "+Inf") == 1
    await asyncio.wait_for(vector.probe.cancelled.wait(), 1)  # not watched: cancelled


async def test_a_watched_stage_runs_on_and_its_time_is_recorded() -> None:
    vector = ReleasedVector(903)
    deps = dataclasses.replace(
        dependencies(FixedLexical([3]), vector, generation=903), watch_past_budget=lambda: True
    )
    sample_cost = REGISTRY.get_sample_value("retrieval_vector_sample_seconds_total") or 0.0
    planned = deadline()
    outcome = await hybrid_search(QUERY, planned, deps)
    # The answer did not wait: cut at the budget as any other.
    assert outcome.reasons == [Reason.VECTOR_TIMEOUT]
    assert outcome.mode == Mode.LEXICAL_FALLBACK
    assert vector.deadlines == [planned.stages]  # its statements may run to the stages' end
    assert vector.probe.in_flight == 1
    assert not vector.probe.cancelled.is_set()
    assert recorded("", 903, "+Inf") == 1
    assert recorded("", 903, "0.15") == 0
    vector.release.set()
    for _ in range(100):  # bounded: the stage's end is recorded by a callback
        if recorded("_sampled", 903, "+Inf"):
            break
        await asyncio.sleep(0.01)
    assert recorded("_sampled", 903, "0.03") == 0  # past the budget ...
    assert recorded("_sampled", 903, "0.15") == 1  # ... and by the stages' deadline
    cost = REGISTRY.get_sample_value("retrieval_vector_sample_seconds_total") or 0.0
    assert cost > sample_cost


async def test_a_watched_stage_that_outlasts_the_stages_deadline_is_recorded_as_longer() -> None:
    vector = ReleasedVector(904)
    deps = dataclasses.replace(
        dependencies(FixedLexical([3]), vector, generation=904), watch_past_budget=lambda: True
    )
    await hybrid_search(QUERY, deadline(), deps)
    for _ in range(100):  # its own deadline, the stages', ends it (~290 ms)
        if recorded("_sampled", 904, "+Inf"):
            break
        await asyncio.sleep(0.01)
    assert recorded("_sampled", 904, "+Inf") == 1
    assert recorded("_sampled", 904, "0.15") == 0


@pytest.mark.parametrize("watched", [False, True])
async def test_a_caller_limited_search_is_left_off_the_record(watched: bool) -> None:
    vector = FixedVector([9], generation=905)
    deps = dataclasses.replace(
        dependencies(FixedLexical([3]), vector, generation=905),
        watch_past_budget=lambda: watched,
    )
    await hybrid_search(QUERY, deadline(caller_timeout_ms=100), deps)
    assert recorded("", 905, "+Inf") == 0
    assert recorded("_sampled", 905, "+Inf") == 0


async def test_a_canary_arms_search_is_left_off_the_record_of_the_budget_in_force() -> None:
    vector = FixedVector([9], generation=906)
    deps = dataclasses.replace(
        dependencies(FixedLexical([3]), vector, generation=906), watch_past_budget=lambda: True
    )
    await hybrid_search(QUERY, dataclasses.replace(deadline(), arm="canary"), deps)
    assert recorded("", 906, "+Inf") == 0
    await hybrid_search(QUERY, dataclasses.replace(deadline(), arm="control"), deps)
    assert recorded("", 906, "+Inf") == 1
