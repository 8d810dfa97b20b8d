"""One search under one deadline: lexical and vector retrieval start together, the vector
stage gets a smaller budget, and the outcome says truthfully how the answer was made.

Invariants:
- an on-time vector result always enters fusion;
- only complete hybrid rankings are cached; the cache write, and the warming a timed-out
  vector stage asks for, happen behind the response (Redis round trips and a broker
  publish the caller need not wait for; `writes_done()` in resilience/awaiting.py waits for them);
- every part of the search runs by the one `SearchDeadline` it is handed;
- the mode says which stages answered: `hybrid` both, `vector_fallback` vectors without
  lexical, `cache_fallback` a cached ranking (with what lexical found), `lexical_fallback`
  lexical alone; `reasons` say why any part is missing;
- when the caller goes away (cancellation of this coroutine, or the caller's own deadline
  passing first) both stages are cancelled, their SQL with them, and nothing is built;
- with neither branch nor the cache in time, `NoAnswerError`: never an empty success;
- `on_lexical` (the page's progressive preview) only watches: it is told the lexical
  candidates when that stage answers, never when it fails or is cancelled, and nothing it
  does (or raises) delays or changes the outcome.
"""

import asyncio
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from resilience import awaiting
from retrieval import metrics
from retrieval.bounds.deadline import Deadline, SearchDeadline
from retrieval.cache import cache_key
from retrieval.fusion import reciprocal_rank_fusion
from retrieval.protocols import (
    Dependencies,
)
from retrieval.types import (
    CachedRanking,
    CallerDeadlineError,
    Candidate,
    LexicalResult,
    Mode,
    NoAnswerError,
    Query,
    Reason,
    SearchOutcome,
    StageTimeoutError,
    StageTimings,
)

# How many candidates each branch contributes to fusion, per result asked for, and the
# fusion's constant (reciprocal rank fusion's k): both chosen on judged queries,
# docs/quality.md.
CANDIDATES_PER_RESULT = 5
FUSION_K = 10
# Each stage's weight in fusion (1 for a stage not named: the cache's ranking).
FUSION_WEIGHTS = {"lexical": 1, "vector": 1}


class _VectorStage:
    """Query embedding then ANN search, remembering which phase it reached."""

    def __init__(self, deps: Dependencies, query: Query, generation: int, limit: int) -> None:
        self.deps, self.query, self.generation, self.limit = deps, query, generation, limit
        self.phase = "embed"
        self.embed_ms: float | None = None
        self.watched = False

    async def run(self, deadline: Deadline) -> list[Candidate]:
        started = self.deps.clock()
        embedding = await self.deps.embedder.embed(self.query.text)
        self.embed_ms = (self.deps.clock() - started) * 1000
        self.phase = "search"
        return await self.deps.vector.search(
            np.asarray(embedding, dtype=np.float32),
            self.generation,
            self.limit,
            deadline,
            self.query.filters,
        )


LexicalWatcher = Callable[[list[Candidate]], None]


async def hybrid_search(
    query: Query,
    deadline: SearchDeadline,
    deps: Dependencies,
    on_lexical: LexicalWatcher | None = None,
) -> SearchOutcome:
    started = deps.clock()
    limit = query.k * CANDIDATES_PER_RESULT
    timings = StageTimings()
    lexical_task = awaiting.start(deps.lexical.search(query, limit, deadline.stages), "lexical")
    _time_stage(lexical_task, timings, "lexical", deps.clock, started)
    if on_lexical is not None:
        _tell_when_answered(lexical_task, on_lexical)
    reasons: list[Reason] = []
    vector_task: asyncio.Task[list[Candidate]] | None = None
    stage: _VectorStage | None = None
    try:
        generation = await _searchable_generation_id(deps, deadline, reasons)
        if generation is None:
            pass  # the reason is recorded
        elif deadline.vector is None:
            reasons.append(Reason.NO_BUDGET)
        elif not deps.breaker.allow():
            reasons.append(Reason.BREAKER_OPEN)
        elif (slot := deps.admission.try_acquire()) is None:
            reasons.append(Reason.SHED)
        else:
            stage = _VectorStage(deps, query, generation, limit)
            # A watched stage's statements may run to the stages' deadline; its answer is
            # still taken only by the vector budget's.
            stage.watched = (
                not deadline.caller_limited
                and deadline.arm != "canary"
                and deps.watch_past_budget()
            )
            vector_task = awaiting.start(
                stage.run(deadline.stages if stage.watched else deadline.vector), "vector"
            )
            # The slot is held until the search really ends, cancellation included.
            vector_task.add_done_callback(lambda _: slot.release())
            _time_stage(vector_task, timings, "vector", deps.clock, started)
            if metrics.counted():
                metrics.VECTOR_ELIGIBLE.inc()
                if deadline.arm != "none":
                    metrics.ARM_VECTOR.labels(arm=deadline.arm, outcome="eligible").inc()
        vector = await _vector_result(vector_task, stage, deadline, deps, reasons)
        found = await _lexical_result(lexical_task, deadline.stages, reasons)
        lexical = found.candidates if found is not None else None
    except BaseException:
        # Parent cancellation (or a bug): stop both branches, their SQL with them.
        awaiting.cancel(lexical_task, vector_task)
        raise
    if vector is not None and lexical is not None and generation is not None:
        outcome = _hybrid(query, generation, lexical, vector, reasons, deps)
    elif lexical is None and deadline.caller_limited:
        raise CallerDeadlineError()
    else:
        outcome = await _fallback(query, generation, lexical, vector, reasons, deadline, deps)
    timings.embed_ms = stage.embed_ms if stage else None
    outcome.timings = timings
    outcome.suggestion = found.suggestion if found is not None else None
    return outcome


