"""Values that flow through a search: the request, candidates, outcomes.

Outcomes are values, not exceptions: every response says how it was produced (`mode`),
whether it is degraded, and why (`reasons`, from a fixed set)."""

from dataclasses import dataclass, field
from enum import StrEnum


class Mode(StrEnum):
    HYBRID = "hybrid"
    LEXICAL_FALLBACK = "lexical_fallback"
    CACHE_FALLBACK = "cache_fallback"
    VECTOR_FALLBACK = "vector_fallback"  # the lexical stage failed; vectors alone answer


class Reason(StrEnum):
    VECTOR_TIMEOUT = "vector_timeout"
    VECTOR_ERROR = "vector_error"
    EMBED_TIMEOUT = "embed_timeout"
    BREAKER_OPEN = "breaker_open"
    SHED = "shed"
    NO_BUDGET = "no_budget"
    NO_GENERATION = "no_generation"
    LEXICAL_TIMEOUT = "lexical_timeout"
    LEXICAL_ERROR = "lexical_error"
    DATABASE_ERROR = "database_error"
    LISTINGS_TIMEOUT = "listings_timeout"  # the ranked listings could not be read in time


class StageTimeoutError(Exception):
    """A stage's own server-side timeout fired (Postgres' statement_timeout): the same
    outcome as its budget running out on the client side, whichever came first."""


@dataclass(frozen=True)
class Query:
    """A validated query: the text as typed (for the database) and its normalised form
    (for cache keys); never logged, never a metric label."""

    text: str
    normalised: str
    k: int
    query_class: str  # a small fixed set derived from the query's shape (see query.py)


@dataclass(frozen=True)
class Candidate:
    listing_id: int
    score: float


@dataclass(frozen=True)
class CachedRanking:
    """A complete hybrid ranking as cached: ids only, re-read from Postgres when served."""

    ranking: list[int]
    generation: int
    created_at: float  # unix time


@dataclass
class StageTimings:
    lexical_ms: float | None = None
    vector_ms: float | None = None
    embed_ms: float | None = None
    total_ms: float | None = None


@dataclass
class SearchOutcome:
    mode: Mode
    # Listing ids, best first: every candidate, more than k; the response shows the first
    # k that can still be shown (retrieval/hydrate.py).
    ranking: list[int]
    matched: dict[int, set[str]]  # listing id -> stages that found it ("lexical", "vector")
    reasons: list[Reason] = field(default_factory=list)
    generation: int | None = None
    cache_age_s: float | None = None
    timings: StageTimings = field(default_factory=StageTimings)

    @property
    def degraded(self) -> bool:
        return self.mode != Mode.HYBRID or bool(self.reasons)
