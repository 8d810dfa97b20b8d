"""Finding the canonical listings a batch of new source records describes.

The same concert arrives from a publisher feed and a venue calendar with different ids,
spellings and venue names. A dated draft joins an existing listing when the start times
agree within a tolerance, the titles match (normalised, trigram-similar or via an alias)
and the venues do not contradict each other. An undated draft joins one only on the same
normalised title (case, accents, punctuation and spacing folded by the SQL function behind
`Listing.normalised_title`), venues again not contradicting.

Invariants: a listing never absorbs a second record from the same source (the source
itself says those are different items), not even two drafts of one batch; and the answer
for a batch is the one applying its drafts one at a time would give. Each kind of draft
costs one statement for the whole batch, not one per draft.
"""

import functools
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection

from ingestion.drafts import ListingDraft
from ingestion.models import Source
from ingestion.text import normalise

# The first key of pg_advisory_xact_lock(int, int): our namespace for de-duplication locks.
_DEDUP_LOCK_SPACE = 7401
# Candidates read per draft, best title first.
_CANDIDATES_PER_DRAFT = 50

# A listing's title, venue and aliases are compared with every draft near its start time,
# and a draft's with every candidate: each text is folded once, not per comparison (the
# folding was an eighth of the ingesting process's time in a burst).
_fold = functools.lru_cache(maxsize=8192)(normalise)

# Every draft's candidates in one statement: `{arrays}` are the batch's columns, named
# `{columns}`, and `{match}` is what a listing must share with a draft to be a candidate.
# "Not already of this source" is `<> ALL`, a subquery per candidate on its listing id,
# not NOT EXISTS: Postgres turns NOT EXISTS into an anti join that read every record of
# the source once per draft, planned on a new source's or a grown one's stale statistics
# (a burst's later payloads: 440 ms for 250 drafts against 31 ms; `<> ALL` is never
# turned into a join).
_CANDIDATES = """
    SELECT d.n, c.id, c.title, c.venue, c.aliases, c.title_sim, c.venue_sim
    FROM unnest({arrays}) AS d({columns})
    CROSS JOIN LATERAL (
        SELECT l.id, l.title, l.venue, l.aliases,
               similarity(l.title, d.title) AS title_sim,
               similarity(l.venue, d.venue) AS venue_sim
        FROM ingestion_listing l
        WHERE l.status = 'active' AND l.audience = %(audience)s AND {match}
          AND %(source_id)s <> ALL (SELECT r.source_id FROM ingestion_sourcerecord r
                                    WHERE r.listing_id = l.id)
        ORDER BY title_sim DESC, l.id
        LIMIT {limit}
    ) AS c
    ORDER BY d.n, c.title_sim DESC, c.id
"""
_CANDIDATES_BY_TIME = _CANDIDATES.format(
    arrays="%(n)s::int[], %(title)s::text[], %(venue)s::text[], %(earliest)s::timestamptz[],"
    " %(latest)s::timestamptz[]",
    columns="n, title, venue, earliest, latest",
    match="l.starts_at BETWEEN d.earliest AND d.latest",
    limit=_CANDIDATES_PER_DRAFT,
)
# The partial index listing_undated_title holds exactly the rows this may match.
_CANDIDATES_UNDATED = _CANDIDATES.format(
    arrays="%(n)s::int[], %(title)s::text[], %(venue)s::text[]",
    columns="n, title, venue",
    match="l.starts_at IS NULL AND l.normalised_title = listing_normalised_title(d.title)"
    " AND l.normalised_title <> ''",
    limit=_CANDIDATES_PER_DRAFT,
)

# Taken in ascending order, one statement for the batch, so two lockers cannot deadlock.
_LOCK_SLOTS = """
    SELECT count(pg_advisory_xact_lock(%(space)s, slot.key))
    FROM (SELECT DISTINCT key FROM (
              SELECT unnest(%(days)s::int[]) AS key
              UNION ALL
              SELECT hashtext(listing_normalised_title(title)) FROM unnest(%(titles)s::text[])
                  AS titles(title)) AS keys
          ORDER BY key) AS slot
"""


