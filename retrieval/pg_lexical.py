"""Lexical retrieval in Postgres: weighted full-text search with a bounded candidate pool,
and spelling correction against the vocabulary of titles, venues and aliases.

Bounded work: ranking every match of a common term was the tail (74 ms p99 at 100,000
listings). The pool ranked here is deliberate, not arbitrary: listings whose *title*
matches come first (the likeliest answers), then matches anywhere, up to POOL in all,
ranked with ts_rank (1.3 µs per row against ts_rank_cd's 3.2). The pool is one lazy
`UNION ALL ... LIMIT`: when titles alone fill it, the whole-text index is never scanned,
and each row is ranked where it is read, with no join back (together: p50 4.4 -> 2.6 ms,
p99 17 -> 8.4 ms of server time at 100,000 listings). A server-side statement_timeout is
the backstop if the plan ever goes wrong.

Invariant: only active, public listings (ingestion.models.Audience): a judged collection's
documents are never a public search's candidates, nor its spelling corrections (the
vocabulary is of public listings only).
"""

from retrieval.deadline import Deadline
from retrieval.pg import LEXICAL_TAG, fetch_with_local_settings, prepare_on_connect
from retrieval.types import Candidate, Query

POOL = 1000

_SEARCH = """
WITH q AS (SELECT {tsquery} AS tsq),
pool AS (
    (SELECT l.id, ts_rank(l.search_vector, q.tsq) AS score FROM ingestion_listing l, q
     WHERE l.title_vector @@ q.tsq AND l.status = 'active' AND l.audience = 'public'
     LIMIT %(pool)s)
    UNION ALL
    (SELECT l.id, ts_rank(l.search_vector, q.tsq) FROM ingestion_listing l, q
     WHERE l.search_vector @@ q.tsq AND NOT l.title_vector @@ q.tsq
       AND l.status = 'active' AND l.audience = 'public'
     LIMIT %(pool)s)
    LIMIT %(pool)s
)
SELECT id, score FROM pool
ORDER BY score DESC, id
LIMIT %(limit)s
"""

_WEBSEARCH = "websearch_to_tsquery('english', %(text)s)"
# Corrected words may each be wrong; any of them matching is enough.
_ANY_OF = "to_tsquery('english', %(text)s)"


def _prepare(number: int, statement: str) -> tuple[str, str]:
    """Have every pooled connection prepare `statement`; its name and the EXECUTE text
    that stands in for it."""
    name = f"searchsite_lexical_{number}"
    body = statement
    for position, placeholder in enumerate(("%(text)s", "%(pool)s", "%(limit)s"), start=1):
        body = body.replace(placeholder, f"${position}")
    prepare_on_connect(name, "(text, int, int)", body)
    return name, f"EXECUTE {name}(%(text)s, %(pool)s, %(limit)s)"


_STATEMENTS = {tsquery: _SEARCH.format(tsquery=tsquery) for tsquery in (_WEBSEARCH, _ANY_OF)}
_PREPARED = {
    tsquery: _prepare(n, statement) for n, (tsquery, statement) in enumerate(_STATEMENTS.items())
}

_CORRECTIONS = """
SELECT t.term, best.word
FROM unnest(%(terms)s::text[]) AS t(term)
CROSS JOIN LATERAL (
    SELECT v.word FROM retrieval_vocabulary v
    WHERE v.word %% t.term
    ORDER BY similarity(v.word, t.term) DESC, v.word
    LIMIT 1
) AS best
WHERE best.word <> t.term
"""


class PgLexicalIndex:
    async def search(self, query: Query, limit: int, deadline: Deadline) -> list[Candidate]:
        # Up to three statements share the one deadline: a correction runs on what the
        # first search left, never on a budget of its own.
        found = await _search(_WEBSEARCH, query.text, limit, deadline)
        # "Did you mean": only a query that finds nothing pays for spelling correction;
        # near misses among partial matches are the vector stage's to find.
        if found or not query.normalised:
            return found
        corrected = await _corrections(query.normalised.split(), deadline)
        if not corrected:
            return found
        return await _search(_ANY_OF, " | ".join(corrected), limit, deadline)


async def _search(tsquery: str, text: str, limit: int, deadline: Deadline) -> list[Candidate]:
    rows = await fetch_with_local_settings(
        LEXICAL_TAG,
        _STATEMENTS[tsquery],
        {"text": text, "pool": POOL, "limit": limit},
        deadline,
        prepared=_PREPARED[tsquery],
    )
    return [Candidate(int(row[0]), float(row[1])) for row in rows]


async def _corrections(terms: list[str], deadline: Deadline) -> list[str]:
    """Vocabulary words for misspelt terms (0.2 ms a word, against 53 ms for trigram
    similarity over whole titles)."""
    terms = [t for t in terms if len(t) >= 3][:8]
    if not terms:
        return []
    rows = await fetch_with_local_settings(
        LEXICAL_TAG,
        _CORRECTIONS,
        {"terms": terms},
        deadline,
    )
    # Each corrected word is quoted as one tsquery lexeme source, so nothing in it can act
    # as an operator.
    return ["'" + str(word).replace("'", "''") + "'" for _, word in rows]
