"""From ranked ids to what a response shows. Every response goes through here, so this is
where withdrawn or edited listings are kept from resurfacing: rows are re-read now,
whatever stage or cache the ids came from, and the search's filters are applied again, so
a cached ranking never shows an event that has ended since it was cached.

Invariant: the first `k` ids of the ranking from `offset` on that can be shown (active, of
the search's audience, passing its filters) are shown, in its order; a withdrawn one never
takes a slot, so a ranking longer than `k` still fills the page. It runs by the search's
deadline, with a server-side timeout like every other statement."""

import html
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from ingestion.models import Audience
from retrieval.bounds.deadline import Deadline
from retrieval.pg.pool import numbered, prepare_when_used
from retrieval.pg.statement import LISTINGS_TAG, fetch_with_local_settings
from retrieval.query.filters import (
    Shape,
    conditions,
    in_window,
    next_start,
    occurrence_order,
    parameters,
    shape,
)
from retrieval.types import DEFAULT_FILTERS, SearchFilters

# The headline and the provenance, the costly parts, are made for the shown rows only.
_LISTINGS = """
WITH shown AS (
    SELECT l.id, l.title, l.venue, l.starts_at, l.ends_at, l.timezone, l.all_day, l.url,
           l.description, l.occurrences, l.recurrence, {next_start} AS next_start,
           ranked.position
    FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS ranked(id, position)
    JOIN ingestion_listing l ON l.id = ranked.id
    WHERE l.status = 'active' AND l.audience = %(audience)s{filters}
    ORDER BY {order}
    OFFSET %(offset)s
    LIMIT %(k)s
)
SELECT id, title, venue, starts_at, ends_at, timezone, all_day, url, recurrence,
       -- A series' occurrences in the window, the one it shows first, and how many.
       (SELECT coalesce(json_agg(json_build_array(lower(d.o), upper(d.o)) ORDER BY d.n), '[]')
        FROM (SELECT o, row_number() OVER (ORDER BY {occurrences_order}) AS n
              FROM unnest(occurrences) AS o WHERE {in_window}
              ORDER BY n LIMIT {dates}) AS d),
       (SELECT count(*) FROM unnest(occurrences) AS o WHERE {in_window}),
       ts_headline('english', coalesce(nullif(description, ''), title),
                   websearch_to_tsquery('english', %(text)s),
                   'MaxFragments=1, MaxWords=30, MinWords=12, StartSel=\ue000, StopSel=\ue001'),
       -- The sources whose live records make up the listing, first seen first.
       (SELECT coalesce(json_agg(json_build_array(p.name, p.kind) ORDER BY p.seen, p.id), '[]')
        FROM (SELECT s.id, s.name, s.kind, min(r.first_seen_at) AS seen
              FROM ingestion_sourcerecord r JOIN ingestion_source s ON s.id = r.source_id
              WHERE r.listing_id = shown.id AND NOT r.withdrawn
              GROUP BY s.id) AS p)
FROM shown
ORDER BY {order}
"""
# By relevance, the ranking's order; by date, its listings by start (a series' next in the
# window), sooner first (undated last), then in the ranking's order.
_BY_RANK = "position"
_BY_DATE = "next_start NULLS LAST, position"
# A series' dates a result carries: a year of a weekly event; more are counted.
DATES_SHOWN = 60


@dataclass(frozen=True)
class Provenance:
    name: str  # the source's
    kind: str  # feed, calendar or editorial


@dataclass(frozen=True)
class ListingView:
    id: int
    title: str
    venue: str
    starts_at: datetime | None
    ends_at: datetime | None
    timezone: str  # the listing's own IANA zone, "" when its source gave none
    all_day: bool
    url: str
    snippet: str  # HTML: the listing's text escaped, <mark> around the matched words
    sources: tuple[Provenance, ...]
    # A series: its rule in words, or "" (as is a one-off's), its dates in the window
    # from the one shown (starts_at, ends_at) on, at most DATES_SHOWN of them, and how
    # many follow the shown one.
    recurrence: str = ""
    dates: tuple[tuple[datetime, datetime], ...] = ()
    more_dates: int = 0


_PARAMETERS = ("ids", "text", "k", "offset", "audience")


@cache
def _statement(of: Shape, by_date: bool) -> str:
    return _LISTINGS.format(
        filters=conditions(of),
        order=_BY_DATE if by_date else _BY_RANK,
        next_start=next_start(of),
        in_window=in_window(of),
        occurrences_order=occurrence_order(of),
        dates=DATES_SHOWN,
    )


@cache
def _prepared(of: Shape, by_date: bool, filters: tuple[str, ...]) -> tuple[str, str]:
    """The statement's name and EXECUTE text, prepared by a connection the first time it
    runs it: planning it was 0.25 ms of the 0.75 ms it took at 100,000 listings."""
    name = f"searchsite_listings_{of.key}{int(by_date)}"
    body, execute = numbered(name, _statement(of, by_date), _PARAMETERS + filters)
    prepare_when_used(name, body)
    return name, execute


async def hydrate(
    ids: list[int],
    text: str,
    k: int,
    deadline: Deadline,
    audience: str = Audience.PUBLIC,
    filters: SearchFilters = DEFAULT_FILTERS,
    offset: int = 0,
    *,
    by_date: bool = False,
) -> list[ListingView]:
    """The `k` showable listings of `ids` (active, of `audience`, passing `filters`) after
    the first `offset` of them, best first, or sooner first `by_date`. StageTimeoutError
    when the deadline passes first."""
    if not ids:
        return []
    of, bound = shape(filters), parameters(filters)
    rows = await fetch_with_local_settings(
        LISTINGS_TAG,
        _statement(of, by_date),
        {"ids": ids, "text": text, "k": k, "offset": offset, "audience": audience, **bound},
        deadline,
        # Its plan depends on no value: the ranking's ids are an array of unknown length.
        local={"plan_cache_mode": "force_generic_plan"},
        prepared=_prepared(of, by_date, tuple(sorted(bound))),
    )
    return [_view(*row) for row in rows]


def _view(
    id_: int,
    title: str,
    venue: str,
    starts_at: datetime | None,
    ends_at: datetime | None,
    zone: str,
    all_day: bool,
    url: str,
    recurrence: str,
    dates_json: list[list[str]],
    in_window: int,
    headline: str,
    sources: list[list[str]],
) -> ListingView:
    dates = tuple(
        (datetime.fromisoformat(start), datetime.fromisoformat(end)) for start, end in dates_json
    )
    if dates:  # a series shows its next date in the window
        starts_at, ends_at = dates[0]
    return ListingView(
        id_,
        title,
        venue,
        starts_at,
        ends_at,
        zone,
        all_day,
        url,
        _marked(headline),
        tuple(Provenance(name, kind) for name, kind in sources),
        recurrence=recurrence,
        dates=dates,
        more_dates=max(in_window - 1, 0),
    )


def _marked(headline: str) -> str:
    # Postgres marks matches with private-use characters, so that escaping the listing's
    # own text (which may contain markup) cannot touch our <mark> tags.
    return html.escape(headline).replace("\ue000", "<mark>").replace("\ue001", "</mark>")
