"""`hybrid_search`'s `on_lexical` (what the page's progressive preview hangs on): told the
lexical candidates as soon as that stage answers, while the vector stage still runs, and
never able to delay or change the outcome. Injected stages, no sleeping."""

import asyncio

from retrieval.hybrid import hybrid_search
from retrieval.types import Candidate, Mode
from tests.retrieval.test_retrieval_contract import QUERY, deadline
from tests.retrieval_fakes import FixedLexical, FixedVector, dependencies


async def test_it_is_told_the_lexical_candidates_while_the_vector_stage_still_runs() -> None:
    lexical, vector = FixedLexical([3, 1, 2]), FixedVector([9], stall=True)
    seen: list[tuple[list[int], bool]] = []

    def watch(candidates: list[Candidate]) -> None:
        # What the vector stage is doing at this moment: started and not yet given up on.
        seen.append(([c.listing_id for c in candidates], vector.probe.cancelled.is_set()))

    search = asyncio.create_task(
        hybrid_search(QUERY, deadline(), dependencies(lexical, vector), on_lexical=watch)
    )
    await asyncio.wait_for(vector.probe.started.wait(), 1)
    outcome = await search

    assert seen == [([3, 1, 2], False)]
    assert outcome.mode == Mode.LEXICAL_FALLBACK
    assert outcome.ranking == [3, 1, 2]


async def test_a_watcher_that_fails_changes_nothing() -> None:
    def broken(candidates: list[Candidate]) -> None:
        raise RuntimeError("the page's preview failed")

    outcomes = [
        await hybrid_search(
            QUERY, deadline(), dependencies(FixedLexical([3, 1, 2]), FixedVector([2, 9])), **extra
        )
        for extra in ({}, {"on_lexical": broken})
    ]

    assert outcomes[0].mode == outcomes[1].mode == Mode.HYBRID
    assert outcomes[0].ranking == outcomes[1].ranking
    assert outcomes[0].reasons == outcomes[1].reasons == []


async def test_it_is_not_told_anything_when_the_lexical_stage_fails_or_times_out() -> None:
    seen: list[list[Candidate]] = []
    for lexical in (FixedLexical([1], fail=True), FixedLexical([1], locked=True)):
        outcome = await hybrid_search(
            QUERY, deadline(), dependencies(lexical, FixedVector([5])), on_lexical=seen.append
        )
        assert outcome.mode == Mode.VECTOR_FALLBACK
    assert seen == []


async def test_it_is_not_told_anything_for_a_cancelled_search() -> None:
    lexical = FixedLexical([1], stall=True)
    seen: list[list[Candidate]] = []
    search = asyncio.create_task(
        hybrid_search(
            QUERY, deadline(), dependencies(lexical, FixedVector([5])), on_lexical=seen.append
        )
    )
    await asyncio.wait_for(lexical.probe.started.wait(), 1)
    search.cancel()
    await asyncio.wait_for(lexical.probe.cancelled.wait(), 1)
    # The stage's task ended in the step that set `cancelled`, queueing its done callbacks
    # there; one more turn of the loop lets them run before we look.
    await asyncio.sleep(0)

    assert search.cancelled()
    assert seen == []
