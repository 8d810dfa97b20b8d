"""The search paths an evaluation scores, each run through the code that serves the public
(`retrieval.hybrid.hybrid_search`, the Postgres stages, hydration), pointed at the
evaluation set's own audience and generation.

A path is made by what its dependencies do, never by a re-implementation of the fallback
logic, so a change to how the system degrades changes what is measured:

- `lexical` and `vector`: one stage alone, its first k showable listings;
- `hybrid`: the full search with budgets no stage misses here (quality, not speed: the
  budget sweep measures what bounded budgets cost);
- `lexical_fallback`: the vector stage misses its budget and no cached ranking exists;
- `cache_fallback`: the vector stage misses its budget and the cache holds a ranking
  made before the newest tenth of the documents arrived (the fresh ones), merged with
  what lexical finds now; `cache_fallback_without_merge` is the cached ranking alone
  (the lexical stage failing too), to show what the merge buys for fresh documents.

The cached rankings are the hybrid rankings with the fresh documents taken out: a search
made before they existed could not have found them, and every other candidate keeps its
place (each stage contributed three times k candidates, so k remain).
"""

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from resilience.awaiting import writes_done
from retrieval import metrics
from retrieval.bounds.admission import AdmissionLimit
from retrieval.bounds.breaker_gate import NeverOpen
from retrieval.bounds.deadline import BudgetPolicy, Deadline, SearchDeadline
from retrieval.cache import cache_key
from retrieval.hybrid import hybrid_search
from retrieval.pg.generation import GenerationLookup
from retrieval.pg.hydrate import hydrate
from retrieval.pg.lexical import PgLexicalIndex
from retrieval.pg.pool import close_pool
from retrieval.pg.vector import PgVectorIndex
from retrieval.protocols import Dependencies
from retrieval.query.embedder import OnnxQueryEmbedder
from retrieval.query.parse import parse_query
from retrieval.service import searchable_generation_id
from retrieval.types import (
    DEFAULT_FILTERS,
    CachedRanking,
    Candidate,
    LexicalResult,
    Mode,
    NoAnswerError,
    Query,
    SearchFilters,
    SearchOutcome,
    StageTimeoutError,
)

LEXICAL: Final = "lexical"
VECTOR: Final = "vector"
HYBRID: Final = "hybrid"
LEXICAL_FALLBACK: Final = "lexical_fallback"
CACHE_FALLBACK: Final = "cache_fallback"
CACHE_WITHOUT_MERGE: Final = "cache_fallback_without_merge"
# The search under `policy` as a reader gets it, in whatever mode it answers and with
# nothing when it cannot (a 503 shows no listings): a budget canary's guardrail per arm.
SERVED: Final = "served"
# The five paths `evaluate` reports, in its order; the sixth is a variant for slices.
PATHS: Final = (LEXICAL, VECTOR, HYBRID, LEXICAL_FALLBACK, CACHE_FALLBACK)
ALL_PATHS: Final = (*PATHS, CACHE_WITHOUT_MERGE)
# The mode each composed path must answer in; any other is a failed query, counted.
_EXPECTED_MODE: Final = {
    HYBRID: Mode.HYBRID,
    LEXICAL_FALLBACK: Mode.LEXICAL_FALLBACK,
    CACHE_FALLBACK: Mode.CACHE_FALLBACK,
    CACHE_WITHOUT_MERGE: Mode.CACHE_FALLBACK,
}

# Generous on purpose: no stage misses these, so every figure is of ranking, not of time.
UNBOUNDED = BudgetPolicy(
    objective_ms=30_000.0,
    caller_cap_ms=30_000.0,
    reserve_ms=10_000.0,
    vector_budget_ms=10_000.0,
    min_vector_ms=1.0,
)
# Judged queries are longer than the public form allows: Cranfield's run to 249
# characters, CISI's to 1,098 (a paragraph). The lexical stage reads at most its 16
# rarest terms and the model its first 256 tokens, so none is cut here.
MAX_QUERY_CHARS = 2000


class NoEvaluationGenerationError(RuntimeError):
    """The evaluation audience has no active generation this process can search."""


class _MissesBudget:
    """A vector index whose search always comes back past its budget."""

    async def search(
        self,
        embedding: npt.NDArray[np.float32],
        generation: int,
        limit: int,
        deadline: Deadline,
        filters: SearchFilters = DEFAULT_FILTERS,
    ) -> list[Candidate]:
        raise StageTimeoutError()


class _LexicalDown:
    async def search(self, query: Query, limit: int, deadline: Deadline) -> LexicalResult:
        raise ConnectionError("lexical stage down (evaluation: cached ranking alone)")


@dataclass
class _MemoryCache:
    entries: dict[str, CachedRanking] = field(default_factory=dict)

    async def get(self, key: str, deadline: Deadline) -> CachedRanking | None:
        return self.entries.get(key)

    async def put(self, key: str, ranking: CachedRanking) -> None:
        self.entries[key] = ranking


async def no_warming(key: str, query: Query) -> None:
    """Evaluation searches never warm the cache: warming runs public searches."""


@dataclass
class PathRuns:
    """Each path's ranking of each query (listing ids, best first, at most k), and the
    queries a path could not answer in its own mode, by path."""

    rankings: dict[str, dict[str, list[int]]]
    failures: dict[str, int]