def _tell_when_answered(task: "asyncio.Task[LexicalResult]", watcher: LexicalWatcher) -> None:
    """Hand the stage's candidates to `watcher` as soon as it answers. A done callback, not
    a step of the search: it runs on its own turn of the event loop, and asyncio reports
    what it raises without it ever reaching the search."""

    def done(finished: "asyncio.Task[LexicalResult]") -> None:
        if not finished.cancelled() and finished.exception() is None:
            watcher(finished.result().candidates)

    task.add_done_callback(done)


def _time_stage(
    task: "asyncio.Task[Any]",
    timings: StageTimings,
    stage: str,
    clock: Callable[[], float],
    started: float,
) -> None:
    """Count a stage in flight while it runs; when it finishes rather than is abandoned,
    record how long it took."""
    counted = metrics.counted()
    if counted:
        metrics.IN_FLIGHT.labels(stage=stage).inc()

    def done(finished: "asyncio.Task[Any]") -> None:
        if counted:
            metrics.IN_FLIGHT.labels(stage=stage).dec()
        if not finished.cancelled():
            elapsed_s = clock() - started
            setattr(timings, f"{stage}_ms", elapsed_s * 1000)
            if counted:
                metrics.STAGE_SECONDS.labels(stage=stage).observe(elapsed_s)

    task.add_done_callback(done)


async def _searchable_generation_id(
    deps: Dependencies, deadline: SearchDeadline, reasons: list[Reason]
) -> int | None:
    """The generation to search, or None with the reason why not: there is none the
    embedder can search, the vector budget ran out while asking (a cold process's first
    lookup waits for a pool connection: on a loaded machine past 40 ms), or the database
    could not say."""
    try:
        generation = await deps.searchable_generation_id(deadline.vector or deadline.stages)
    except (TimeoutError, StageTimeoutError):
        reasons.append(Reason.VECTOR_TIMEOUT)
        return None
    except Exception:
        reasons.append(Reason.DATABASE_ERROR)
        return None
    if generation is None:
        reasons.append(Reason.NO_GENERATION)
    return generation


async def _vector_result(
    task: "asyncio.Task[list[Candidate]] | None",
    stage: _VectorStage | None,
    deadline: SearchDeadline,
    deps: Dependencies,
    reasons: list[Reason],
) -> list[Candidate] | None:
    if task is None or stage is None or deadline.vector is None:
        return None
    settled = await awaiting.settle(task, deadline.vector.remaining_ms())
    if not settled or isinstance(task.exception(), StageTimeoutError):
        _record_stage(stage, deadline, None)
        if stage.watched and not settled:
            _watch_on(task, stage, deadline)
        else:
            task.cancel()  # psycopg sends the cancel to the server
        reasons.append(Reason.EMBED_TIMEOUT if stage.phase == "embed" else Reason.VECTOR_TIMEOUT)
        if metrics.counted():
            metrics.VECTOR_EXHAUSTED.inc()
            metrics.DEADLINE_EXHAUSTED.labels(stage="vector").inc()
            if deadline.arm != "none":
                metrics.ARM_VECTOR.labels(arm=deadline.arm, outcome="exhausted").inc()
        deps.breaker.record(failed=True)
        return None
    if task.exception() is not None:
        reasons.append(Reason.VECTOR_ERROR)
        deps.breaker.record(failed=True)
        return None
    _record_stage(stage, deadline, deadline.elapsed_ms() / 1000)
    if metrics.counted():
        metrics.VECTOR_REMAINING.observe(deadline.vector.remaining_ms() / 1000)
    deps.breaker.record(failed=False)
    return task.result()


def _record_stage(stage: _VectorStage, deadline: SearchDeadline, took_s: float | None) -> None:
    """The stage's time from arrival for the what-if of other budgets, None when it was
    cut at its budget (known only to be longer). A caller's own shorter deadline, or a
    canary's budget, would cut it elsewhere than the budget in force does, so such
    searches are left out: the record is of the budget in force alone."""
    if not metrics.counted() or deadline.caller_limited or deadline.arm == "canary":
        return
    labels = (stage.query.query_class, str(stage.generation))
    took = math.inf if took_s is None else took_s
    metrics.VECTOR_STAGE.labels(*labels).observe(took)
    if stage.watched and took_s is not None:
        metrics.VECTOR_STAGE_SAMPLED.labels(*labels).observe(took)


