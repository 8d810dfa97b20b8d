"""Lexical retrieval in Postgres: weighted full-text search with a bounded candidate pool,
any-term matches ranked by their terms' rarity, and spelling correction against the
vocabulary of titles, venues and aliases.

Two tiers, best-matching first:

1. Listings matching every term (websearch_to_tsquery), as before: those whose *title*
   matches first (the likeliest answers), then matches anywhere, up to POOL in all, ranked
   with ts_rank (1.3 µs per row against ts_rank_cd's 3.2). The pool is one lazy
   `UNION ALL ... LIMIT`: when titles alone fill it, the whole-text index is never scanned,
   and each row is ranked where it is read, with no join back (together: p50 4.4 -> 2.6 ms,
   p99 17 -> 8.4 ms of server time at 100,000 listings).
2. Only when the first tier has fewer than a page (k) of listings, and the query has no phrase
   or negation of its own (retrieval.query.parse.requires_every_term): listings matching *some*
   terms. Requiring every term found nothing for natural-language questions (recall@10
   0.018 on the Cranfield dev queries, against 0.385 for BM25). Candidates are read per
   term, rarest first and at most PER_TERM each, and scored BM25-style: the sum over the
   query's terms of idf(term) x ts_rank(term) (ts_rank of one term is a saturating
   function of its occurrences, like BM25's tf part; no length normalisation), with idf from
   `retrieval_term_statistics` (document frequencies per audience, refreshed in the
   background). A term too new to have statistics counts as rare. Measured choices:
   docs/quality.md.

Short listing queries whose terms all match a page of listings never reach the second
tier: their ranking, and their cost, are what they were. A server-side statement_timeout
is the backstop if a plan ever goes wrong.

Invariant: only active listings of the index's audience (ingestion.models.Audience): a
judged collection's documents are never a public search's candidates, nor its spelling
corrections (the vocabulary is of public listings only), nor in its term statistics.
"""

from functools import cache

from ingestion.models import Audience
from retrieval.bounds.deadline import Deadline
from retrieval.pg.pool import prepare_on_connect
from retrieval.pg.statement import LEXICAL_TAG, fetch_with_local_settings
from retrieval.query.filters import (
    DEFAULT_SHAPE,
    Shape,
    conditions,
    next_start,
    parameters,
    shape,
)
from retrieval.query.parse import requires_every_term
from retrieval.types import Candidate, LexicalResult, Query

POOL = 1000
# The any-term tier: the rarest MAX_TERMS terms of a query (16 against 8 was recall@10
# 0.411 against 0.404 on Cranfield dev), each contributing at most PER_TERM candidates.
MAX_TERMS = 16
PER_TERM = 250
# Only terms in at most this share of the listings, or in no more than PER_TERM (a short
# index lookup), and always the rarest, are read for candidates: a term in most listings
# ("london" in London's) cost 3.8 ms to look up in the index, and cannot lift a listing
# that lacks every rarer term into the top k anyway; it still counts in the scores. On
# Cranfield dev, 0.2 keeps recall@10 at 0.409 (0.1: 0.398, 0.05: 0.377); at 100,000
# listings the queries that reach this tier take p50 4.0 ms and p99 10.9 ms with it,
# against p99 19.9 ms reading every term.
GENERATOR_SHARE = 0.2
# ts_rank's weights for labels D, C, B, A (description is C, venue and aliases B, title A)
# and no length normalisation, chosen on the Cranfield, CISI and CACM dev queries
# (docs/quality.md): dividing by 1 + log(length) gained Cranfield 0.013 of recall@10 and
# cost CACM 0.133 (its title-only records rose above the abstracts that answer).
ANY_TERM_WEIGHTS = "{0.1,0.4,0.4,1.0}"
ANY_TERM_NORMALISATION = 0

