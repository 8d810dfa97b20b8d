"""GET /api/evaluation/search: the public search's own code over an evaluation set's
listings, with budgets the caller chooses, for the budget sweep (evaluation/sweep.py) to
drive over HTTP, at the concurrency and under the ingestion load it wants to measure.

Invariants a change must keep:
- only a bearer token of an evaluation set's own source opens it (401 otherwise, as the
  editorial API says it): it searches, and shows, that audience's listings only, so it
  can never serve as a second, unbudgeted public search;
- nothing it does moves the public retrieval metrics (the search runs `uncounted()`, and
  the view counts nothing itself), and its vector breaker is its own, on its own Redis
  key: a sweep at budgets too small to succeed must not open the public breaker, nor
  set the public breaker's gauge;
- what it shares with the public search it shares for real, since contention is what
  a sweep measures: the process's admission limit, the query embedder, the Postgres
  stages and pool, the result cache (whose keys name the generation, so the evaluation
  generation's entries never meet the public one's). It never warms the cache: warming
  runs public searches.
"""

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import cache

import psycopg
from django import forms
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET
from psycopg_pool import PoolTimeout

from evaluation.paths import MAX_QUERY_CHARS, UNBOUNDED, no_warming
from ingestion.tokens import digest
from resilience import redis_keys
from resilience.breaker import policy_from_settings
from resilience.redis_clients import breaker_redis_client
from resilience.shared_breaker import SharedBreaker
from retrieval import metrics
from retrieval.bounds.breaker_gate import BreakerGate
from retrieval.bounds.deadline import Deadline, SearchDeadline
from retrieval.pg.generation import GenerationLookup
from retrieval.pg.lexical import PgLexicalIndex
from retrieval.pg.statement import fetch_with_local_settings
from retrieval.protocols import Dependencies
from retrieval.query.parse import BadQueryError, parse_query
from retrieval.search import answer
from retrieval.service import budget_policy, dependencies, searchable_generation_id
from retrieval.types import NoAnswerError, Reason, StageTimeoutError
from retrieval.web.api import bad_request, outcome_json, timings_json, unavailable

# The longest deadline or vector budget a caller may ask for: the unbounded policy's
# deadline, which `evaluate` and the sweep's reference run use.
MAX_OVERRIDE_MS = UNBOUNDED.objective_ms
# Under the pattern the tests (and operators) clear with the public breaker's key.
BREAKER_KEY = redis_keys.EVALUATION_BREAKER

# Every statement of this API opens with it (retrieval.pg.statement.fetch_with_local_settings).
EVALUATION_TAG = "searchsite:evaluation"
# The token and the documents are read through the search's own pool, not the ORM: under
# ASGI each request's ORM work runs in a thread of its own, whose persistent connection
# outlived it (a sweep at concurrency 4 ran Postgres out of connections that way).
LOOKUP_MS = 1000
_SET_SOURCE_BY_DIGEST = """
SELECT s.id, s.audience, t.token_hash FROM ingestion_apitoken t
JOIN evaluation_evaluationset e ON e.source_id = t.source_id
JOIN ingestion_source s ON s.id = t.source_id
WHERE t.token_hash = %(digest)s AND NOT t.revoked
"""
_DOCUMENTS = """
SELECT listing_id, external_id FROM ingestion_sourcerecord
WHERE source_id = %(source)s AND listing_id = ANY(%(ids)s::bigint[])
ORDER BY external_id
"""

# Each evaluation set's own generation (its audience's), looked up as the public one is.
_generations: dict[str, GenerationLookup] = {}


class _Budgets(forms.Form):
    """The budget overrides; blank or absent keeps the configured policy's value."""

    vector_budget_ms = forms.FloatField(required=False, min_value=0, max_value=MAX_OVERRIDE_MS)
    deadline_ms = forms.FloatField(required=False, min_value=0, max_value=MAX_OVERRIDE_MS)


@cache
def vector_gate() -> BreakerGate:
    client = breaker_redis_client(settings.REDIS_URL, timeout_s=0.05)
    policy = policy_from_settings("VECTOR_BREAKER")
    return BreakerGate(SharedBreaker(client, BREAKER_KEY, policy), reported=False)


