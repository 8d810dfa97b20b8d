"""Search filters: from request parameters to a `SearchFilters`, and from that to the SQL
conditions every stage adds (lexical candidates, vector neighbours, the shown listings).

The SQL text depends only on the filter's *shape* (which conditions are present), never
on its values, which are bound parameters: there are few shapes, each text is built once
(`functools.cache`), and the default shape (upcoming, any venue, any kind) has no
parameters at all, so the lexical statements stay prepared on every connection."""

from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass
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

    @property
    def key(self) -> str:
        """The shape in a name's characters: one digit per condition."""
        return "".join("1" if value else "0" for value in astuple(self))


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
    where `needs_listing` is false (they hold copies of the listing's dates and
    occurrences). An undated listing has no current_until, so every date condition but
    the default's leaves it out.

    A series' own dates span its occurrences (ingestion/migrations/0016), so the
    conditions on them pass a superset; they are exact for a window open at one end, and
    its occurrences are read only where they are not: a window with both ends (a series
    may have dates either side of it and none inside), and `past`."""
    parts = []
    until = f"{table}.current_until"
    if of.not_ended:
        # Undated listings have no current_until: they never end.
        parts.append(
            f"({until} >= now() OR {until} IS NULL)" if of.undated else f"{until} >= now()"
        )
    if of.ended:
        parts.append(f"({until} < now() OR {_occurs(of, table)})")
    if of.ends_after:
        parts.append(f"{until} >= %(filter_from)s")
    if of.starts_before:
        parts.append(f"{table}.starts_at < %(filter_to)s")
        if of.ends_after or of.not_ended:
            parts.append(f"(cardinality({table}.occurrences) = 0 OR {_occurs(of, table)})")
    if of.venue:
        # The same function makes the listings' terms: the same words match.
        parts.append(f"{table}.venue_terms @> listing_venue_terms(%(filter_venue)s, '{{}}')")
    if of.kinds:
        parts.append(f"{table}.source_kinds && %(filter_kinds)s::varchar[]")
    return "".join(f" AND {part}" for part in parts)


def in_window(of: Shape, occurrence: str = "o") -> str:
    """The condition on one of a series' occurrences (a tstzrange [start, until]) that
    the filter's date window asks of a listing's start and current_until."""
    parts = []
    if of.ended:
        parts.append(f"upper({occurrence}) < now()")
    if of.ends_after:
        parts.append(f"upper({occurrence}) >= %(filter_from)s")
    elif of.not_ended:
        parts.append(f"upper({occurrence}) >= now()")
    if of.starts_before:
        parts.append(f"lower({occurrence}) < %(filter_to)s")
    return " AND ".join(parts) or "true"


def _occurs(of: Shape, table: str) -> str:
    window = in_window(of)
    return f"EXISTS (SELECT 1 FROM unnest({table}.occurrences) AS o WHERE {window})"  # noqa: S608  (constant text: the values are parameters)


def occurrence_order(of: Shape, occurrence: str = "o") -> str:
    """The order in which a series' occurrences in the window are shown, its first the
    one a result shows: from a lower bound, sooner first; in the past, the latest first;
    with no lower bound (`any`, a range given only its end), those not yet over sooner
    first, then those over, the latest first."""
    if of.ends_after or of.not_ended:
        return f"lower({occurrence})"
    if of.ended:
        return f"lower({occurrence}) DESC"
    over = f"upper({occurrence}) < now()"
    return f"{over}, CASE WHEN NOT {over} THEN lower({occurrence}) END, lower({occurrence}) DESC"


@cache
def next_start(of: Shape, table: str = "l") -> str:
    """A listing's start as readers order by it: the start of the series' occurrence a
    result shows (occurrence_order), a one-off's own start. Only a series reads its
    occurrences; a one-off's start costs nothing more."""
    start = f"{table}.starts_at"
    window, order = in_window(of), occurrence_order(of)
    occurrences = f"unnest({table}.occurrences) AS o WHERE {window}"
    shown = f"(SELECT lower(o) FROM {occurrences} ORDER BY {order} LIMIT 1)"  # noqa: S608  (constant text: the values are parameters)
    return (
        f"CASE WHEN cardinality({table}.occurrences) > 0 "
        f"THEN coalesce({shown}, {start}) ELSE {start} END"
    )


def needs_listing(of: Shape) -> bool:
    """Whether a condition reads more of the listing than the embeddings' copies of its
    dates."""
    return of.venue or of.kinds
