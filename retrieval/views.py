"""The public search API. The page (retrieval/page.py) runs the same search through
`_search`; the API says how every answer was made. `answer`, `outcome_json` and
`unavailable` are the evaluation API's too (evaluation/views.py), so the two answer in one
shape, made one way."""

import asyncio
from typing import Any

import psycopg
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET
from psycopg_pool import PoolTimeout

from ingestion.models import Audience
from retrieval import metrics
from retrieval.deadline import SearchDeadline, parse_caller_timeout, plan_budgets
from retrieval.hybrid import (
    CallerDeadlineError,
    Dependencies,
    LexicalWatcher,
    NoAnswerError,
    hybrid_search,
)
from retrieval.hydrate import ListingView, hydrate
from retrieval.query import BadQueryError, parse_query
from retrieval.service import budget_policy, dependencies
from retrieval.types import Query, Reason, SearchOutcome, StageTimeoutError

RETRY_AFTER_S = 1


def _parse(request: HttpRequest) -> tuple[Query, float | None]:
    """The query and the caller's own timeout in ms (None: ours binds)."""
    query = parse_query(
        request.GET.get("q"),
        request.GET.get("k"),
        max_chars=settings.SEARCH_MAX_QUERY_CHARS,
        max_k=settings.SEARCH_MAX_K,
    )
    caller = parse_caller_timeout(
        request.GET.get("timeout_ms"), request.headers.get("X-Request-Timeout-Ms")
    )
    return query, caller


async def _search(
    query: Query, caller_timeout_ms: float | None, on_lexical: LexicalWatcher | None = None
) -> tuple[SearchOutcome, list[ListingView]]:
    """Raises NoAnswerError / CallerDeadlineError; lets parent cancellation through."""
    # The request's one deadline: every part of the search below runs by it.
    deadline = SearchDeadline.start(
        plan_budgets(budget_policy(), caller_timeout_ms=caller_timeout_ms)
    )
    metrics.STARTED.labels(query_class=query.query_class).inc()
    try:
        outcome, listings = await answer(query, deadline, dependencies(), on_lexical=on_lexical)
    except asyncio.CancelledError:
        metrics.PARENT_CANCELLED.labels(cause="disconnect").inc()
        raise
    except CallerDeadlineError:
        metrics.PARENT_CANCELLED.labels(cause="caller_deadline").inc()
        raise
    except NoAnswerError as exc:
        metrics.UNAVAILABLE.labels(query_class=query.query_class).inc()
        for reason in exc.reasons:
            metrics.REASONS.labels(reason=reason).inc()
        raise
    _count(query, outcome)
    return outcome, listings


async def answer(
    query: Query,
    deadline: SearchDeadline,
    deps: Dependencies,
    audience: str = Audience.PUBLIC,
    on_lexical: LexicalWatcher | None = None,
) -> tuple[SearchOutcome, list[ListingView]]:
    """The search and the listings of `audience` it shows, by the one deadline, with the
    outcome's total time set; counts nothing (the public views count around it, the
    evaluation API must not). Raises NoAnswerError / CallerDeadlineError."""
    outcome = await hybrid_search(query, deadline, deps, on_lexical)
    listings = await _hydrate(outcome, query, deadline, audience)
    outcome.timings.total_ms = deadline.elapsed_ms()
    return outcome, listings


async def _hydrate(
    outcome: SearchOutcome, query: Query, deadline: SearchDeadline, audience: str
) -> list[ListingView]:
    """The ranked listings, read now, by what is left of the deadline (at least the
    reserve). A database that cannot answer by then is a 503, on time, not a late 200."""
    try:
        return await hydrate(outcome.ranking, query.text, query.k, deadline.end, audience)
    except (StageTimeoutError, PoolTimeout) as exc:
        raise NoAnswerError([*outcome.reasons, Reason.LISTINGS_TIMEOUT]) from exc
    except (psycopg.Error, OSError) as exc:
        raise NoAnswerError([*outcome.reasons, Reason.DATABASE_ERROR]) from exc


def _count(query: Query, outcome: SearchOutcome) -> None:
    metrics.COMPLETED.labels(
        mode=outcome.mode,
        degraded=str(outcome.degraded).lower(),
        query_class=query.query_class,
        generation=str(outcome.generation),
    ).inc()
    metrics.REQUEST_SECONDS.labels(mode=outcome.mode).observe(
        (outcome.timings.total_ms or 0) / 1000
    )
    for reason in outcome.reasons:
        metrics.REASONS.labels(reason=reason).inc()


def _listing_json(view: ListingView, matched: set[str]) -> dict[str, Any]:
    return {
        "id": view.id,
        "title": view.title,
        "venue": view.venue,
        "start": view.start.isoformat() if view.start else None,
        "url": view.url,
        "snippet": view.snippet,
        "matched": sorted(matched),
    }


def outcome_json(outcome: SearchOutcome, listings: list[ListingView]) -> dict[str, Any]:
    """How the answer was made and what it shows: the body of every search API."""
    return {
        "mode": outcome.mode,
        "degraded": outcome.degraded,
        "reasons": list(outcome.reasons),
        "index_generation": outcome.generation,
        "cache_age_s": round(outcome.cache_age_s, 3) if outcome.cache_age_s is not None else None,
        "results": [_listing_json(v, outcome.matched.get(v.id, set())) for v in listings],
    }


def timings_json(outcome: SearchOutcome) -> dict[str, float]:
    return {k: v for k, v in vars(outcome.timings).items() if v is not None}


def unavailable(reasons: list[str], status: int, message: str) -> JsonResponse:
    response = JsonResponse({"error": message, "reasons": reasons}, status=status)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


@require_GET
async def search_api(request: HttpRequest) -> JsonResponse:
    try:
        query, caller_timeout_ms = _parse(request)
    except BadQueryError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    try:
        outcome, listings = await _search(query, caller_timeout_ms)
    except NoAnswerError as exc:
        return unavailable(list(exc.reasons), 503, "no search stage answered within the deadline")
    except CallerDeadlineError:
        return unavailable([], 504, "the caller's deadline passed before any stage answered")
    user = await request.auser()
    body = outcome_json(outcome, listings)
    if user.is_staff:
        body["timings_ms"] = timings_json(outcome)
    return JsonResponse(body)
