"""The public search API. The page (retrieval/page.py) runs the same search through
`search`; the API says how every answer was made. `answer`, `outcome_json` and
`unavailable` are the evaluation API's too (evaluation/views.py), so the two answer in one
shape, made one way."""

import asyncio
import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import NoReturn, cast

import psycopg
from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from psycopg_pool import PoolTimeout

from ingestion.models import Audience
from retrieval import arrival, metrics
from retrieval.api_types import (
    BadParameterBody,
    ResultBody,
    SearchBody,
    SourceBody,
    SourceKind,
    Stage,
    UnavailableBody,
)
from retrieval.deadline import Deadline, SearchDeadline, parse_caller_timeout
from retrieval.filters import parse_filters, site_zone
from retrieval.hybrid import (
    CallerDeadlineError,
    Dependencies,
    LexicalWatcher,
    NoAnswerError,
    hybrid_search,
)
from retrieval.hydrate import ListingView, hydrate
from retrieval.presentation import iso_local, listing_zone, provenance_text, when_text
from retrieval.query import BadQueryError, parse_page, parse_query
from retrieval.service import budget_policy, dependencies
from retrieval.types import Query, Reason, SearchOutcome, StageTimeoutError

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
    caller = parse_caller_timeout(
        request.GET.get("timeout_ms"), request.headers.get("X-Request-Timeout-Ms")
    )
    return dataclasses.replace(query, filters=filters, page=page), caller


@dataclass(frozen=True)
class Shown:
    """A search's outcome and the page of listings it shows."""

    outcome: SearchOutcome
    listings: list[ListingView]
    page: int
    next_page: int | None  # None: the ranking holds no more showable listings


def request_deadline(request: HttpRequest, caller_timeout_ms: float | None) -> SearchDeadline:
    """The request's one deadline, counted from its arrival (retrieval/arrival.py): every
    part of its search runs by it, and so does the page's preview."""
    scope = getattr(request, "scope", {})  # an ASGI request's; a WSGI one arrived now
    return SearchDeadline.planned(
        budget_policy(),
        caller_timeout_ms=caller_timeout_ms,
        arrived_at=scope.get(arrival.SCOPE_KEY),
    )


async def search(
    query: Query, deadline: SearchDeadline, on_lexical: LexicalWatcher | None = None
) -> Shown:
    """The public search, counted (the API's and the page's). Raises NoAnswerError /
    CallerDeadlineError; lets parent cancellation through."""
    metrics.STARTED.labels(query_class=query.query_class).inc()
    if deadline.stages.expired():
        # It waited in a queue for all the time its stages had: no answer can be on time,
        # so none is started, and the caller hears so now.
        _unavailable(query, [Reason.QUEUED_PAST_DEADLINE])
    try:
        shown = await answer(query, deadline, dependencies(), on_lexical=on_lexical)
    except asyncio.CancelledError:
        metrics.PARENT_CANCELLED.labels(cause="disconnect").inc()
        raise
    except CallerDeadlineError:
        metrics.PARENT_CANCELLED.labels(cause="caller_deadline").inc()
        raise
    except NoAnswerError as exc:
        _unavailable(query, exc.reasons, exc)
    _count(query, shown.outcome)
    return shown


def _unavailable(
    query: Query, reasons: list[Reason], cause: NoAnswerError | None = None
) -> NoReturn:
    metrics.UNAVAILABLE.labels(query_class=query.query_class).inc()
    for reason in reasons:
        metrics.REASONS.labels(reason=reason).inc()
    raise cause or NoAnswerError(reasons)


async def answer(
    query: Query,
    deadline: SearchDeadline,
    deps: Dependencies,
    audience: str = Audience.PUBLIC,
    on_lexical: LexicalWatcher | None = None,
) -> Shown:
    """The search and the page of listings of `audience` it shows, by the one deadline,
    with the outcome's total time set; counts nothing (the public views count around it,
    the evaluation API must not). Raises NoAnswerError / CallerDeadlineError."""
    outcome = await hybrid_search(query, deadline, deps, on_lexical)
    listings = await _hydrate(outcome, query, deadline, audience)
    outcome.timings.total_ms = deadline.elapsed_ms()
    more = len(listings) > query.k
    return Shown(outcome, listings[: query.k], query.page, query.page + 1 if more else None)


async def _hydrate(
    outcome: SearchOutcome, query: Query, deadline: SearchDeadline, audience: str
) -> list[ListingView]:
    """The page's listings and one more, read now, by what is left of the deadline (at
    least the reserve). A database that cannot answer by then is a 503, on time, not a
    late 200."""
    try:
        return await hydrate(
            outcome.ranking,
            query.text,
            query.k + 1,
            deadline.end,
            audience,
            query.filters,
            offset=(query.page - 1) * query.k,
        )
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


@dataclass(frozen=True)
class Described:
    """A listing's times, in its own zone, and its provenance, as people and machines read
    them: what the API's results and the page's listings both write."""

    zone: str  # IANA name
    start: str | None  # ISO 8601 with the offset
    end: str | None
    when: str  # "Sat 6 Dec, 19:30 GMT"
    provenance: str  # "from Barbican calendar · Time Out feed"


def described(view: ListingView, now: datetime) -> Described:
    site = site_zone()
    zone = listing_zone(view.timezone, site)
    return Described(
        zone.key,
        iso_local(view.starts_at, zone),
        iso_local(view.ends_at, zone),
        when_text(
            view.starts_at, view.ends_at, view.timezone, view.all_day, site_zone=site, now=now
        ),
        provenance_text([(source.name, source.kind) for source in view.sources]),
    )


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
        "results": [
            _listing_json(v, outcome.matched.get(v.id, set()), now) for v in shown.listings
        ],
    }


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
        shown = await search(query, deadline)
    except NoAnswerError as exc:
        return unavailable(list(exc.reasons), 503, "no search stage answered within the deadline")
    except CallerDeadlineError:
        return unavailable([], 504, "the caller's deadline passed before any stage answered")
    body = outcome_json(shown)
    if await _staff(request, deadline.end):
        body["timings_ms"] = timings_json(shown.outcome)
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
