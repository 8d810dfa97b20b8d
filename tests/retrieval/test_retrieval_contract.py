"""The search orchestration with injected stages: cancellation, fallbacks and fusion,
without a database and without sleeping (stalled stages wait on events that only
cancellation ends; budgets are small, so a timeout is the stage's own budget running out)."""

import asyncio
import dataclasses

import psycopg
import pytest
from prometheus_client import REGISTRY

from resilience.awaiting import writes_done
from retrieval.bounds.admission import AdmissionLimit
from retrieval.bounds.deadline import BudgetPolicy, Deadline, SearchDeadline, plan_budgets
from retrieval.cache import cache_key
from retrieval.hybrid import hybrid_search
from retrieval.types import CachedRanking, CallerDeadlineError, Mode, NoAnswerError, Query, Reason
from tests.retrieval_fakes import (
    FixedBreaker,
    FixedLexical,
    FixedVector,
    MemoryCache,
    WarmRecorder,
    dependencies,
)

QUERY = Query("jazz night", "jazz night", 5, "short")
POLICY = BudgetPolicy(
    objective_ms=300, caller_cap_ms=1000, reserve_ms=10, vector_budget_ms=30, min_vector_ms=1
)


def deadline(caller_timeout_ms: float | None = None) -> SearchDeadline:
    return SearchDeadline.start(plan_budgets(POLICY, caller_timeout_ms=caller_timeout_ms))


async def test_a_stalled_vector_stage_is_cancelled_and_lexical_results_answer() -> None:
    lexical, vector, warm = FixedLexical([3, 1, 2]), FixedVector([9], stall=True), WarmRecorder()
    outcome = await hybrid_search(QUERY, deadline(), dependencies(lexical, vector, warm=warm))
    assert outcome.mode == Mode.LEXICAL_FALLBACK
    assert outcome.degraded
    assert outcome.reasons == [Reason.VECTOR_TIMEOUT]
    assert outcome.ranking == [3, 1, 2]
    await asyncio.wait_for(vector.probe.cancelled.wait(), 1)
    await writes_done()  # warming is enqueued behind the response
    assert warm.keys == [cache_key(QUERY, 1)]


class StalledWarming(WarmRecorder):
    """Warming that is slow to enqueue (a stalled broker): it waits until released."""

    def __init__(self) -> None:
        super().__init__()
        self.started, self.release = asyncio.Event(), asyncio.Event()

    async def __call__(self, key: str, query: Query) -> None:
        self.started.set()
        await self.release.wait()
        await super().__call__(key, query)


async def test_warming_never_delays_a_degraded_answer() -> None:
    warm = StalledWarming()
    deps = dependencies(FixedLexical([3]), FixedVector([9], stall=True), warm=warm)
    # Bounded: were warming awaited, the answer would wait for the stalled enqueue.
    outcome = await asyncio.wait_for(hybrid_search(QUERY, deadline(), deps), 5)
    assert outcome.mode == Mode.LEXICAL_FALLBACK
    await asyncio.wait_for(warm.started.wait(), 1)  # it was asked for, and is still going
    warm.release.set()
    await writes_done()
    assert warm.keys == [cache_key(QUERY, 1)]


async def test_when_lexical_fails_and_vectors_answer_the_mode_says_so() -> None:
    deps = dependencies(FixedLexical([], fail=True), FixedVector([2, 7]))
    outcome = await hybrid_search(QUERY, deadline(), deps)
    assert (outcome.mode, outcome.reasons) == (Mode.VECTOR_FALLBACK, [Reason.LEXICAL_ERROR])
    assert outcome.degraded
    assert outcome.ranking == [2, 7]
    assert outcome.matched == {2: {"vector"}, 7: {"vector"}}


async def test_a_generation_lookup_that_errs_is_a_database_error_not_no_generation() -> None:
    async def failing_lookup(deadline: Deadline) -> int | None:
        raise psycopg.OperationalError("the server closed the connection")

    deps = dataclasses.replace(
        dependencies(FixedLexical([1]), FixedVector([2])), searchable_generation_id=failing_lookup
    )
    outcome = await hybrid_search(QUERY, deadline(), deps)
    assert (outcome.mode, outcome.reasons) == (Mode.LEXICAL_FALLBACK, [Reason.DATABASE_ERROR])
    missing = dependencies(FixedLexical([1]), FixedVector([2]), generation=None)
    assert (await hybrid_search(QUERY, deadline(), missing)).reasons == [Reason.NO_GENERATION]