def lock_slots(drafts: Sequence[ListingDraft]) -> None:
    """Serialise de-duplication of drafts that could match each other, so two workers
    ingesting the same event from two sources at once cannot both create a listing: a
    dated draft locks the days its start tolerance touches, an undated one its
    normalised title."""
    if not drafts:
        return
    tolerance = timedelta(minutes=settings.DEDUP_START_TOLERANCE_MIN)
    days: set[int] = set()
    titles: list[str] = []
    for draft in drafts:
        if draft.starts_at is None:
            titles.append(draft.title)
        else:
            first = (draft.starts_at - tolerance).toordinal()
            days.update(range(first, (draft.starts_at + tolerance).toordinal() + 1))
    with connection.cursor() as cursor:
        cursor.execute(
            _LOCK_SLOTS, {"space": _DEDUP_LOCK_SPACE, "days": sorted(days), "titles": titles}
        )


def find_duplicates(drafts: Sequence[ListingDraft], source: Source) -> list[int | None]:
    """For each draft, the id of a listing of another source that is the same event, of the
    source's own audience only (a judged collection's document never merges into a public
    listing), or None. Two drafts of the batch never get the same listing: the first takes
    it, as it would applied alone, and the second looks further among its candidates."""
    rows_by_draft: dict[int, list[tuple[Any, ...]]] = {n: [] for n in range(len(drafts))}
    for row in _candidates(drafts, source):
        rows_by_draft[row[0]].append(row)
    taken: set[int] = set()
    found: list[int | None] = []
    for n, draft in enumerate(drafts):
        match = next(
            (
                listing_id
                for _, listing_id, title, venue, aliases, title_sim, venue_sim in rows_by_draft[n]
                if listing_id not in taken
                and (draft.starts_at is None or _titles_match(draft, title, aliases, title_sim))
                and _venues_agree(draft.venue, venue, aliases, venue_sim)
            ),
            None,
        )
        if match is not None:
            taken.add(match)
        found.append(match)
    return found


def _candidates(drafts: Sequence[ListingDraft], source: Source) -> list[tuple[Any, ...]]:
    """(draft's position, listing id, title, venue, aliases, title similarity, venue
    similarity) rows: one statement for the dated drafts, one for the undated."""
    tolerance = timedelta(minutes=settings.DEDUP_START_TOLERANCE_MIN)
    dated = [(n, d) for n, d in enumerate(drafts) if d.starts_at is not None]
    undated = [(n, d) for n, d in enumerate(drafts) if d.starts_at is None]
    common = {"source_id": source.pk, "audience": source.audience}
    rows: list[tuple[Any, ...]] = []
    with connection.cursor() as cursor:
        for sql, group in ((_CANDIDATES_BY_TIME, dated), (_CANDIDATES_UNDATED, undated)):
            if not group:
                continue
            params: dict[str, Any] = common | {
                "n": [n for n, _ in group],
                "title": [d.title for _, d in group],
                "venue": [d.venue for _, d in group],
            }
            if group is dated:
                starts: list[datetime] = [d.starts_at for _, d in group if d.starts_at]
                params["earliest"] = [s - tolerance for s in starts]
                params["latest"] = [s + tolerance for s in starts]
            cursor.execute(sql, params)
            rows.extend(cursor.fetchall())
    return rows


def _titles_match(draft: ListingDraft, title: str, aliases: list[str], similarity: float) -> bool:
    """A dated draft's title rule; without a start time, a spelling variant alone is too
    weak a signal to merge on, so undated drafts match on the normalised title only."""
    wanted = _fold(draft.title)
    names = {_fold(title), *(_fold(alias) for alias in aliases)}
    if wanted in names or names & {_fold(alias) for alias in draft.aliases}:
        return True
    return similarity >= settings.DEDUP_TITLE_SIMILARITY


def _venues_agree(draft_venue: str, venue: str, aliases: list[str], similarity: float) -> bool:
    ours, theirs = _fold(draft_venue), _fold(venue)
    if not ours or not theirs or ours == theirs or ours in theirs or theirs in ours:
        return True
    if ours in {_fold(alias) for alias in aliases}:
        return True
    return similarity >= settings.DEDUP_VENUE_SIMILARITY