_SEARCH = """
WITH q AS (SELECT {tsquery} AS tsq),
pool AS (
    (SELECT l.id, ts_rank(l.search_vector, q.tsq) AS score, {next_start} AS starts_at
     FROM ingestion_listing l, q
     WHERE l.title_vector @@ q.tsq AND l.status = 'active' AND l.audience = %(audience)s{filters}
     LIMIT %(pool)s)
    UNION ALL
    (SELECT l.id, ts_rank(l.search_vector, q.tsq), {next_start} FROM ingestion_listing l, q
     WHERE l.search_vector @@ q.tsq AND NOT l.title_vector @@ q.tsq
       AND l.status = 'active' AND l.audience = %(audience)s{filters}
     LIMIT %(pool)s)
    LIMIT %(pool)s
),
every_term AS MATERIALIZED (
    SELECT id, score, starts_at FROM pool
    ORDER BY score DESC, starts_at NULLS LAST, id
    LIMIT %(limit)s
),
terms AS MATERIALIZED (
    SELECT t.lexeme::tsquery AS tsq,
           ln(1 + (coalesce(s.documents, 1) - coalesce(s.documents_with_term, 1) + 0.5)
                  / (coalesce(s.documents_with_term, 1) + 0.5)) AS idf,
           coalesce(s.documents_with_term
                        <= greatest({generator_share} * s.documents, {per_term}), true)
               AS generates
    FROM (SELECT DISTINCT word, quote_literal(word) AS lexeme
          FROM unnest(tsvector_to_array(to_tsvector('english', %(text)s))) AS word) AS t
    LEFT JOIN retrieval_term_statistics s ON s.audience = %(audience)s AND s.lexeme = t.word
    ORDER BY idf DESC, t.word
    LIMIT {max_terms}
),
candidates AS (
    -- Each candidate's vector comes with it: reading it again by id was 731 index scans.
    SELECT DISTINCT ON (found.id) found.id, found.search_vector, found.starts_at
    FROM (SELECT tsq FROM terms WHERE generates
          UNION ALL (SELECT tsq FROM terms ORDER BY idf DESC LIMIT 1)) AS t
    CROSS JOIN LATERAL (
        SELECT l.id, l.search_vector, {next_start} AS starts_at FROM ingestion_listing l
        WHERE l.search_vector @@ t.tsq
          AND l.status = 'active' AND l.audience = %(audience)s{filters}
        LIMIT {per_term}) AS found
    -- One-time filter: with a full first tier, no term's index is read at all.
    WHERE (SELECT count(*) FROM every_term) < %(relax_below)s
    ORDER BY found.id
),
some_terms AS (
    SELECT c.id, (SELECT sum(t.idf * ts_rank('{weights}', c.search_vector, t.tsq,
                                             {normalisation}))
                  FROM terms t) AS score, c.starts_at
    FROM candidates c
    WHERE NOT EXISTS (SELECT 1 FROM every_term e WHERE e.id = c.id)
    ORDER BY score DESC, c.starts_at NULLS LAST, c.id
    LIMIT %(limit)s
)
-- Among equal scores the sooner event first (a series by its next date, undated last),
-- then the smaller id.
SELECT id, score FROM (
    SELECT id, score, starts_at, 1 AS tier FROM every_term
    UNION ALL
    SELECT id, score, starts_at, 2 FROM some_terms
) AS ranked
ORDER BY tier, score DESC, starts_at NULLS LAST, id
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
    placeholders = ("%(text)s", "%(pool)s", "%(limit)s", "%(audience)s", "%(relax_below)s")
    for position, placeholder in enumerate(placeholders, start=1):
        body = body.replace(placeholder, f"${position}")
    prepare_on_connect(name, "(text, int, int, text, int)", body)
    return name, f"EXECUTE {name}({', '.join(placeholders)})"


def statements(
    weights: str = ANY_TERM_WEIGHTS,
    normalisation: int = ANY_TERM_NORMALISATION,
    of: Shape = DEFAULT_SHAPE,
) -> dict[str, str]:
    """The search statement for each tsquery form and the filter shape `of`, with the
    any-term tier's ts_rank settings (other values only for bench/quality.py to compare)."""
    return {
        tsquery: _SEARCH.format(
            tsquery=tsquery,
            max_terms=MAX_TERMS,
            per_term=PER_TERM,
            generator_share=GENERATOR_SHARE,
            weights=weights,
            normalisation=normalisation,
            filters=conditions(of),
            next_start=next_start(of),
        )
        for tsquery in (_WEBSEARCH, _ANY_OF)
    }


_statements = cache(statements)
# Only the default shape is prepared on every connection: it is nearly every search, and
# it binds no filter values; another shape's text is sent, and planned, each time.
_PREPARED = {
    tsquery: _prepare(n, statement) for n, (tsquery, statement) in enumerate(_statements().items())
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
    def __init__(self, audience: str = Audience.PUBLIC) -> None:
        self.audience = audience

    async def search(self, query: Query, limit: int, deadline: Deadline) -> LexicalResult:
        # Up to three statements share the one deadline: a correction runs on what the
        # first search left, never on a budget of its own.
        # Partial matches are read only while every-term ones fill less than a page
        # (k), and never for a phrase or a negation (what the query's syntax asks for).
        relax_below = 0 if requires_every_term(query.text) else min(query.k, limit)
        found = await self._search(_WEBSEARCH, query, query.text, limit, deadline, relax_below)
        # "Did you mean": only a query that finds nothing pays for spelling correction;
        # near misses among partial matches are the vector stage's to find.
        if found or not query.normalised:
            return LexicalResult(found)
        terms = query.normalised.split()
        corrections = await _corrections(terms, deadline)
        if not corrections:
            return LexicalResult(found)
        # Any corrected word is enough already: nothing to relax. Each is quoted as one
        # tsquery lexeme, so nothing in it can act as an operator.
        quoted = ["'" + word.replace("'", "''") + "'" for word in corrections.values()]
        found = await self._search(_ANY_OF, query, " | ".join(quoted), limit, deadline, 0)
        # The query as typed, each misspelt word replaced: what the user is offered.
        suggestion = " ".join(corrections.get(term, term) for term in terms)
        return LexicalResult(found, suggestion if found else None)

    async def _search(
        self,
        tsquery: str,
        query: Query,
        text: str,
        limit: int,
        deadline: Deadline,
        relax_below: int,
    ) -> list[Candidate]:
        of = shape(query.filters)
        rows = await fetch_with_local_settings(
            LEXICAL_TAG,
            _statements(of=of)[tsquery],
            {
                "text": text,
                "pool": POOL,
                "limit": limit,
                "audience": self.audience,
                "relax_below": relax_below,
                **parameters(query.filters),
            },
            deadline,
            # The statement's plan shape never depends on the text, but with the any-term
            # tier Postgres judged a generic plan dearer than a custom one and planned
            # every execution again (0.46 ms of a 2.7 ms median at 100,000 listings).
            local={"plan_cache_mode": "force_generic_plan"},
            prepared=_PREPARED[tsquery] if of == DEFAULT_SHAPE else None,
        )
        return [Candidate(int(row[0]), float(row[1])) for row in rows]


async def _corrections(terms: list[str], deadline: Deadline) -> dict[str, str]:
    """Vocabulary words for misspelt terms, by term (0.2 ms a word, against 53 ms for
    trigram similarity over whole titles)."""
    terms = [t for t in terms if len(t) >= 3][:8]
    if not terms:
        return {}
    rows = await fetch_with_local_settings(
        LEXICAL_TAG,
        _CORRECTIONS,
        {"terms": terms},
        deadline,
    )
    return {str(term): str(word) for term, word in rows}
