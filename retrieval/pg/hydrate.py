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
from retrieval.pg.statement import LISTINGS_TAG, fetch_with_local_settings
from retrieval.query.filters import Shape, conditions, parameters, shape
from retrieval.types import DEFAULT_FILTERS, SearchFilters

# The headline and the provenance, the costly parts, are made for the shown rows only.
_LISTINGS = """
WITH shown AS (
    SELECT l.id, l.title, l.venue, l.starts_at, l.ends_at, l.timezone, l.all_day, l.url,
           l.description, ranked.position
    FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS ranked(id, position)
    JOIN ingestion_listing l ON l.id = ranked.id
    WHERE l.status = 'active' AND l.audience = %(audience)s{filters}
    ORDER BY {order}
    OFFSET %(offset)s
    LIMIT %(k)s
)
SELECT id, title, venue, starts_at, ends_at, timezone, all_day, url,
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
# By relevance, the ranking's order; by date, its listings by start, sooner first (undated
# last), then in the ranking's order.
_BY_RANK = "position"
_BY_DATE = "starts_at NULLS LAST, position"


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


@cache
def _statement(of: Shape, by_date: bool) -> str:
    return _LISTINGS.format(filters=conditions(of), order=_BY_DATE if by_date else _BY_RANK)


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
    rows = await fetch_with_local_settings(
        LISTINGS_TAG,
        _statement(shape(filters), by_date),
        {
            "ids": ids,
            "text": text,
            "k": k,
            "offset": offset,
            "audience": audience,
            **parameters(filters),
        },
        deadline,
    )
    return [
        ListingView(
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
        )
        for id_, title, venue, starts_at, ends_at, zone, all_day, url, headline, sources in rows
    ]


def _marked(headline: str) -> str:
    # Postgres marks matches with private-use characters, so that escaping the listing's
    # own text (which may contain markup) cannot touch our <mark> tags.
    return html.escape(headline).replace("\ue000", "<mark>").replace("\ue001", "</mark>")
