"""Retrieval metrics. Label values come from fixed sets only: mode, reason, stage, query
class (the query's shape, never its text), generation id, and small cause/event sets.

They count public traffic only: a search run `uncounted()` (an evaluation of judged
queries, the recall guardrail) leaves them as they were, so ops never read a benchmark's
fallbacks as users' (`counted()` is checked where the search path records them)."""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from prometheus_client import Counter, Gauge, Histogram

# Tasks a search starts copy the context, so its stages inherit the flag.
_counted: ContextVar[bool] = ContextVar("retrieval_metrics_counted", default=True)


def counted() -> bool:
    return _counted.get()


@contextmanager
def uncounted() -> Iterator[None]:
    token = _counted.set(False)
    try:
        yield
    finally:
        _counted.reset(token)


LATENCY_BUCKETS = (
    0.001,
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.03,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
    1.0,
    2.0,
)

STARTED = Counter("retrieval_started", "Searches started", ["query_class"])
# Suggestions as a visitor types: answered, or given none because the statement missed its
# deadline (`timeout`) or failed (`error`).
SUGGESTIONS = Counter("retrieval_suggestions", "Suggestion requests", ["outcome"])
# outcome: counted (given with the results), timeout (not by their budget or the results,
# or no idle connection), error (the database failed them, or nothing to count by).
FACETS = Counter("retrieval_facets", "Counts on the filters, per search", ["outcome"])
SUGGEST_SECONDS = Histogram(
    "retrieval_suggest_seconds", "Time to answer a suggestion request", buckets=LATENCY_BUCKETS
)
# Beat's rounds over the views searches read (retrieval/pg/views.py), by the views' first
# (retrieval_vocabulary, retrieval_suggestion) and whether they were refreshed or left
# unchanged, and how long the refreshes took: seconds of Postgres work beside searches.
VIEW_ROUNDS = Counter(
    "retrieval_view_rounds", "Beat's rounds over the views searches read", ["views", "outcome"]
)
VIEW_REFRESH_SECONDS = Histogram(
    "retrieval_view_refresh_seconds",
    "Time beat's refresh of the views searches read took",
    ["views"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64),
)
COMPLETED = Counter(
    "retrieval_completed", "Searches answered", ["mode", "degraded", "query_class", "generation"]
)
UNAVAILABLE = Counter(
    "retrieval_unavailable",
    "Searches answered 503: no branch or cache within the deadline",
    ["query_class"],
)
REASONS = Counter("retrieval_degradation_reasons", "Why a search was degraded", ["reason"])
DEADLINE_EXHAUSTED = Counter(
    "retrieval_local_deadline_exhausted", "A stage ran out of its local budget", ["stage"]
)
PARENT_CANCELLED = Counter(
    "retrieval_parent_cancelled",
    "Searches abandoned by the caller (disconnect or the caller's own deadline)",
    ["cause"],
)
VECTOR_ELIGIBLE = Counter(
    "retrieval_vector_eligible", "Searches whose vector stage was started within its budget"
)
VECTOR_EXHAUSTED = Counter(
    "retrieval_vector_budget_exhausted",
    "Vector stages that missed their budget; divided by eligible, the early warning",
)
# The vector stage's time from the search's arrival, which is what its budget is counted
# from, at the resolution a what-if of another budget needs (ops/whatif.py): every
# candidate budget is one of these bounds, the budget in force among them
# (retrieval/bounds/checks.py).
WHATIF_BOUNDS = (
    0.005,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.045,
    0.05,
    0.06,
    0.07,
    0.08,
    0.1,
    0.12,
    0.15,
)
VECTOR_STAGE = Histogram(
    "retrieval_vector_stage_seconds",
    "Vector stages by their time from arrival; one cut at its budget counts only at +Inf",
    ["query_class", "generation"],
    buckets=WHATIF_BOUNDS,
)
VECTOR_STAGE_SAMPLED = Histogram(
    "retrieval_vector_stage_sampled_seconds",
    "The sampled vector stages, watched past the budget up to the stages' deadline",
    ["query_class", "generation"],
    buckets=WHATIF_BOUNDS,
)
VECTOR_SAMPLE_SECONDS = Counter(
    "retrieval_vector_sample_seconds",
    "Time sampled vector stages ran past their budget: what the what-if's sample costs",
)
# A budget canary (retrieval/bounds/arms.py): what each arm runs by, and what its searches
# gave, for the ops page's comparison. The arm "none" (no canary) is not recorded.
BUDGET_MS = Gauge(
    "retrieval_budget_ms",
    "The budgets each arm's searches run by (the canary's 0 when none runs)",
    ["arm", "budget"],
    multiprocess_mode="livemostrecent",
)
CANARY_SHARE = Gauge(
    "retrieval_canary_share",
    "The share of readers in a running canary's arm (0: none runs)",
    multiprocess_mode="livemostrecent",
)
ARM_ANSWERS = Counter(
    "retrieval_arm_answers", "Searches answered in each arm, by mode", ["arm", "mode"]
)
ARM_UNAVAILABLE = Counter("retrieval_arm_unavailable", "Searches given a 503, per arm", ["arm"])
ARM_SECONDS = Histogram(
    "retrieval_arm_request_seconds", "Search latency per arm", ["arm"], buckets=LATENCY_BUCKETS
)
ARM_VECTOR = Counter(
    "retrieval_arm_vector_stages",
    "Vector stages per arm: eligible (started within budget), exhausted (cut at it)",
    ["arm", "outcome"],
)
VECTOR_REMAINING = Histogram(
    "retrieval_vector_remaining_budget_seconds",
    "Budget left when the vector stage completed in time",
    buckets=LATENCY_BUCKETS,
)
STAGE_SECONDS = Histogram(
    "retrieval_stage_seconds", "Stage latency", ["stage"], buckets=LATENCY_BUCKETS
)
REQUEST_SECONDS = Histogram(
    "retrieval_request_seconds", "Search request latency", ["mode"], buckets=LATENCY_BUCKETS
)
IN_FLIGHT = Gauge(
    "retrieval_in_flight", "Stages running now", ["stage"], multiprocess_mode="livesum"
)
BREAKER_STATE = Gauge(
    "retrieval_vector_breaker_open",
    "1 when this process sees the vector breaker open or half-open",
    multiprocess_mode="max",
)
REQUESTS_IN_FLIGHT = Gauge(
    "retrieval_requests_in_flight",
    "Search requests past the door and not yet answered",
    multiprocess_mode="livesum",
)
POOL_WAIT = Histogram(
    "retrieval_pool_wait_seconds",
    "Waits for a search connection from the pool",
    buckets=LATENCY_BUCKETS,
)
POOL_TIMEOUTS = Counter(
    "retrieval_pool_timeouts", "Waits for a search connection that ran out of time"
)
# A stalled Postgres shows here: statements past their deadline still being cleaned up,
# clean-ups that ran out of their bound (each closed a connection), and the pool's size.
STATEMENTS_ABANDONED = Gauge(
    "retrieval_statements_abandoned",
    "Search statements past their deadline whose clean-up is under way",
    multiprocess_mode="livesum",
)
CLEANUPS_CUT_OFF = Counter(
    "retrieval_statement_cleanups_cut_off",
    "Abandoned search statements whose clean-up ran out of its bound (connection closed)",
)
POOL_CONNECTIONS = Gauge(
    "retrieval_pool_connections",
    "Search connections a pool holds, idle or in use, by the pool's connection name "
    "(searchsite-search, searchsite-warming; sampled)",
    ["connections", "state"],
    multiprocess_mode="livesum",
)
EVENT_LOOP_TASKS = Gauge(
    "retrieval_event_loop_tasks",
    "Tasks on the event loop of a search pool, by its connection name (sampled)",
    ["connections"],
    multiprocess_mode="livesum",
)
SHED_AT_DOOR = Counter(
    "retrieval_shed_at_door",
    "Search requests answered 503 at the door, before any work: too many in flight",
    ["surface"],
)
WARMING = Counter("retrieval_cache_warming", "Cache warming", ["event"])
# Where searches read (retrieval/pg/replicas.py): `server` is "primary" or "replica-N",
# one per configured replica.
READS = Counter("retrieval_reads", "Searches by the server they started reading from", ["server"])
REPLICA_STATEMENTS = Counter(
    "retrieval_replica_statements",
    "Search statements sent to a replica, by how they ended: answered; late (not within"
    " its patience) or error (a failure, a broken connection, a recovery conflict), after"
    " which the statement ran on the primary",
    ["server", "outcome"],
)
REPLICA_LAG = Gauge(
    "retrieval_replica_lag_seconds",
    "A replica's replay lag as this process last checked it (NaN: its check did not answer)",
    ["server"],
    multiprocess_mode="max",
)
