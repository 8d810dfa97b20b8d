"""The search, the use case: one query by one deadline, the page of listings it shows,
and how both are told to people. The public API and the page (retrieval/web/api.py,
retrieval/web/page.py) run it through `search`, which counts; the evaluation API through
`answer`, which does not, so that every answer is made one way."""

import asyncio
from dataclasses import dataclass, replace
from datetime import datetime
from typing import NoReturn

import psycopg
from django.conf import settings
from django.utils import timezone
from psycopg_pool import PoolTimeout

from ingestion.models import Audience
from resilience import awaiting
from retrieval import metrics
from retrieval.bounds.deadline import Deadline, SearchDeadline
from retrieval.hybrid import CANDIDATES_PER_RESULT, LexicalWatcher, hybrid_search
from retrieval.pg import facets
from retrieval.pg.facets import CountsRestingError, Facets
from retrieval.pg.hydrate import ListingView, hydrate
from retrieval.pg.replicas import replicas
from retrieval.pg.route import Route, routed
from retrieval.presentation import iso_local, listing_zone, provenance_text, when_text
from retrieval.protocols import Dependencies
from retrieval.query.filters import site_zone
from retrieval.service import dependencies
from retrieval.types import (
    CallerDeadlineError,
    NoAnswerError,
    Query,
    Reason,
    SearchOutcome,
    StageTimeoutError,
)


@dataclass(frozen=True)
class Shown:
    """A search's outcome and the page of listings it shows."""

    outcome: SearchOutcome
    listings: list[ListingView]
    page: int
    next_page: int | None  # None: the ranking holds no more showable listings
    facets: Facets | None = None  # the counts on the filters, when they were in time


async def search(
    query: Query,
    deadline: SearchDeadline,
    on_lexical: LexicalWatcher | None = None,
    *,
    min_lsn: int | None = None,
) -> Shown:
    """The public search, counted (the API's and the page's), with the counts on its
    filters if they are done by then; read from a replica where one is fresh enough
    (`min_lsn`: the reader's own last change, which it must have replayed), else from the
    primary. Raises NoAnswerError / CallerDeadlineError; lets parent cancellation through."""
    metrics.STARTED.labels(query_class=query.query_class).inc()
    if deadline.stages.expired():
        # It waited in a queue for all the time its stages had: no answer can be on time,
        # so none is started, and the caller hears so now.
        _unavailable(query, [Reason.QUEUED_PAST_DEADLINE])
    deps = dependencies()
    on = replicas().route(min_lsn)
    metrics.READS.labels(server=on.server.name).inc()
    with routed(on):
        counting = awaiting.start(_facets(query, deadline, deps), "facets")
        try:
            shown = await _answered(query, deadline, deps, on_lexical, on)
        except BaseException as exc:
            awaiting.cancel(counting)
            if isinstance(exc, NoAnswerError) and deadline.arm != "none":
                metrics.ARM_UNAVAILABLE.labels(arm=deadline.arm).inc()
            raise
    shown = _with_facets(shown, counting)
    shown.outcome.reasons.extend(on.reasons)
    _count(query, shown.outcome)
    if deadline.arm != "none":
        metrics.ARM_ANSWERS.labels(arm=deadline.arm, mode=shown.outcome.mode).inc()
        metrics.ARM_SECONDS.labels(arm=deadline.arm).observe(deadline.elapsed_ms() / 1000)
    return shown


async def _answered(
    query: Query,
    deadline: SearchDeadline,
    deps: Dependencies,
    on_lexical: LexicalWatcher | None,
    on: Route,
) -> Shown:
    try:
        return await answer(query, deadline, deps, on_lexical=on_lexical)
    except asyncio.CancelledError:
        metrics.PARENT_CANCELLED.labels(cause="disconnect").inc()
        raise
    except CallerDeadlineError:
        metrics.PARENT_CANCELLED.labels(cause="caller_deadline").inc()
        raise
    except NoAnswerError as exc:
        exc.reasons.extend(on.reasons)
        _unavailable(query, exc.reasons, exc)


async def _facets(query: Query, deadline: SearchDeadline, deps: Dependencies) -> Facets | None:
    """The counts on the filters, by a budget of their own within the search's deadline;
    None when there is no generation to count by."""
    clock = deadline.end.clock
    budget_s = settings.SEARCH_FACETS_BUDGET_MS / 1000
    budget = Deadline(min(deadline.end.at, clock() + budget_s), clock)
    generation = await deps.searchable_generation_id(budget)
    if generation is None:
        return None
    limit = query.k * CANDIDATES_PER_RESULT
    return await facets.count(query.filters, generation, limit, budget, timezone.now())


def _with_facets(shown: Shown, counting: "asyncio.Task[Facets | None]") -> Shown:
    """The results with the counts if they are done, else without them and why: the
    results never wait for them."""
    if not counting.done():
        # Behind the response, by their own budget: done then, they are kept for the
        # next search with these filters.
        awaiting.finish_behind(counting)
        return _without_facets(shown, Reason.FACETS_TIMEOUT)
    if counting.cancelled():
        return _without_facets(shown, Reason.FACETS_TIMEOUT)
    error = counting.exception()
    # Resting: the last count of these filters missed its budget a moment ago.
    if isinstance(error, StageTimeoutError | PoolTimeout | TimeoutError | CountsRestingError):
        return _without_facets(shown, Reason.FACETS_TIMEOUT)
    if isinstance(error, psycopg.Error | OSError):
        return _without_facets(shown, Reason.FACETS_ERROR)
    if error is not None:
        raise error
    counted = counting.result()
    if counted is None:
        return _without_facets(shown, Reason.FACETS_ERROR)
    metrics.FACETS.labels(outcome="counted").inc()
    return replace(shown, facets=counted)


def _without_facets(shown: Shown, reason: Reason) -> Shown:
    metrics.FACETS.labels(outcome="timeout" if reason == Reason.FACETS_TIMEOUT else "error").inc()
    shown.outcome.reasons.append(reason)
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
            by_date=query.sort == "date",
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
class Dated:
    """One date of a listing, in its own zone."""

    start: str | None  # ISO 8601 with the offset
    end: str | None
    when: str  # "Sat 6 Dec, 19:30 GMT"


@dataclass(frozen=True)
class Described:
    """A listing's times, in its own zone, and its provenance, as people and machines read
    them: what the API's results and the page's listings both write. A series' shown
    date is its next in the window; `later` are the ones after it that it carries."""

    zone: str  # IANA name
    start: str | None  # ISO 8601 with the offset
    end: str | None
    when: str  # "Sat 6 Dec, 19:30 GMT"
    provenance: str  # "from Barbican calendar · Time Out feed"
    later: tuple[Dated, ...] = ()


def described(view: ListingView, now: datetime) -> Described:
    site = site_zone()
    zone = listing_zone(view.timezone, site)

    def dated(starts_at: datetime | None, ends_at: datetime | None) -> Dated:
        words = when_text(starts_at, ends_at, view.timezone, view.all_day, site_zone=site, now=now)
        return Dated(iso_local(starts_at, zone), iso_local(ends_at, zone), words)

    shown = dated(view.starts_at, view.ends_at)
    return Described(
        zone.key,
        shown.start,
        shown.end,
        shown.when,
        provenance_text([(source.name, source.kind) for source in view.sources]),
        tuple(dated(start, end) for start, end in view.dates[1:]),
    )
