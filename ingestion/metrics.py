"""Ingestion metrics. Label values come from fixed sets: source kind, outcome, status.
Never a title, URL or source name."""

from prometheus_client import Counter, Histogram

from ingestion.upsert import Counts, Outcome

# Seconds from fetch to searchable: sub-second for lexical, up to minutes for vectors.
LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 900, 3600)

LEXICAL_LAG = Histogram(
    "ingestion_fetch_to_lexical_seconds",
    "From fetching an input to its listing being lexically searchable",
    ["kind"],
    buckets=LAG_BUCKETS,
)
VECTOR_LAG = Histogram(
    "ingestion_fetch_to_vector_seconds",
    "From fetching an input to its listing being vector searchable in the active generation",
    ["kind"],
    buckets=LAG_BUCKETS,
)
ITEMS = Counter("ingestion_items", "Input items by outcome", ["kind", "outcome"])
POLLS = Counter("ingestion_polls", "Polls by status", ["kind", "status"])
EMBEDDED = Counter("ingestion_embeddings", "Listing embeddings written", ["generation_state"])
# Of those, the ones given a vector already made from the same text in the generation,
# without running the model.
REUSED = Counter(
    "ingestion_embeddings_reused",
    "Listing embeddings written from a vector of the same text",
    ["generation_state"],
)

# The pacers (ingestion/pacing.py): listings whose work (their vectors, or a payload's
# listings themselves) each let through, by its mode then, and the time each rested to
# leave the CPU to searches.
PACED = Counter(
    "ingestion_paced",
    "Listings let through by a pacer, by the work (vectors: the model's, then the write's; "
    "listings: a payload's) and its mode then: full (searches quiet), shared (a share of "
    "the time beside searches) or floor (only the floor's progress)",
    ["work", "mode"],
)
PACED_REST = Counter(
    "ingestion_paced_rest_seconds",
    "Seconds a pacer rested its work to leave the CPU to searches",
    ["work"],
)
IDLE_STARVED = Counter(
    "ingestion_idle_cores_starved",
    "Model slices the idle-class thread did not finish in time, run at normal priority",
)


def record_outcomes(kind: str, counts: Counts) -> None:
    for outcome in Outcome:
        value = getattr(counts, outcome)
        if value:
            ITEMS.labels(kind=kind, outcome=outcome).inc(value)