def _watch_on(
    task: "asyncio.Task[list[Candidate]]", stage: _VectorStage, deadline: SearchDeadline
) -> None:
    """Let a watched stage run on past its budget (its statements end by the stages'
    deadline), then record how long it took, or that it did not end by then, and what it
    cost beyond the budget. Nothing waits for it: the answer has gone without it."""
    assert deadline.vector is not None
    budget_s = deadline.vector.at - deadline.started_at

    def done(finished: "asyncio.Task[list[Candidate]]") -> None:
        took_s = deadline.elapsed_ms() / 1000
        ended = not finished.cancelled() and finished.exception() is None
        if not metrics.counted():
            return
        labels = (stage.query.query_class, str(stage.generation))
        metrics.VECTOR_STAGE_SAMPLED.labels(*labels).observe(took_s if ended else math.inf)
        metrics.VECTOR_SAMPLE_SECONDS.inc(max(0.0, took_s - budget_s))

    task.add_done_callback(done)


async def _lexical_result(
    task: "asyncio.Task[LexicalResult]", deadline: Deadline, reasons: list[Reason]
) -> LexicalResult | None:
    settled = await awaiting.settle(task, deadline.remaining_ms())
    if not settled or isinstance(task.exception(), StageTimeoutError):
        task.cancel()
        reasons.append(Reason.LEXICAL_TIMEOUT)
        if metrics.counted():
            metrics.DEADLINE_EXHAUSTED.labels(stage="lexical").inc()
        return None
    if task.exception() is not None:
        reasons.append(Reason.LEXICAL_ERROR)
        return None
    return task.result()


def _hybrid(
    query: Query,
    generation: int,
    lexical: list[Candidate],
    vector: list[Candidate],
    reasons: list[Reason],
    deps: Dependencies,
) -> SearchOutcome:
    ranking, matched = _fuse(
        {"lexical": [c.listing_id for c in lexical], "vector": [c.listing_id for c in vector]}
    )
    entry = CachedRanking(ranking, generation, time.time())
    awaiting.behind_response(deps.cache.put(cache_key(query, generation), entry))
    return SearchOutcome(Mode.HYBRID, ranking, matched, reasons, generation)


async def _fallback(
    query: Query,
    generation: int | None,
    lexical: list[Candidate] | None,
    vector: list[Candidate] | None,
    reasons: list[Reason],
    deadline: SearchDeadline,
    deps: Dependencies,
) -> SearchOutcome:
    lexical_ids = [c.listing_id for c in lexical or []]
    if vector is not None:
        # The lexical branch failed but vectors came in time: they answer, and say so.
        ranking, matched = _fuse({"vector": [c.listing_id for c in vector]})
        return SearchOutcome(Mode.VECTOR_FALLBACK, ranking, matched, reasons, generation)
    cached = None
    if generation is not None:
        key = cache_key(query, generation)
        cached = await deps.cache.get(key, deadline.end)
        if Reason.VECTOR_TIMEOUT in reasons or Reason.EMBED_TIMEOUT in reasons:
            awaiting.behind_response(deps.warm(key, query))
    if cached is not None and cached.generation == generation:
        # Only lexical hits the cached ranking lacks are merged in, each at the rank
        # lexical gave it: the others are already ranked by both stages, and counting
        # their lexical rank again buried the fresh ones (listings newer than the entry:
        # recall@10 0.000 on them); ranked first among themselves instead, the fresh ones
        # pushed out better cached answers (docs/quality.md).
        ranked = set(cached.ranking)
        fresh = [None if listing_id in ranked else listing_id for listing_id in lexical_ids]
        ranking, matched = _fuse({"cache": cached.ranking, "lexical": fresh})
        age = max(0.0, time.time() - cached.created_at)
        return SearchOutcome(Mode.CACHE_FALLBACK, ranking, matched, reasons, generation, age)
    if lexical is not None:
        ranking, matched = _fuse({"lexical": lexical_ids})
        return SearchOutcome(Mode.LEXICAL_FALLBACK, ranking, matched, reasons, generation)
    raise NoAnswerError(reasons)


def _fuse(
    rankings: Mapping[str, Sequence[int | None]],
) -> tuple[list[int], dict[int, set[str]]]:
    """Every candidate, fused: hydration shows the first k that can still be shown, so a
    listing withdrawn since a stage (or the cache) saw it never leaves a slot empty."""
    return reciprocal_rank_fusion(
        rankings, k=FUSION_K, limit=sum(map(len, rankings.values())), weights=FUSION_WEIGHTS
    )