async def test_a_generation_lookup_out_of_budget_is_a_vector_timeout_not_a_database_error() -> None:
    async def stalled_lookup(deadline: Deadline) -> int | None:
        await asyncio.wait_for(asyncio.Event().wait(), deadline.remaining_ms() / 1000)
        return 1

    deps = dataclasses.replace(
        dependencies(FixedLexical([1]), FixedVector([2])), searchable_generation_id=stalled_lookup
    )
    outcome = await hybrid_search(QUERY, deadline(), deps)
    assert (outcome.mode, outcome.reasons) == (Mode.LEXICAL_FALLBACK, [Reason.VECTOR_TIMEOUT])


async def test_every_candidate_is_ranked_so_hydration_can_skip_withdrawn_ones() -> None:
    # k is 5; both stages' candidates (up to 15 each) stay in the ranking, best first.
    lexical, vector = FixedLexical(list(range(1, 9))), FixedVector(list(range(20, 26)))
    outcome = await hybrid_search(QUERY, deadline(), dependencies(lexical, vector))
    assert sorted(outcome.ranking) == [*range(1, 9), *range(20, 26)]


async def test_an_on_time_vector_result_is_fused_deterministically_and_cached() -> None:
    cache = MemoryCache()
    rankings = []
    for _ in range(3):
        deps = dependencies(FixedLexical([3, 1, 2]), FixedVector([2, 7, 3]), cache=cache)
        outcome = await hybrid_search(QUERY, deadline(), deps)
        assert (outcome.mode, outcome.degraded, outcome.reasons) == (Mode.HYBRID, False, [])
        rankings.append(outcome.ranking)
    # RRF, k=60: 3 and 2 are found by both (3: 1/61+1/63, 2: 1/63+1/61: a tie, broken by
    # id); then 1 (1/62) and 7 (1/62), again by id.
    assert rankings == [[2, 3, 1, 7]] * 3
    assert outcome.matched == {
        2: {"lexical", "vector"},
        3: {"lexical", "vector"},
        1: {"lexical"},
        7: {"vector"},
    }
    await writes_done()  # the cache write is behind the response
    assert cache.entries[cache_key(QUERY, 1)].ranking == [2, 3, 1, 7]


