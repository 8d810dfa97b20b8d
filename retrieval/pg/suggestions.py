"""Suggestions as a visitor types: up to `limit` titles and venues of public listings that
can still be attended, read from a materialized view refreshed in the background
(retrieval/migrations/0008_suggestions.py), in one statement under a deadline of its own.

Two tiers, in one round trip. First the texts that have every word typed, the last one as
a prefix ("jazz cel" finds "Late jazz at the Cellar"), those that start with what was
typed first, then the most shared, then the shortest. Only when there are none, the same
with each word replaced by the spelling vocabulary's word most like it by trigrams
("orgn recital" finds "Organ recital"): a near miss beside texts that have what was typed
is noise. The vocabulary is a few thousand words where the texts are tens of thousands:
ranking every text by trigram distance to what was typed read 2,800 index pages and took
62 ms at 100,000 listings, correcting the words first a few pages.

The query is normalised in Postgres, as the texts were, and reaches the statement only as
a bound parameter: `to_tsquery` is given the words alone (letters and digits), so no
operator a visitor types can reach it.

Invariant: no text is suggested once the last of its listings has ended, as their dates
stood at the last refresh, however long ago that was. What changed since (a listing added,
withdrawn or moved) is suggested as it is now from the next refresh on (beat's, every
SEARCH_SUGGEST_REFRESH_S when a listing changed: retrieval/pg/views.py)."""

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from retrieval.bounds.deadline import Deadline
from retrieval.pg import views
from retrieval.pg.statement import SUGGEST_TAG, fetch_with_local_settings

VIEW = "retrieval_suggestion"
# The words of the same listings' titles and venues (retrieval/pg/vocabulary.py).
VOCABULARY = "retrieval_vocabulary"
# Fewer characters than this name too many texts to be worth a round trip.
MIN_CHARS = 2

# The words typed, in order: as typed (`typed`), and each as the vocabulary's word most
# like it (`corrected`, a word of its own when the vocabulary has none like it). `p` is the
# words joined, for "starts with what was typed".
_WORDS = """
    SELECT string_agg({word}, ' ' ORDER BY t.n) AS p,
           to_tsquery('simple', string_agg({word}, ' & ' ORDER BY t.n) || ':*') AS words
    FROM normalised, regexp_split_to_table(normalised.p, '[^[:alnum:]]+') WITH ORDINALITY AS t(w, n)
    {join}
    WHERE t.w <> ''
"""
_NEAREST_WORD = f"""
    LEFT JOIN LATERAL (
        SELECT v.word FROM {VOCABULARY} v
        WHERE v.word %% t.w
        ORDER BY similarity(v.word, t.w) DESC, v.word
        LIMIT 1
    ) AS nearest ON true
"""  # noqa: S608  (constant text)
# One tier: the texts that have every word, the last as a prefix; those that start with
# them first, then the most shared, then the shortest. Of the first CANDIDATES found,
# which the view's order makes the most shared: two letters typed match tens of thousands
# of texts, and ranking them all took 21 ms at 100,000 listings.
CANDIDATES = 200
_TIER = f"""
    SELECT found.text, found.kind
    FROM (SELECT s.text, s.kind, s.key, s.listings, w.p FROM {{words}} w, {VIEW} s
          WHERE s.words @@ w.words AND s.until >= %(now)s
          LIMIT {CANDIDATES}) AS found
    ORDER BY starts_with(found.key, found.p) DESC, found.listings DESC, length(found.key),
             found.key
    LIMIT %(limit)s
"""  # noqa: S608  (constant text)
_SUGGEST = f"""
WITH normalised AS (SELECT lower(immutable_unaccent(%(q)s)) AS p),
typed AS ({_WORDS.format(word="t.w", join="")}),
corrected AS ({_WORDS.format(word="coalesce(nearest.word, t.w)", join=_NEAREST_WORD)}),
as_typed AS ({_TIER.format(words="typed")})
SELECT text, kind FROM (
    SELECT text, kind FROM as_typed
    UNION ALL
    (SELECT text, kind FROM ({_TIER.format(words="corrected")}) AS near
     WHERE NOT EXISTS (SELECT FROM as_typed))
) AS found
LIMIT %(limit)s
"""  # noqa: S608  (constant text: the values are parameters)


@dataclass(frozen=True)
class Suggestion:
    text: str
    kind: str  # "title" or "venue"


async def suggest(
    typed: str, limit: int, deadline: Deadline, now: datetime | None = None
) -> list[Suggestion]:
    """Up to `limit` suggestions for `typed`, best first, of listings not all ended at
    `now`; none for fewer than MIN_CHARS letters or digits. StageTimeoutError when the
    deadline passes first."""
    if sum(char.isalnum() for char in typed) < MIN_CHARS:
        return []
    params = {"q": typed, "limit": limit, "now": now or timezone.now()}
    rows = await fetch_with_local_settings(SUGGEST_TAG, _SUGGEST, params, deadline)
    return [Suggestion(text, kind) for text, kind in rows]


def refresh() -> None:
    views.refresh((VIEW,))