@dataclass
class EvaluationSearch:
    """The paths, for one evaluation generation. `policy` bounds the composed paths."""

    audience: str  # the evaluation set's (ingestion.models.Audience)
    k: int
    fresh: frozenset[int]  # listing ids the simulated cache never saw
    policy: BudgetPolicy = UNBOUNDED
    vector: PgVectorIndex = field(default_factory=PgVectorIndex)
    embedder: OnnxQueryEmbedder = field(default_factory=OnnxQueryEmbedder)

    def __post_init__(self) -> None:
        self.lexical = PgLexicalIndex(self.audience)
        self.generations = GenerationLookup(self.audience)

    async def run(self, queries: Mapping[str, str], paths: Iterable[str] = ALL_PATHS) -> PathRuns:
        wanted = tuple(paths)
        # The cache paths serve what the hybrid search of the same query ranked.
        needs_hybrid = bool({CACHE_FALLBACK, CACHE_WITHOUT_MERGE} & set(wanted))
        order = [p for p in (*ALL_PATHS, SERVED) if p in wanted or (p == HYBRID and needs_hybrid)]
        # Once for the run, not a search's work: by the generous bound, whatever the policy.
        generation = await searchable_generation_id(
            Deadline.after(UNBOUNDED.objective_ms), self.generations
        )
        if generation is None:
            raise NoEvaluationGenerationError(
                "no active evaluation generation of this embedding model: import a collection"
            )
        runs = PathRuns({path: {} for path in wanted}, dict.fromkeys(wanted, 0))
        cache = _MemoryCache()
        with metrics.uncounted():
            for query_id, text in queries.items():
                query = parse_query(text, str(self.k), max_chars=MAX_QUERY_CHARS, max_k=self.k)
                for path in order:
                    ranking = await self._path(path, query, generation, cache)
                    if path not in wanted:
                        continue
                    if ranking is None:
                        runs.failures[path] += 1
                    else:
                        runs.rankings[path][query_id] = ranking
        return runs

    async def _path(
        self, path: str, query: Query, generation: int, cache: _MemoryCache
    ) -> list[int] | None:
        deadline = self._deadline()
        if path == LEXICAL:
            found_lexically = await self.lexical.search(query, query.k, deadline.stages)
            ids = [c.listing_id for c in found_lexically.candidates]
            return await self._shown(ids, query, deadline)
        if path == VECTOR:
            embedding = await self.embedder.embed(query.text)
            found = await self.vector.search(embedding, generation, query.k, deadline.stages)
            return await self._shown([c.listing_id for c in found], query, deadline)
        if path == SERVED:
            outcome = await self._search(query, deadline, generation, vector=self.vector)
            return [] if outcome is None else await self._shown(outcome.ranking, query, deadline)
        if path == HYBRID:
            # Its complete ranking, less the fresh documents, is what the cache paths get.
            outcome = await self._search(query, deadline, generation, vector=self.vector)
            if outcome is not None:
                stale = [i for i in outcome.ranking if i not in self.fresh]
                cache.entries[cache_key(query, generation)] = CachedRanking(stale, generation, 0)
                return await self._checked(path, outcome.mode, outcome.ranking, query, deadline)
            return None
        vector = _MissesBudget()
        lexical = _LexicalDown() if path == CACHE_WITHOUT_MERGE else self.lexical
        cached = cache if path != LEXICAL_FALLBACK else _MemoryCache()
        outcome = await self._search(
            query, deadline, generation, vector=vector, lexical=lexical, cache=cached
        )
        if outcome is None:
            return None
        return await self._checked(path, outcome.mode, outcome.ranking, query, deadline)

    async def _search(
        self,
        query: Query,
        deadline: SearchDeadline,
        generation: int,
        *,
        vector: "PgVectorIndex | _MissesBudget",
        lexical: "PgLexicalIndex | _LexicalDown | None" = None,
        cache: _MemoryCache | None = None,
    ) -> SearchOutcome | None:
        deps = Dependencies(
            lexical=lexical or self.lexical,
            vector=vector,
            embedder=self.embedder,
            cache=cache or _MemoryCache(),
            searchable_generation_id=_fixed(generation),
            breaker=NeverOpen(),
            admission=AdmissionLimit(1),
            warm=no_warming,
        )
        try:
            return await hybrid_search(query, deadline, deps)
        except NoAnswerError:
            return None

    async def _checked(
        self, path: str, mode: Mode, ranking: list[int], query: Query, deadline: SearchDeadline
    ) -> list[int] | None:
        if mode != _EXPECTED_MODE[path]:
            return None
        return await self._shown(ranking, query, deadline)

    async def _shown(self, ids: Sequence[int], query: Query, deadline: SearchDeadline) -> list[int]:
        shown = await hydrate(list(ids), query.text, query.k, deadline.end, self.audience)
        return [view.id for view in shown]

    def _deadline(self) -> SearchDeadline:
        return SearchDeadline.planned(self.policy)


def _fixed(generation: int) -> Callable[[Deadline], Awaitable[int | None]]:
    async def active(deadline: Deadline) -> int | None:
        return generation

    return active


def run_paths(
    search: EvaluationSearch, queries: Mapping[str, str], paths: Iterable[str] = ALL_PATHS
) -> PathRuns:
    """`search.run` on an event loop of its own (management commands and Celery tasks are
    synchronous), its connections closed with it."""

    async def run() -> PathRuns:
        try:
            return await search.run(queries, paths)
        finally:
            await writes_done()
            await close_pool()

    return asyncio.run(run())
