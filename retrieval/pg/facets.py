"""Counts on the filters (issue 33, item 3): for each choice a reader could add to a
search (a date bucket, a source kind, one of the top venues), how many results the
search would then give.

What a filtered search gives: the vector stage ranks every listing that passes the
filters and gives its `limit` nearest (retrieval/pg/vector.py); the lexical stage's
matches pass the same filters. So a filter that `n` listings pass gives all `n` when
`n <= limit`, and at least `limit` otherwise: a count is exact up to `limit` and "at
least `limit`" above it, whatever the words. That is why the counts do not depend on the
query text, and are kept a short while per filters (FACETS_TTL_S): most searches find
them counted already.

Each choice replaces the search's own choice of its kind and keeps the others (counts
for `when` keep the search's venue and kinds), as readers of faceted search expect. The
listings counted are those the vector stage ranks: the active generation's, through the
same conditions and indexes (`passing`); a listing not yet embedded is not counted.

One statement counts them all, each count stopping at `limit` + 1 rows, by a deadline of
its own, on a connection only if one is idle: a count never waits for a connection a
search needs, and never delays the results (retrieval/search.py).

At most one statement per filters is in flight in a process: the searches that find
none kept share it. One that fails (its deadline passed, most often) is not tried again
for RETRY_AFTER_S, and the searches meanwhile go without counts. Without these, a count
slower than its budget was never kept, so under load every search ran one of its own:
80 were cancelled in two minutes at 67 searches a second (2026-12-05, `6acff67`), each
holding a connection and up to 25 ms of Postgres, the load that made them slow
(docs/reliability.md, "Vector work beside searches")."""

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cache

from django.conf import settings

from resilience.single_flight import SingleFlight
from retrieval.bounds.deadline import Deadline
from retrieval.pg.statement import FACETS_TAG, fetch_with_local_settings
from retrieval.pg.suggestions import VIEW
from retrieval.pg.vector import passing
from retrieval.query.dates import parse_dates
from retrieval.query.filters import KINDS, Shape, parameters, shape, site_zone
from retrieval.types import SearchFilters

# The `when` values whose counts are given: three shortcuts and what follows them.
WHEN_BUCKETS = ("today", "this-weekend", "next-7-days", "later")
TOP_VENUES = 5
# Counted facets kept per process, by generation, filters and limit.
_KEPT = 512
# After a count failed, how long searches with those filters go without one: a count
# that missed its budget once is likely to again while the load lasts.
RETRY_AFTER_S = 5.0


_clock = time.monotonic  # when counts expire and failed ones may be tried again


class CountsRestingError(Exception):
    """The last count of these filters failed lately; none is tried before RETRY_AFTER_S."""


@dataclass(frozen=True)
class Count:
    value: str  # the filter's value: "today", "feed", a venue as its listings spell it
    count: int
    at_least: bool  # the filter gives `count` or more (count is the stages' limit)


@dataclass(frozen=True)
class Facets:
    when: tuple[Count, ...]
    kind: tuple[Count, ...]
    venue: tuple[Count, ...]


def _choices(filters: SearchFilters, now: datetime) -> list[SearchFilters]:
    """The filters of each date bucket, then of each kind, in the statement's order."""
    zone = site_zone()
    dated = [
        replace(filters, dates=parse_dates(bucket, None, None, now=now, zone=zone))
        for bucket in WHEN_BUCKETS
    ]
    return dated + [replace(filters, kinds=(kind,)) for kind in KINDS]


def _counted(sql: str, cap: int) -> str:
    return f"(SELECT count(*) FROM ({sql} LIMIT {cap}) AS counted)"  # noqa: S608  (constant text: the values are parameters)


def _renamed(sql: str, prefix: str) -> str:
    return sql.replace("%(filter_", f"%({prefix}_filter_")