def forget_wiring() -> None:
    """Drop this process's evaluation breaker and generation (between tests)."""
    if vector_gate.cache_info().currsize:
        vector_gate().close()
    vector_gate.cache_clear()
    _generations.clear()


def _generation_of(audience: str) -> Callable[[Deadline], Awaitable[int | None]]:
    lookup = _generations.setdefault(audience, GenerationLookup(audience))

    async def active(deadline: Deadline) -> int | None:
        return await searchable_generation_id(deadline, lookup)

    return active


def _dependencies(audience: str) -> Dependencies:
    """The public wiring, pointed at an evaluation set's audience. Made per request from
    `dependencies()`, so it is always the process's current admission limit."""
    return replace(
        dependencies(),
        lexical=PgLexicalIndex(audience),
        searchable_generation_id=_generation_of(audience),
        breaker=vector_gate(),
        warm=no_warming,
    )


async def _evaluation_source(request: HttpRequest) -> tuple[int, str] | None:
    """The id and audience of the evaluation set's source the bearer token belongs to, if
    it does."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    presented = digest(token.strip())
    rows = await fetch_with_local_settings(
        EVALUATION_TAG, _SET_SOURCE_BY_DIGEST, {"digest": presented}, Deadline.after(LOOKUP_MS)
    )
    # Compared as the editorial API compares (ingestion/tokens.py says why).
    if not rows or not hmac.compare_digest(str(rows[0][2]), presented):
        return None
    return int(rows[0][0]), str(rows[0][1])


def _budgets(request: HttpRequest) -> SearchDeadline:
    form = _Budgets(request.GET)
    if not form.is_valid():
        name, errors = next(iter(form.errors.items()))
        raise BadQueryError(f"{name}: {' '.join(map(str, errors))}")
    overrides = {name: value for name, value in form.cleaned_data.items() if value is not None}
    policy = budget_policy()
    policy = replace(
        policy,
        objective_ms=overrides.get("deadline_ms", policy.objective_ms),
        vector_budget_ms=overrides.get("vector_budget_ms", policy.vector_budget_ms),
    )
    return SearchDeadline.planned(policy)


async def _documents(source_id: int, listing_ids: list[int]) -> list[str]:
    """The set's documents the listings stand for, in the listings' order (a listing
    several documents were merged into stands for all of them, in document-id order)."""
    if not listing_ids:
        return []
    rows = await fetch_with_local_settings(
        EVALUATION_TAG,
        _DOCUMENTS,
        {"source": source_id, "ids": listing_ids},
        Deadline.after(LOOKUP_MS),
    )
    of: dict[int, list[str]] = {}
    for listing_id, external_id in rows:
        of.setdefault(listing_id, []).append(external_id)
    return [document for listing_id in listing_ids for document in of.get(listing_id, ())]


@require_GET
async def search(request: HttpRequest) -> JsonResponse:
    try:
        source = await _evaluation_source(request)
        if source is None:
            response = JsonResponse({"error": "a valid bearer token is required"}, status=401)
            response["WWW-Authenticate"] = 'Bearer realm="evaluation"'
            return response
        try:
            query = parse_query(
                request.GET.get("q"),
                request.GET.get("k"),
                max_chars=MAX_QUERY_CHARS,
                max_k=settings.SEARCH_MAX_K,
            )
            deadline = _budgets(request)
        except BadQueryError as exc:
            return bad_request(exc)
        source_id, audience = source
        with metrics.uncounted():
            shown = await answer(query, deadline, _dependencies(audience), audience)
        # The public body, and the judged documents' own ids beside it.
        body: dict[str, object] = {**outcome_json(shown)}
        body["documents"] = await _documents(source_id, [view.id for view in shown.listings])
    except NoAnswerError as exc:
        return unavailable(list(exc.reasons), 503, "no search stage answered within the deadline")
    except (StageTimeoutError, PoolTimeout, psycopg.Error, OSError):
        # The token or the documents could not be read: no answer, said as such.
        return unavailable([Reason.DATABASE_ERROR], 503, "the evaluation set could not be read")
    body["timings_ms"] = timings_json(shown.outcome)
    return JsonResponse(body)
