"""Finding the canonical listing a new source record describes.

The same concert arrives from a publisher feed and a venue calendar with different ids,
spellings and venue names. A draft joins an existing listing when the start times agree
within a tolerance, the titles match (normalised, trigram-similar or via an alias) and the
venues do not contradict each other. A listing never absorbs a second record from the same
source: the source itself says those are different items.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from ingestion.drafts import ListingDraft
from ingestion.models import Listing, Source
from ingestion.text import normalise

# The first key of pg_advisory_xact_lock(int, int): our namespace for de-duplication locks.
_DEDUP_LOCK_SPACE = 7401

_CANDIDATES_BY_TIME = """
    SELECT l.id, l.title, l.venue, l.aliases,
           similarity(l.title, %(title)s) AS title_sim,
           similarity(l.venue, %(venue)s) AS venue_sim
    FROM ingestion_listing l
    WHERE l.status = 'active' AND l.audience = %(audience)s
      AND l.starts_at BETWEEN %(earliest)s AND %(latest)s
      AND NOT EXISTS (SELECT 1 FROM ingestion_sourcerecord r
                      WHERE r.listing_id = l.id AND r.source_id = %(source_id)s)
    ORDER BY title_sim DESC, l.id
    LIMIT 50
"""

_CANDIDATES_UNDATED = """
    SELECT l.id, l.title, l.venue, l.aliases,
           similarity(l.title, %(title)s) AS title_sim,
           similarity(l.venue, %(venue)s) AS venue_sim
    FROM ingestion_listing l
    WHERE l.status = 'active' AND l.audience = %(audience)s
      AND l.starts_at IS NULL AND l.title ILIKE %(title_pattern)s
      AND NOT EXISTS (SELECT 1 FROM ingestion_sourcerecord r
                      WHERE r.listing_id = l.id AND r.source_id = %(source_id)s)
    ORDER BY title_sim DESC, l.id
    LIMIT 50
"""


def lock_time_slot(draft: ListingDraft) -> None:
    """Serialise de-duplication of drafts that could match each other, so two workers
    ingesting the same event from two sources at once cannot both create a listing."""
    if draft.starts_at is None:
        keys = [hash_key(normalise(draft.title))]
    else:
        tolerance = timedelta(minutes=settings.DEDUP_START_TOLERANCE_MIN)
        first = (draft.starts_at - tolerance).toordinal()
        last = (draft.starts_at + tolerance).toordinal()
        keys = list(range(first, last + 1))
    with connection.cursor() as cursor:
        for key in sorted(keys):  # a fixed order, so two lockers cannot deadlock
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_DEDUP_LOCK_SPACE, key])


def hash_key(text: str) -> int:
    # A stable 31-bit key (Python's hash() is salted per process).
    value = 0
    for ch in text:
        value = (value * 31 + ord(ch)) & 0x7FFFFFFF
    return value


def find_duplicate(draft: ListingDraft, source: Source) -> Listing | None:
    """A listing of another source that is the same event, of the source's own audience
    only: a judged collection's document never merges into a public listing."""
    params: dict[str, str | int | datetime] = {
        "title": draft.title,
        "venue": draft.venue,
        "source_id": source.pk,
        "audience": source.audience,
    }
    if draft.starts_at is not None:
        tolerance = timedelta(minutes=settings.DEDUP_START_TOLERANCE_MIN)
        params |= {"earliest": draft.starts_at - tolerance, "latest": draft.starts_at + tolerance}
        sql = _CANDIDATES_BY_TIME
    else:
        # Undated drafts merge only on the same title (see _titles_match), so an exact,
        # case-insensitive match through the trigram index is enough, and far cheaper
        # than a similarity search.
        params["title_pattern"] = connection.ops.prep_for_like_query(draft.title)
        sql = _CANDIDATES_UNDATED
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    for listing_id, title, venue, aliases, title_sim, venue_sim in rows:
        if _titles_match(draft, title, aliases, title_sim, dated=draft.starts_at is not None) and (
            _venues_agree(draft.venue, venue, aliases, venue_sim)
        ):
            return Listing.objects.get(pk=listing_id)
    return None


def _titles_match(
    draft: ListingDraft, title: str, aliases: list[str], similarity: float, *, dated: bool
) -> bool:
    wanted = normalise(draft.title)
    names = {normalise(title), *(normalise(alias) for alias in aliases)}
    if wanted in names or names & {normalise(alias) for alias in draft.aliases}:
        return True
    # Without a start time, a spelling variant alone is too weak a signal to merge on.
    return dated and similarity >= settings.DEDUP_TITLE_SIMILARITY


def _venues_agree(draft_venue: str, venue: str, aliases: list[str], similarity: float) -> bool:
    ours, theirs = normalise(draft_venue), normalise(venue)
    if not ours or not theirs or ours == theirs or ours in theirs or theirs in ours:
        return True
    if ours in {normalise(alias) for alias in aliases}:
        return True
    return similarity >= settings.DEDUP_VENUE_SIMILARITY