class HeldCache(MemoryCache):
    """A cache whose writes wait until the test lets them through."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def put(self, key: str, ranking: CachedRanking) -> None:
        await self.release.wait()
        await super().put(key, ranking)


async def test_the_answer_does_not_wait_for_the_cache_write() -> None:
    cache = HeldCache()
    deps = dependencies(FixedLexical([3, 1]), FixedVector([2]), cache=cache)
    # Bounded: were the put awaited, the answer would wait for the held write.
    outcome = await asyncio.wait_for(hybrid_search(QUERY, deadline(), deps), 5)
    assert outcome.mode == Mode.HYBRID
    assert cache.entries == {}
    cache.release.set()
    await writes_done()
    assert cache.entries[cache_key(QUERY, 1)].ranking == outcome.ranking


async def test_parent_cancellation_stops_both_stages_and_builds_nothing() -> None:
    lexical, vector = FixedLexical([1], stall=True), FixedVector([2], stall=True)
    cache, warm = MemoryCache(), WarmRecorder()
    deps = dependencies(lexical, vector, cache=cache, warm=warm)
    search = asyncio.create_task(hybrid_search(QUERY, deadline(), deps))
    await lexical.probe.started.wait()
    await vector.probe.started.wait()
    search.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await search
    await asyncio.wait_for(lexical.probe.cancelled.wait(), 1)
    await asyncio.wait_for(vector.probe.cancelled.wait(), 1)
    await writes_done()
    assert warm.keys == []
    assert cache.puts == 0


async def test_a_cached_ranking_is_preferred_and_fresh_lexical_hits_are_merged() -> None:
    cache = MemoryCache()
    cache.entries[cache_key(QUERY, 1)] = CachedRanking([5, 6], 1, 0.0)
    deps = dependencies(FixedLexical([8]), FixedVector([], stall=True), cache=cache)
    outcome = await hybrid_search(QUERY, deadline(), deps)
    assert outcome.mode == Mode.CACHE_FALLBACK
    assert outcome.ranking == [5, 8, 6]
    assert outcome.cache_age_s is not None
    await writes_done()
    assert cache.puts == 0  # a degraded result is never cached as complete


async def test_an_entry_of_another_generation_is_never_served() -> None:
    cache = MemoryCache()
    cache.entries[cache_key(QUERY, 1)] = CachedRanking([5, 6], 1, 0.0)
    deps = dependencies(FixedLexical([8]), FixedVector([], stall=True), cache=cache, generation=2)
    outcome = await hybrid_search(QUERY, deadline(), deps)
    assert outcome.mode == Mode.LEXICAL_FALLBACK


async def test_an_open_breaker_skips_the_vector_stage_at_once() -> None:
    vector = FixedVector([2])
    deps = dependencies(FixedLexical([1]), vector, breaker=FixedBreaker(open_=True))
    outcome = await hybrid_search(QUERY, deadline(), deps)
    assert (outcome.mode, outcome.reasons) == (Mode.LEXICAL_FALLBACK, [Reason.BREAKER_OPEN])
    assert vector.probe.calls == 0


async def test_a_full_admission_limit_sheds_the_vector_stage() -> None:
    vector = FixedVector([2])
    deps = dependencies(FixedLexical([1]), vector, slots=AdmissionLimit(0))
    outcome = await hybrid_search(QUERY, deadline(), deps)
    assert outcome.reasons == [Reason.SHED]
    assert vector.probe.calls == 0


async def test_the_admission_slot_is_released_when_the_stage_ends() -> None:
    slots = AdmissionLimit(1)
    deps = dependencies(FixedLexical([1]), FixedVector([], stall=True), slots=slots)
    await hybrid_search(QUERY, deadline(), deps)
    await asyncio.sleep(0)  # let the cancelled stage's done-callback run
    assert slots.in_flight == 0


async def test_failures_and_timeouts_are_reported_to_the_breaker() -> None:
    breaker = FixedBreaker()
    await hybrid_search(
        QUERY, deadline(), dependencies(FixedLexical([1]), FixedVector([2]), breaker=breaker)
    )
    failing = dependencies(FixedLexical([1]), FixedVector([2], fail=True), breaker=breaker)
    outcome = await hybrid_search(QUERY, deadline(), failing)
    stalled = dependencies(FixedLexical([1]), FixedVector([2], stall=True), breaker=breaker)
    await hybrid_search(QUERY, deadline(), stalled)
    assert outcome.reasons == [Reason.VECTOR_ERROR]
    assert breaker.outcomes == [False, True, True]


async def test_without_budget_for_vectors_no_vector_search_starts() -> None:
    vector = FixedVector([2])
    # 25 ms from the caller leave 15 after the reserve: less than a vector search needs.
    policy = BudgetPolicy(
        objective_ms=300, caller_cap_ms=1000, reserve_ms=10, vector_budget_ms=30, min_vector_ms=20
    )
    budgets = plan_budgets(policy, caller_timeout_ms=25)
    deps = dependencies(FixedLexical([1]), vector)
    outcome = await hybrid_search(QUERY, SearchDeadline.start(budgets), deps)
    assert Reason.NO_BUDGET in outcome.reasons
    assert vector.probe.calls == 0


async def test_with_nothing_in_time_it_fails_visibly() -> None:
    deps = dependencies(FixedLexical([1], stall=True), FixedVector([2], stall=True))
    with pytest.raises(NoAnswerError) as raised:
        await hybrid_search(QUERY, deadline(), deps)
    assert set(raised.value.reasons) == {Reason.VECTOR_TIMEOUT, Reason.LEXICAL_TIMEOUT}


async def test_when_the_callers_deadline_passes_first_no_fallback_is_built() -> None:
    lexical, vector = FixedLexical([1], stall=True), FixedVector([2], stall=True)
    warm = WarmRecorder()
    with pytest.raises(CallerDeadlineError):
        await hybrid_search(QUERY, deadline(40), dependencies(lexical, vector, warm=warm))
    await asyncio.wait_for(lexical.probe.cancelled.wait(), 1)
    assert warm.keys == []


async def test_a_server_side_timeout_counts_as_a_vector_timeout() -> None:
    warm = WarmRecorder()
    deps = dependencies(FixedLexical([1]), FixedVector([2], server_timeout=True), warm=warm)
    outcome = await hybrid_search(QUERY, deadline(), deps)
    assert outcome.reasons == [Reason.VECTOR_TIMEOUT]
    await writes_done()
    assert warm.keys == [cache_key(QUERY, 1)]


def _sample(name: str, stage: str) -> float:
    return REGISTRY.get_sample_value(name, {"stage": stage}) or 0.0


async def test_stages_are_counted_in_flight_while_they_run_and_timed_when_they_finish() -> None:
    lexical, vector = FixedLexical([1]), FixedVector([2], stall=True)
    in_flight = _sample("retrieval_in_flight", "vector")
    timed = _sample("retrieval_stage_seconds_count", "lexical")
    search = asyncio.create_task(hybrid_search(QUERY, deadline(), dependencies(lexical, vector)))
    await vector.probe.started.wait()
    assert _sample("retrieval_in_flight", "vector") == in_flight + 1
    assert (await search).mode == Mode.LEXICAL_FALLBACK
    await asyncio.wait_for(vector.probe.cancelled.wait(), 1)
    assert _sample("retrieval_in_flight", "vector") == in_flight
    assert _sample("retrieval_stage_seconds_count", "lexical") == timed + 1
