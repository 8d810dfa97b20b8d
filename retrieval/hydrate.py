"""From ranked ids to what a response shows. Every response goes through here, so this is
where withdrawn or edited listings are kept from resurfacing: rows are re-read now,
whatever stage or cache the ids came from.

Invariant: the first `k` ids of the ranking that can be shown (active, of the search's
audience) are shown, in its order; a withdrawn one never takes a slot, so a ranking longer
than `k` still fills the page. It runs by the search's deadline, with a server-side
timeout like every other statement."""

import html
from dataclasses import dataclass
from datetime import datetime

from ingestion.models import Audience
from retrieval.deadline import Deadline
from retrieval.pg import LISTINGS_TAG, fetch_with_local_settings

# The headline, the costly part, is made for the shown rows only.
_LISTINGS = """
WITH shown AS (
    SELECT l.id, l.title, l.venue, l.starts_at, l.url, l.description, ranked.position
    FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS ranked(id, position)
    JOIN ingestion_listing l ON l.id = ranked.id
    WHERE l.status = 'active' AND l.audience = %(audience)s
    ORDER BY ranked.position
    LIMIT %(k)s
)
SELECT id, title, venue, starts_at, url,
       ts_headline('english', coalesce(nullif(description, ''), title),
                   websearch_to_tsquery('english', %(text)s),
                   'MaxFragments=1, MaxWords=30, MinWords=12, StartSel=\ue000, StopSel=\ue001')
FROM shown
ORDER BY position
"""


@dataclass(frozen=True)
class ListingView:
    id: int
    title: str
    venue: str
    start: datetime | None
    url: str
    snippet: str  # HTML: the listing's text escaped, <mark> around the matched words


async def hydrate(
    ids: list[int],
    text: str,
    k: int,
    deadline: Deadline,
    audience: str = Audience.PUBLIC,
) -> list[ListingView]:
    """The first `k` showable listings of `ids` (active, of `audience`), best first.
    StageTimeoutError when the deadline passes first."""
    if not ids:
        return []
    rows = await fetch_with_local_settings(
        LISTINGS_TAG,
        _LISTINGS,
        {"ids": ids, "text": text, "k": k, "audience": audience},
        deadline,
    )
    return [
        ListingView(id_, title, venue, start, url, _marked(headline))
        for id_, title, venue, start, url, headline in rows
    ]


def _marked(headline: str) -> str:
    # Postgres marks matches with private-use characters, so that escaping the listing's
    # own text (which may contain markup) cannot touch our <mark> tags.
    return html.escape(headline).replace("\ue000", "<mark>").replace("\ue001", "</mark>")
