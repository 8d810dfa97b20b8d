"""Every Redis key the system writes, and its format, in one place: a writer and a reader
in another package (the budget sweep clearing a generation's cached rankings, ops reading
the breaker) can never disagree on one. Besides these, Redis holds Celery's queues (named
after them: searchsite/celery.py) and Django's cache (sessions), under the key prefix
`searchsite` that CACHES gives it."""

# A ranking cached for one query: by the generation that made it, the k asked for and a
# digest of the normalised query and its filters (retrieval/cache.py). The version is
# raised when the stored shape changes, so old entries are never misread.
_RANKINGS = "searchsite:results:v1"


def cached_ranking(generation: int, k: int, digest: str) -> str:
    return f"{_RANKINGS}:g{generation}:k{k}:{digest}"


def cached_rankings_of(generation: int) -> str:
    """A SCAN pattern: every ranking cached for `generation`."""
    return f"{_RANKINGS}:g{generation}:*"


# A breaker's shared state (resilience/shared_breaker.py): the public vector stage's, and
# the evaluation API's own, which evaluations never share with the public.
VECTOR_BREAKER = "searchsite:breaker:vector"
EVALUATION_BREAKER = "searchsite:breaker:evaluation-vector"

# Cache warming (retrieval/warming/schedule.py): places reserved in the bounded queue, the mark
# that a key's warming is scheduled, and the job's query, which stays out of the broker.
WARMING_RESERVATIONS = "searchsite:warming-reservations"


def warming_scheduled(cache_key: str) -> str:
    return f"searchsite:warming:{cache_key}"


def warming_job(cache_key: str) -> str:
    return f"searchsite:warm-job:{cache_key}"


# Workers' heartbeats (searchsite/heartbeat.py), and the mark that an embedding sweep is
# queued (ingestion/tasks.py).
WORKER_HEARTBEATS = "searchsite:worker-heartbeats"
EMBED_SCHEDULED = "searchsite:embed-scheduled"

# Search pressure (resilience/search_pressure.py): one field per web process, its searches
# over its last tenth of a second, read by the embedding sweep's pacer.
SEARCH_PRESSURE = "searchsite:search-pressure"

# The embedding sweep's pace (ingestion/pacing.py), for the ops page: while a sweep runs.
VECTOR_PACE = "searchsite:vector-pace"


def views_refreshed(view: str) -> str:
    """A hash: the listings' change count and the time of the last refresh of the views
    `view` heads (retrieval/pg/views.py)."""
    return f"searchsite:views-refreshed:{view}"
