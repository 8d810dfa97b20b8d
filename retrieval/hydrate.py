"""From ranked ids to what a response shows. Every response goes through here, so this is
where withdrawn or edited listings are kept from resurfacing: rows are re-read now,
whatever stage or cache the ids came from."""

import html
from dataclasses import dataclass
from datetime import datetime

from retrieval.pg import connection

_LISTINGS = """
SELECT l.id, l.title, l.venue, l.starts_at, l.url,
       ts_headline('english', coalesce(nullif(l.description, ''), l.title),
                   websearch_to_tsquery('english', %(text)s),
                   'MaxFragments=1, MaxWords=30, MinWords=12, StartSel=\ue000, StopSel=\ue001')
FROM ingestion_listing l
WHERE l.id = ANY(%(ids)s) AND l.status = 'active'
"""


@dataclass(frozen=True)
class ListingView:
    id: int
    title: str
    venue: str
    start: datetime | None
    url: str
    snippet: str  # HTML: the listing's text escaped, <mark> around the matched words


async def hydrate(ids: list[int], text: str, timeout_s: float) -> list[ListingView]:
    if not ids:
        return []
    async with connection(timeout_s) as conn:
        cursor = await conn.execute(_LISTINGS, {"ids": ids, "text": text})
        rows = {
            id_: ListingView(id_, title, venue, start, url, _marked(headline))
            for id_, title, venue, start, url, headline in await cursor.fetchall()
        }
    return [rows[i] for i in ids if i in rows]


def _marked(headline: str) -> str:
    # Postgres marks matches with private-use characters, so that escaping the listing's
    # own text (which may contain markup) cannot touch our <mark> tags.
    return html.escape(headline).replace("\ue000", "<mark>").replace("\ue001", "</mark>")