@cache
def _statement(generation: int, shapes: tuple[Shape, ...], venue_shape: Shape, cap: int) -> str:
    counts = [
        _counted(_renamed(passing(generation, of), f"b{n}"), cap) for n, of in enumerate(shapes)
    ]
    # A top venue's count: its text is the venue filter, as a reader's link would send it.
    by_venue = _renamed(passing(generation, venue_shape), "v")
    by_venue = by_venue.replace("%(v_filter_venue)s", "top.text")
    top = (
        f"SELECT text, key, listings FROM {VIEW} WHERE kind = 'venue' AND until >= now()"  # noqa: S608  (constant text)
        f" ORDER BY listings DESC, key LIMIT {TOP_VENUES}"
    )
    pairs = f"json_build_array(top.text, {_counted(by_venue, cap)})"
    venues = f"(SELECT coalesce(json_agg({pairs} ORDER BY top.listings DESC, top.key), '[]') FROM ({top}) AS top)"  # noqa: S608, E501  (constant text)
    return f"SELECT {', '.join(counts)}, {venues}"


async def count(
    filters: SearchFilters, generation: int, limit: int, deadline: Deadline, now: datetime
) -> Facets:
    """The facets of a search with `filters` whose stages give `limit` candidates each:
    as counted in the last FACETS_TTL_S, or by the count in flight for them, or counted
    now by `deadline` (StageTimeoutError, or the pool's timeout, past it). Raises
    CountsRestingError for RETRY_AFTER_S after a count of them failed."""
    key = (generation, filters.key, limit)
    kept = _kept.get(key)
    clock = _clock()
    if kept is not None and kept[0] > clock:
        _kept.move_to_end(key)
        return kept[1]
    if key in _resting:
        if _resting[key] > clock:
            raise CountsRestingError
        del _resting[key]
    counting = _counting.run(lambda: _count(key, filters, deadline, now), "facets", key)
    # Shielded: a search that stops waiting leaves the count to the others.
    return await asyncio.shield(counting)


def _failed(key: tuple[int, str, int]) -> None:
    now = _clock()
    if len(_resting) >= _KEPT:  # filters that never came back
        for stale in [k for k, until in _resting.items() if until <= now]:
            del _resting[stale]
    _resting[key] = now + RETRY_AFTER_S


async def _count(
    key: tuple[int, str, int], filters: SearchFilters, deadline: Deadline, now: datetime
) -> Facets:
    generation, _, limit = key
    choices = _choices(filters, now)
    venue_filters = replace(filters, venue="-")  # only its shape is read
    cap = limit + 1
    params: dict[str, object] = {}
    for n, chosen in enumerate(choices):
        params |= {f"b{n}_{name}": value for name, value in parameters(chosen).items()}
    params |= {
        f"v_{name}": value for name, value in parameters(filters).items() if name != "filter_venue"
    }
    statement = _statement(generation, tuple(shape(c) for c in choices), shape(venue_filters), cap)
    wait_s = settings.SEARCH_FACETS_POOL_WAIT_MS / 1000
    try:
        (row,) = await fetch_with_local_settings(
            FACETS_TAG, statement, params, deadline, pool_wait_s=wait_s
        )
    except BaseException:  # cancelled too: the count did not come
        _failed(key)
        raise
    _resting.pop(key, None)
    dated, kinds, venues = row[: len(WHEN_BUCKETS)], row[len(WHEN_BUCKETS) : -1], row[-1]

    def counted(value: str, number: int) -> Count:
        return Count(value, min(number, limit), number > limit)

    facets = Facets(
        when=tuple(counted(b, n) for b, n in zip(WHEN_BUCKETS, dated, strict=True)),
        kind=tuple(counted(k, n) for k, n in zip(KINDS, kinds, strict=True)),
        venue=tuple(counted(text, n) for text, n in venues),
    )
    _kept[key] = (_clock() + settings.SEARCH_FACETS_TTL_S, facets)
    while len(_kept) > _KEPT:
        _kept.popitem(last=False)
    return facets


_kept: "OrderedDict[tuple[int, str, int], tuple[float, Facets]]" = OrderedDict()
# The count in flight per filters, and until when failed ones are not tried again.
_counting: SingleFlight[Facets] = SingleFlight()
_resting: dict[tuple[int, str, int], float] = {}


def forget() -> None:
    """Counts kept are forgotten (a test's database is not the last one's)."""
    _kept.clear()
    _counting.forget()
    _resting.clear()
