"""Search filters: from request parameters to a `SearchFilters`, and from that to the SQL
conditions every stage adds (lexical candidates, vector neighbours, the shown listings).

The SQL text depends only on the filter's *shape* (which conditions are present), never
on its values, which are bound parameters: there are few shapes, each text is built once
(`functools.cache`), and the default shape (upcoming, any venue, any kind) has no
parameters at all, so the lexical statements stay prepared on every connection."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from ingestion.models import Source
from ingestion.text import normalise
from retrieval.query.dates import parse_dates
from retrieval.query.parse import BadQueryError
from retrieval.types import DEFAULT_FILTERS, SearchFilters
from retrieval.web.api_types import MAX_VENUE_CHARS

KINDS = tuple(Source.Kind.values)


def site_zone() -> ZoneInfo:
    """The site's time zone (TIME_ZONE): where `today` and `this-weekend` are, and the
    zone of a listing whose source gave none."""
    return ZoneInfo(settings.TIME_ZONE)


def parse_filters(
    params: Mapping[str, str | None],
    kinds: Sequence[str],
    *,
    now: datetime | None = None,
    zone: ZoneInfo | None = None,
) -> SearchFilters:
    """The filters of a request: `when`, `from`, `to`, `venue` from `params` and every
    `kind` value given. BadQueryError names the parameter at fault."""
    dates = parse_dates(
        params.get("when"),
        params.get("from"),
        params.get("to"),
        now=now or timezone.now(),
        zone=zone or site_zone(),
    )
    raw_venue = params.get("venue") or ""
    if len(raw_venue) > MAX_VENUE_CHARS:
        raise BadQueryError(f"venue is longer than {MAX_VENUE_CHARS} characters", parameter="venue")
    venue = normalise(raw_venue)
    if raw_venue.strip() and not venue:
        raise BadQueryError("venue must contain letters or digits", parameter="venue")
    wanted = {kind.strip() for value in kinds for kind in value.split(",") if kind.strip()}
    unknown = wanted - set(KINDS)
    if unknown:
        raise BadQueryError(f"kind must be one of {', '.join(KINDS)}", parameter="kind")
    # Every kind is the same as no kind filter: one shape, one cache entry.
    chosen = () if wanted == set(KINDS) else tuple(sorted(wanted))
    return SearchFilters(dates=dates, venue=venue, kinds=chosen)


@dataclass(frozen=True)
class Shape:
    """Which conditions a filter has; the SQL text depends on nothing else."""

    ends_after: bool
    starts_before: bool
    not_ended: bool
    ended: bool
    undated: bool
    venue: bool
    kinds: bool


def shape(filters: SearchFilters) -> Shape:
    d = filters.dates
    return Shape(
        ends_after=d.ends_after is not None,
        starts_before=d.starts_before is not None,
        not_ended=d.not_ended,
        ended=d.ended,
        undated=d.undated,
        venue=bool(filters.venue),
        kinds=bool(filters.kinds),
    )


DEFAULT_SHAPE = shape(DEFAULT_FILTERS)


def parameters(filters: SearchFilters) -> dict[str, object]:
    """The bound values the shape's conditions name (none for the default)."""
    values: dict[str, object] = {}
    if filters.dates.ends_after is not None:
        values["filter_from"] = filters.dates.ends_after
    if filters.dates.starts_before is not None:
        values["filter_to"] = filters.dates.starts_before
    if filters.venue:
        values["filter_venue"] = filters.venue
    if filters.kinds:
        values["filter_kinds"] = list(filters.kinds)
    return values


@cache
def conditions(of: Shape, table: str = "l") -> str:
    """` AND ...` conditions on the listing alias `table`, or on the embeddings' alias
    where `needs_listing` is false (they hold copies of the listing's dates). An undated
    listing has no current_until, so every date condition but the default's leaves it
    out."""
    parts = []
    until = f"{table}.current_until"
    if of.not_ended:
        # Undated listings have no current_until: they never end.
        parts.append(
            f"({until} >= now() OR {until} IS NULL)" if of.undated else f"{until} >= now()"
        )
    if of.ended:
        parts.append(f"{until} < now()")
    if of.ends_after:
        parts.append(f"{until} >= %(filter_from)s")
    if of.starts_before:
        parts.append(f"{table}.starts_at < %(filter_to)s")
    if of.venue:
        # The same function makes the listings' terms: the same words match.
        parts.append(f"{table}.venue_terms @> listing_venue_terms(%(filter_venue)s, '{{}}')")
    if of.kinds:
        parts.append(f"{table}.source_kinds && %(filter_kinds)s::varchar[]")
    return "".join(f" AND {part}" for part in parts)


def needs_listing(of: Shape) -> bool:
    """Whether a condition reads more of the listing than the embeddings' copies of its
    dates."""
    return of.venue or of.kinds
