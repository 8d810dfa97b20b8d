"""The public search API over HTTP, thin: the request parsed, the search run
(retrieval/search.py), the answer written. The API says how every answer was made;
`outcome_json` and `unavailable` are the evaluation API's too (evaluation/views.py), so
the two answer in one shape."""

import asyncio
import dataclasses
import time
from datetime import datetime
from typing import cast

import psycopg
from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from retrieval import metrics
from retrieval.bounds import arrival
from retrieval.bounds.arms import budgets_for
from retrieval.bounds.deadline import Deadline, SearchDeadline, parse_caller_timeout
from retrieval.pg.facets import Count, Facets
from retrieval.pg.hydrate import ListingView
from retrieval.pg.suggestions import suggest
from retrieval.query.filters import parse_filters
from retrieval.query.parse import BadQueryError, parse_page, parse_query, parse_sort, parse_typed
from retrieval.search import Shown, described, search
from retrieval.service import budget_policy, budgets
from retrieval.types import (
    CallerDeadlineError,
    NoAnswerError,
    Query,
    Reason,
    SearchOutcome,
    StageTimeoutError,
)
from retrieval.web.api_types import (
    BadParameterBody,
    CountBody,
    DateBody,
    FacetsBody,
    ResultBody,
    SearchBody,
    SourceBody,
    SourceKind,
    Stage,
    SuggestBody,
    SuggestionBody,
    SuggestionKind,
    UnavailableBody,
)
from retrieval.web.own_writes import written_position
from retrieval.web.reader import READER_COOKIE

RETRY_AFTER_S = 1


def parse_search(request: HttpRequest) -> tuple[Query, float | None]:
    """The query with its filters and page, and the caller's own timeout in ms (None:
    ours binds). BadQueryError names the parameter at fault."""
    query = parse_query(
        request.GET.get("q"),
        request.GET.get("k"),
        max_chars=settings.SEARCH_MAX_QUERY_CHARS,
        max_k=settings.SEARCH_MAX_K,
    )
    filters = parse_filters(request.GET, request.GET.getlist("kind"))
    page = parse_page(request.GET.get("page"), settings.SEARCH_MAX_PAGE)
    sort = parse_sort(request.GET.get("sort"))
    caller = parse_caller_timeout(
        request.GET.get("timeout_ms"), request.headers.get("X-Request-Timeout-Ms")
    )
    return dataclasses.replace(query, filters=filters, page=page, sort=sort), caller


def request_deadline(request: HttpRequest, caller_timeout_ms: float | None) -> SearchDeadline:
    """The request's one deadline, counted from its arrival (retrieval/bounds/arrival.py): every
    part of its search runs by it, and so does the page's preview."""
    scope = getattr(request, "scope", {})  # an ASGI request's; a WSGI one arrived now
    arm, vector_budget_ms, deadline_ms = budgets_for(budgets().current(), reader(request))
    return SearchDeadline.planned(
        budget_policy(vector_budget_ms, deadline_ms),
        caller_timeout_ms=caller_timeout_ms,
        arrived_at=scope.get(arrival.SCOPE_KEY),
        arm=arm,
    )


def reader(request: HttpRequest) -> str:
    """Who is searching, for the arm of a budget canary they stay in: the page's reader
    cookie (retrieval/web/reader.py), else the client's address."""
    return request.COOKIES.get(READER_COOKIE) or request.META.get("REMOTE_ADDR", "")


def _listing_json(view: ListingView, matched: set[str], now: datetime) -> ResultBody:
    told = described(view, now)
    return {
        "id": view.id,
        "title": view.title,
        "venue": view.venue,
        "start": told.start,
        "end": told.end,
        "timezone": told.zone,
        "all_day": view.all_day,
        "when": told.when,
        "recurrence": view.recurrence,
        "more_dates": view.more_dates,
        "dates": [DateBody(start=d.start, end=d.end, when=d.when) for d in told.later],
        "url": view.url,
        "snippet": view.snippet,
        "matched": sorted(cast("set[Stage]", matched)),
        "sources": [
            SourceBody(name=source.name, kind=cast("SourceKind", source.kind))
            for source in view.sources
        ],
        "provenance": told.provenance,
    }


