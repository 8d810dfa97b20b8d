"""Values that flow through a search: the request, candidates, outcomes.

Outcomes are values, not exceptions: every response says how it was produced (`mode`),
whether it is degraded, and why (`reasons`, from a fixed set)."""

from dataclasses import dataclass, field
from datetime import UTC, datetime
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
    OVERLOADED = "overloaded"  # turned away at the door: this process had enough in flight
    QUEUED_PAST_DEADLINE = "queued_past_deadline"  # it waited its whole deadline before work
    # The counts on the filters were not given (the results were): not done by their
    # budget or the results, no idle connection for them, or the database failed them.
    FACETS_TIMEOUT = "facets_timeout"
    FACETS_ERROR = "facets_error"
    # Read from the primary, not a replica (retrieval/pg/replicas.py): every replica was
    # too far behind (or had not replayed the reader's own last change), or none answered.
    REPLICA_LAGGING = "replica_lagging"
    REPLICA_UNAVAILABLE = "replica_unavailable"


# Reasons about the counts, not the results: an answer with only these is not degraded.
FACET_REASONS = frozenset({Reason.FACETS_TIMEOUT, Reason.FACETS_ERROR})
# Reasons about where the answer was read: the primary's answer is as good as a replica's.
ROUTE_REASONS = frozenset({Reason.REPLICA_LAGGING, Reason.REPLICA_UNAVAILABLE})


class StageTimeoutError(Exception):
    """A stage's own server-side timeout fired (Postgres' statement_timeout): the same
    outcome as its budget running out on the client side, whichever came first."""


# The unbounded filters' keys, by (not_ended, ended, undated).
_NAMED = {
    (True, False, True): "upcoming",
    (False, True, False): "past",
    (False, False, True): "any",
}


@dataclass(frozen=True)
class DateFilter:
    """Which listings a search may return by their dates (retrieval/query/dates.py makes one
    from a request's `when`, `from` and `to`); bounds are held in UTC.

    (In UTC because two aware datetimes of one zone compare by wall time, fold ignored:
    01:30 BST and 01:30 GMT on the night clocks go back would be equal.)"""

    ends_after: datetime | None  # the event must end at or after this
    starts_before: datetime | None  # the event must start before this (exclusive)
    not_ended: bool  # only events that have not ended at the time of the search
    ended: bool  # only events that have ended (when=past)
    undated: bool  # listings without any date are included
    key: str = field(init=False)  # canonical text for the result cache key

    def __post_init__(self) -> None:
        for name in ("ends_after", "starts_before"):
            bound: datetime | None = getattr(self, name)
            if bound is not None:
                if bound.utcoffset() is None:
                    raise ValueError(f"{name} must be an aware datetime")
                object.__setattr__(self, name, bound.astimezone(UTC))
        object.__setattr__(self, "key", self._canonical_key())

    def _canonical_key(self) -> str:
        flags = (self.not_ended, self.ended, self.undated)
        if self.ends_after is None and self.starts_before is None and flags in _NAMED:
            return _NAMED[flags]
        parts = [
            f"after={self.ends_after.isoformat() if self.ends_after else '-'}",
            f"before={self.starts_before.isoformat() if self.starts_before else '-'}",
        ]
        parts += [name for name in ("not_ended", "ended", "undated") if getattr(self, name)]
        return ";".join(parts)


UPCOMING = DateFilter(
    ends_after=None, starts_before=None, not_ended=True, ended=False, undated=True
)


@dataclass(frozen=True)
class SearchFilters:
    """What a search is narrowed to, through both stages and hydration alike."""

    dates: DateFilter = UPCOMING
    venue: str = ""  # as asked; matched word by word, unaccented, in SQL
    kinds: tuple[str, ...] = ()  # source kinds, sorted; empty: any

    @property
    def key(self) -> str:
        """Part of the result cache key: equal filters, equal keys."""
        return f"{self.dates.key}|v={self.venue}|k={','.join(self.kinds)}"


DEFAULT_FILTERS = SearchFilters()


@dataclass(frozen=True)
class Query:
    """A validated query: the text as typed (for the database) and its normalised form
    (for cache keys); never logged, never a metric label."""

    text: str
    normalised: str
    k: int
    query_class: str  # a small fixed set derived from the query's shape (see query.py)
    filters: SearchFilters = DEFAULT_FILTERS
    page: int = 1  # of k results each; retrieval reads the ranking that deep
    # "relevance", or "date": the same ranked listings by start, sooner first. Only the
    # page is ordered so: the ranking, and its cached copy, are the same either way.
    sort: str = "relevance"


@dataclass(frozen=True)
class Candidate:
    listing_id: int
    score: float


@dataclass(frozen=True)
class LexicalResult:
    """The lexical stage's candidates, and the corrected query it searched for instead
    when the query as typed matched nothing ("did you mean")."""

    candidates: list[Candidate]
    suggestion: str | None = None


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
    # k that can still be shown (retrieval/pg/hydrate.py).
    ranking: list[int]
    matched: dict[int, set[str]]  # listing id -> stages that found it (api_types.Stage)
    reasons: list[Reason] = field(default_factory=list)
    generation: int | None = None
    cache_age_s: float | None = None
    timings: StageTimings = field(default_factory=StageTimings)
    suggestion: str | None = None  # what the lexical stage searched for instead

    @property
    def degraded(self) -> bool:
        return self.mode != Mode.HYBRID or bool(set(self.reasons) - FACET_REASONS - ROUTE_REASONS)


class NoAnswerError(Exception):
    def __init__(self, reasons: list[Reason]) -> None:
        super().__init__(", ".join(reasons))
        self.reasons = reasons


class CallerDeadlineError(Exception):
    """The caller's own deadline passed before we had anything: they are no longer
    waiting, so no fallback is built."""
