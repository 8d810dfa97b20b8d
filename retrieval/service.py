"""The real implementations wired together, once per process."""

import random
from functools import cache

from django.conf import settings

from ingestion.embedding import DIMENSIONS, MODEL_NAME
from resilience import redis_keys
from resilience.breaker import policy_from_settings
from resilience.redis_clients import breaker_redis_client
from resilience.shared_breaker import SharedBreaker
from resilience.token_bucket import TokenBucket
from retrieval.bounds.admission import AdmissionLimit
from retrieval.bounds.breaker_gate import BreakerGate
from retrieval.bounds.deadline import BudgetPolicy, Deadline
from retrieval.bounds.door import Door
from retrieval.cache import RedisResultCache
from retrieval.pg import route
from retrieval.pg.budgets import BudgetsLookup
from retrieval.pg.generation import GenerationLookup
from retrieval.pg.lexical import PgLexicalIndex
from retrieval.pg.replicas import forget_replicas
from retrieval.pg.route import Server
from retrieval.pg.vector import PgVectorIndex
from retrieval.protocols import Dependencies
from retrieval.query.embedder import OnnxQueryEmbedder
from retrieval.warming.schedule import schedule_warming_unless

# The public generation as each server searches read from sees it.
_generations: dict[Server, GenerationLookup] = {}


async def searchable_generation_id(
    deadline: Deadline, lookup: GenerationLookup | None = None
) -> int | None:
    """The id of the active generation `lookup` finds (by default the public one, as the
    server this search reads from sees it), if this process's embedder can search it.
    (The generation row itself is `ingestion.generations.active_generation`'s.)"""
    if lookup is None:
        server = route.current_server()
        lookup = _generations.setdefault(server, GenerationLookup(server=server))
    active = await lookup.active(deadline)
    if active is None or (active.embedding_model, active.dimensions) != (MODEL_NAME, DIMENSIONS):
        return None
    return active.id


def forget_searchable_generation() -> None:
    for lookup in _generations.values():
        lookup.forget()


def budget_policy(
    vector_budget_ms: float | None = None, deadline_ms: float | None = None
) -> BudgetPolicy:
    """The settings' policy, or with the given budgets (an arm's: retrieval/bounds/arms.py)."""
    return BudgetPolicy(
        objective_ms=settings.SEARCH_DEADLINE_MS if deadline_ms is None else deadline_ms,
        caller_cap_ms=settings.SEARCH_CALLER_TIMEOUT_CAP_MS,
        reserve_ms=settings.SEARCH_RESERVE_MS,
        vector_budget_ms=(
            settings.SEARCH_VECTOR_BUDGET_MS if vector_budget_ms is None else vector_budget_ms
        ),
        min_vector_ms=settings.SEARCH_MIN_VECTOR_BUDGET_MS,
    )


@cache
def budgets() -> BudgetsLookup:
    return BudgetsLookup()


@cache
def vector_breaker() -> SharedBreaker:
    client = breaker_redis_client(settings.REDIS_URL, timeout_s=0.05)
    return SharedBreaker(client, redis_keys.VECTOR_BREAKER, policy_from_settings("VECTOR_BREAKER"))


@cache
def vector_gate() -> BreakerGate:
    return BreakerGate(vector_breaker())


@cache
def front_door() -> Door:
    return Door(settings.SEARCH_MAX_IN_FLIGHT)


@cache
def dependencies() -> Dependencies:
    return Dependencies(
        lexical=PgLexicalIndex(),
        vector=PgVectorIndex(),
        embedder=OnnxQueryEmbedder(),
        cache=RedisResultCache(settings.SEARCH_CACHE_REWRITE_S),
        searchable_generation_id=searchable_generation_id,
        breaker=vector_gate(),
        admission=AdmissionLimit(settings.SEARCH_MAX_VECTOR_IN_FLIGHT),
        # Warming is work a process turning searches away can go without, and bounded.
        warm=schedule_warming_unless(
            front_door().shedding,
            TokenBucket(settings.SEARCH_WARMING_PER_S, burst=settings.SEARCH_WARMING_PER_S),
        ),
        watch_past_budget=_watch_past_budget,
    )


def _watch_past_budget() -> bool:
    """A share SEARCH_WHATIF_SAMPLE of searches, while the vector breaker is closed (as
    this process last saw it: no round trip) and the door is not shedding: watching a stage
    past its budget costs database time that a struggling system has not got."""
    return (
        random.random() < settings.SEARCH_WHATIF_SAMPLE  # noqa: S311 (not a secret)
        and vector_breaker().last_seen_state() == "closed"
        and not front_door().shedding()
    )


def forget_wiring() -> None:
    """Drop the per-process singletons (after a settings change, and between tests).
    Outcomes already given to the breaker are recorded first."""
    if vector_gate.cache_info().currsize:
        vector_gate().close()
    for made in (dependencies, vector_gate, vector_breaker, front_door, budgets):
        made.cache_clear()
    forget_replicas()