def outcome_json(shown: Shown) -> SearchBody:
    """How the answer was made and what it shows: the body of every search API."""
    outcome, now = shown.outcome, timezone.now()
    return {
        "mode": outcome.mode,
        "degraded": outcome.degraded,
        "reasons": list(outcome.reasons),
        "index_generation": outcome.generation,
        "cache_age_s": round(outcome.cache_age_s, 3) if outcome.cache_age_s is not None else None,
        "suggestion": outcome.suggestion,
        "page": shown.page,
        "next_page": shown.next_page,
        "facets": _facets_json(shown.facets) if shown.facets is not None else None,
        "results": [
            _listing_json(v, outcome.matched.get(v.id, set()), now) for v in shown.listings
        ],
    }


def _facets_json(facets: Facets) -> FacetsBody:
    def counts(of: tuple[Count, ...]) -> list[CountBody]:
        return [CountBody(value=c.value, count=c.count, at_least=c.at_least) for c in of]

    return FacetsBody(
        when=counts(facets.when), kind=counts(facets.kind), venue=counts(facets.venue)
    )


def timings_json(outcome: SearchOutcome) -> dict[str, float]:
    return {k: v for k, v in vars(outcome.timings).items() if v is not None}


def unavailable(reasons: list[Reason], status: int, message: str) -> JsonResponse:
    response = JsonResponse(UnavailableBody(error=message, reasons=reasons), status=status)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def bad_request(exc: BadQueryError) -> JsonResponse:
    body = BadParameterBody(error=str(exc), parameter=exc.parameter)
    return JsonResponse(body, status=400)


@require_GET
async def search_api(request: HttpRequest) -> JsonResponse:
    try:
        query, caller_timeout_ms = parse_search(request)
    except BadQueryError as exc:
        return bad_request(exc)
    deadline = request_deadline(request, caller_timeout_ms)
    try:
        shown = await search(query, deadline, min_lsn=written_position(request))
    except NoAnswerError as exc:
        return unavailable(list(exc.reasons), 503, "no search stage answered within the deadline")
    except CallerDeadlineError:
        return unavailable([], 504, "the caller's deadline passed before any stage answered")
    body = outcome_json(shown)
    if await _staff(request, deadline.end):
        body["timings_ms"] = timings_json(shown.outcome)
    return JsonResponse(body)


@require_GET
async def suggest_api(request: HttpRequest) -> JsonResponse:
    """Suggestions for what has been typed so far. Any text it takes is answered 200: a
    database too slow for the suggestions' deadline, or failing, gives none (counted by
    outcome), never an error a search box would have to show."""
    try:
        typed = parse_typed(request.GET.get("q"), settings.SEARCH_SUGGEST_MAX_CHARS)
    except BadQueryError as exc:
        return bad_request(exc)
    started = time.perf_counter()
    deadline = Deadline.after(settings.SEARCH_SUGGEST_DEADLINE_MS)
    try:
        found = await suggest(typed, settings.SEARCH_SUGGEST_LIMIT, deadline)
        outcome = "answered"
    except StageTimeoutError:
        found, outcome = [], "timeout"
    except psycopg.Error:  # the pool's timeouts and an unreachable server included
        found, outcome = [], "error"
    metrics.SUGGESTIONS.labels(outcome=outcome).inc()
    metrics.SUGGEST_SECONDS.observe(time.perf_counter() - started)
    body = SuggestBody(
        suggestions=[
            SuggestionBody(text=one.text, kind=cast("SuggestionKind", one.kind)) for one in found
        ]
    )
    return JsonResponse(body)


async def _staff(request: HttpRequest, deadline: Deadline) -> bool:
    """Whether the caller is staff, asked of the database (a signed-in caller's user row)
    by the search's deadline: a database that cannot say by then makes the answer one
    without timings, not a late one."""
    try:
        async with asyncio.timeout(max(deadline.remaining_ms(), 1) / 1000):
            user = await request.auser()
    except (TimeoutError, DatabaseError):
        return False
    return bool(user.is_staff)
