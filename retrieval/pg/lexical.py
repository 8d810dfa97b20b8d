"""Lexical retrieval in Postgres: BM25 over a bounded candidate pool from the GIN
indexes, and spelling correction against the vocabulary of titles, venues and aliases.

Candidates, read only through indexes (never the table in full):

1. Listings matching the query as typed (websearch_to_tsquery: every term, phrases and
   negations as written): those whose *title* matches first (the likeliest answers), then
   matches anywhere, up to POOL in all, as one lazy `UNION ALL ... LIMIT`: when titles
   alone fill it, the whole-text index is never scanned. The title matches are the first
   in order of their rows, read from the titles' own index where the terms are common
   enough for that to cost less than the GIN index's whole list of them (SEQUENTIAL_COST).
2. Only when those are fewer than a page (k), and the query has no phrase or negation of
   its own (retrieval.query.parse.requires_every_term): listings matching *some* terms,
   read per term, rarest first and at most PER_TERM each. Requiring every term found
   nothing for natural-language questions (recall@10 0.018 on the Cranfield dev queries).

Every candidate is scored by BM25 (Robertson and Zaragoza, "The Probabilistic Relevance
Framework", 2009), one ranking for both kinds: the sum over the query's rarest MAX_TERMS
terms of idf(term) x tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl)). Fields weigh as in
BM25F's simple form: a term's frequency tf counts each occurrence by its label's weight
(title, venue and aliases, description: `Ranking`), which is what ts_rank_cd of a
one-lexeme query with normalisation 0 computes from the vector's positions; the document
length dl counts the listing's stored lengths per label (ingestion_listing.search_lengths)
by the same weights, avgdl their average over the audience. idf and avgdl come from
per-audience statistics refreshed in the background (retrieval/pg/vocabulary.py); a term
too new to have statistics counts as the rarest. Measured choices: docs/quality.md.

A server-side statement_timeout is the backstop if a plan ever goes wrong.

Invariant: only active listings of the index's audience (ingestion.models.Audience): a
judged collection's documents are never a public search's candidates, nor its spelling
corrections (the vocabulary is of public listings only), nor in its statistics.
"""

from dataclasses import dataclass
from functools import cache

from ingestion.models import Audience
from retrieval.bounds.deadline import Deadline
from retrieval.pg.pool import numbered, prepare_on_connect, prepare_when_used
from retrieval.pg.statement import LEXICAL_TAG, fetch_with_local_settings
from retrieval.query.filters import (
    DEFAULT_SHAPE,
    Shape,
    conditions,
    next_start,
    parameters,
    shape,
)
from retrieval.query.parse import excluded, relaxable, requires_every_term
from retrieval.types import Candidate, LexicalResult, Query

# Full matches scored, at most. 1,000 before BM25; scoring each costs about 1 µs more
# than ts_rank did (ts_rank_cd per term, the length factor), and at 1,000 the stage's p50
# at 100,000 listings went 1.43 -> 2.26 ms, at 500 1.63 ms, p99 7.8 -> 7.9 ms. No judged
# collection fills either (their nDCG@10 is the same).
POOL = 500
# A query's terms scored, at most (a 250-character question has about 40); 16 against
# 64 was nDCG@10 0.368 against 0.415 on CISI dev, 0.507 against 0.535 on CACM's.
MAX_TERMS = 64
# Partial matches: read for the rarest GENERATORS terms, each contributing at most
# PER_TERM candidates (16 against 32 was nDCG@10 0.407 against 0.413 on CISI dev, 0.515
# against 0.535 on CACM's; 64 as 32 but for CISI's 0.415).
GENERATORS = 32
PER_TERM = 250
# Only terms in at most this share of the listings, or in no more than PER_TERM (a short
# index lookup), and always the rarest, are read for candidates: a term in most listings
# ("london" in London's) cost 3.8 ms to look up in the index, and cannot lift a listing
# that lacks every rarer term into the top k anyway; it still counts in the scores. On
# Cranfield dev, 0.2 kept recall@10 at 0.409 (0.1: 0.398, 0.05: 0.377).
GENERATOR_SHARE = 0.2
# A query whose terms are in a large share s of the titles ("drop-in", "tour") fills its
# pool of title matches after reading about POOL / s titles in order, where the GIN index
# reads every match first: 485,000 entries, 74 ms, for "drop" at 1,000,000 listings. The
# titles are read from their own index (listing_active_titles: each active listing's id
# and title terms, in the order of the ids), not from the table, whose rows the read had
# to walk past their descriptions to reach the title's terms: "drop open house" read its
# 18,000 rows in 15 ms, its index entries in 5. The titles are read in order when POOL / s
# x SEQUENTIAL_COST is less than the entries the GIN index would read, s the terms' shares
# of titles multiplied (the term statistics count titles too). The GIN index skips through
# the commoner terms' entries to the rarer's: it reads about the rarest term's entries
# times the terms (measured: "church drop" as 244,000, "architecture tour" as 64,000
# entries of a single term). SEQUENTIAL_COST was the table's row against a GIN entry (1 µs
# against 90 ns); a title entry and its match cost 0.25 µs, which would make it 3, but at
# 3 the stage's p50 at 1,000,000 listings was 5.8 ms against 3.8-4.4 ms at 6, 11 and 20
# (terms that appear together less often than apart are then read in order before the
# index reads them anyway): 11 is kept. Either way the pool is the first matches in order
# of their rows: the ids' order, which is the table's for rows never moved since added.
# Reading stops after READ_FACTOR times the titles expected (terms that appear together
# less often than apart, a filter that passes few, statistics out of date), and then the
# GIN index reads the pool.
SEQUENTIAL_COST = 11
READ_FACTOR = 4


@dataclass(frozen=True)
class Ranking:
    """BM25's parameters and the fields' weights; other values only for bench/quality.py
    to compare."""

    # Chosen on the dev queries (docs/quality.md): of k1 0.6-2.0 and b 0.2-0.75, the best
    # mean nDCG@10 at or above plain BM25 on each collection.
    k1: float = 0.9
    b: float = 0.3
    # Title, venue and aliases, description.
    title: float = 1.0
    venue: float = 0.4
    description: float = 0.4
    # Whether listings matching the query as typed all come before partial matches.
    every_term_first: bool = False


RANKING = Ranking()

_SEARCH = """
WITH q AS (SELECT {tsquery} AS tsq,
                  websearch_to_tsquery('english', %(excluded)s) AS excluded),
corpus AS MATERIALIZED (
    SELECT coalesce(max(c.documents), 0) AS documents,
           -- BM25's avgdl; above 0 even for an audience whose listings have no words.
           greatest(coalesce(max({average_length}), 1), 0.001) AS avgdl
    FROM retrieval_corpus_statistics c WHERE c.audience = %(audience)s
),
terms AS MATERIALIZED (
    -- A term repeated in the query counts as often as it is repeated (as in Lucene):
    -- long questions repeat what they are about (CISI nDCG@10 0.313 -> 0.365).
    SELECT t.word, t.lexeme::tsquery AS tsq, i.idf, coalesce(s.titles_with_term, 0) AS titles,
           t.repeats * i.idf * ({k1}::float8 + 1) AS weight,
           f.df <= greatest({generator_share} * corpus.documents, {per_term}) AS generates
    FROM (SELECT u.lexeme AS word, quote_literal(u.lexeme) AS lexeme,
                 coalesce(cardinality(u.positions), 1) AS repeats
          FROM unnest(to_tsvector('english', %(text)s)) AS u) AS t
    CROSS JOIN corpus
    LEFT JOIN retrieval_term_statistics s ON s.audience = %(audience)s AND s.lexeme = t.word
    CROSS JOIN LATERAL (SELECT coalesce(s.documents_with_term, 0) AS df) AS f
    CROSS JOIN LATERAL (
        SELECT ln(1 + (greatest(corpus.documents, f.df) - f.df + 0.5) / (f.df + 0.5))::float8
                   AS idf
    ) AS i
    ORDER BY i.idf DESC, t.word
    LIMIT {max_terms}
),
common AS MATERIALIZED (
    -- The share of titles expected to match every term (as if independent), and
    -- whether reading the table in order finds a pool of them for less than the index
    -- would cost: see SEQUENTIAL_COST.
    -- Divided by the share only where it is large enough to be chosen.
    SELECT chosen.yes,
           CASE WHEN chosen.yes THEN ceil({read_factor} * %(pool)s / share)::bigint END AS reads
    -- exp() of below -708 is an error in float8 (underflow), not 0.
    FROM (SELECT exp(greatest(-700, sum(ln(
                     least(1, greatest(terms.titles, 0.5) / greatest(corpus.documents, 1))))))
                     AS share, min(terms.titles) * count(*) AS entries
          FROM terms, corpus) AS expected
    CROSS JOIN LATERAL (
        SELECT coalesce(share * entries > %(pool)s * {sequential_cost}::float8, false) AS yes
    ) AS chosen
),
title_read AS MATERIALIZED (
    -- The title matches in the order of their ids, read from the titles' own index
    -- (listing_active_titles) without the full-text one (ts_match_vq is what @@ calls;
    -- called by name, no index can serve it), at most `reads` entries; each match's row
    -- then looked up by its id.
    SELECT {candidate}
    FROM (SELECT t.id
          FROM (SELECT id, title_vector FROM ingestion_listing
                WHERE (SELECT yes FROM common) AND status = 'active'
                  AND audience = %(audience)s
                ORDER BY id LIMIT (SELECT reads FROM common)) AS t, q
          WHERE ts_match_vq(t.title_vector, q.tsq)) AS matched
    CROSS JOIN LATERAL (SELECT * FROM ingestion_listing l WHERE l.id = matched.id) AS l
    WHERE true{showable}
    LIMIT %(pool)s
),
read_enough AS MATERIALIZED (SELECT count(*) >= %(pool)s AS yes FROM title_read),
matching AS MATERIALIZED (
    -- Each listing's BM25 length factor is worked out once (a subquery), then scored.
    -- The title matches: read in order where that filled the pool, else from the index.
    (SELECT l.id, {score_l} AS score, l.starts_at
     FROM (SELECT * FROM title_read WHERE (SELECT yes FROM read_enough)
           UNION ALL
           (SELECT {candidate}
            FROM ingestion_listing l, q
            WHERE NOT (SELECT yes FROM read_enough) AND l.title_vector @@ q.tsq{showable}
            LIMIT %(pool)s)) AS l)
    UNION ALL
    (SELECT l.id, {score_l}, l.starts_at
     FROM (SELECT {candidate}
           FROM ingestion_listing l, q
           WHERE l.search_vector @@ q.tsq AND NOT l.title_vector @@ q.tsq{showable}
           LIMIT %(pool)s) AS l)
    LIMIT %(pool)s
),
found AS (
    -- Each candidate's vector comes with it: reading it again by id was 731 index scans.
    SELECT DISTINCT ON (found.id) found.*
    FROM (SELECT tsq FROM (SELECT * FROM terms ORDER BY idf DESC LIMIT {generators}) AS rarest
          WHERE generates
          UNION ALL (SELECT tsq FROM terms ORDER BY idf DESC LIMIT 1)) AS t
    CROSS JOIN q
    CROSS JOIN LATERAL (
        SELECT {candidate}
        FROM ingestion_listing l
        WHERE l.search_vector @@ t.tsq
          AND coalesce(NOT l.search_vector @@ q.excluded, true){showable}
        LIMIT {per_term}) AS found
    -- One-time filter: with a page of full matches, no term's index is read at all.
    WHERE (SELECT count(*) FROM matching) < %(relax_below)s
      AND NOT EXISTS (SELECT 1 FROM matching m WHERE m.id = found.id)
    ORDER BY found.id
),
partial AS (SELECT l.id, {score_l} AS score, l.starts_at FROM found l)
-- Full matches of a phrase or a negation first (what the query's syntax asks for); among
-- equal scores the sooner event first (a series by its next date, undated last), then the
-- smaller id.
SELECT id, score FROM (
    SELECT id, score, starts_at, true AS every_term FROM matching
    UNION ALL
    SELECT id, score, starts_at, false FROM partial
) AS ranked
ORDER BY {tiers}score DESC, starts_at NULLS LAST, id
LIMIT %(limit)s
"""
# The rarest SLOTS terms are scored inline where each listing is read: a term of weight
# w = repeats x idf x (k1 + 1) adds w (1 - K / (tf + K)), BM25's saturation written with tf
# once, K the listing's length factor; each slot's term and weight are read once per
# statement, and a slot past the query's terms is NULL and costs no call. The rest, only
# for a query with more terms, are scored in a subquery per listing. A subquery for every
# term doubled the stage's p50 at 100,000 listings (2.2 -> 4.6 ms); 8 slots cost 0.15 ms
# more than 4 per 1,000 listings scored.
SLOTS = 4
_SLOT = (
    "coalesce((SELECT weight FROM terms ORDER BY idf DESC, word OFFSET {offset} LIMIT 1)"
    " * (1 - l.k / (ts_rank_cd('{weights}', l.search_vector,"
    " (SELECT tsq FROM terms ORDER BY idf DESC, word OFFSET {offset} LIMIT 1), 0) + l.k)), 0)"
)
_REST = (
    "CASE WHEN (SELECT count(*) FROM terms) > {slots} THEN (SELECT sum(t.weight * (1 - l.k"
    " / (ts_rank_cd('{weights}', l.search_vector, t.tsq, 0) + l.k)))"
    " FROM (SELECT * FROM terms ORDER BY idf DESC, word OFFSET {slots}) AS t) ELSE 0 END"
)


# What each arm reads of a listing it finds, and the conditions it must meet to be shown.
_CANDIDATE = "l.id, l.search_vector, {k} AS k, {next_start} AS starts_at"
_SHOWABLE = " AND l.status = 'active' AND l.audience = %(audience)s{filters}"

_WEBSEARCH = "websearch_to_tsquery('english', %(text)s)"
# Corrected words may each be wrong; any of them matching is enough.
_ANY_OF = "to_tsquery('english', %(text)s)"


_PARAMETERS = ("text", "pool", "limit", "audience", "relax_below", "excluded", "exact_first")


def _prepare(number: int, statement: str) -> tuple[str, str]:
    """Have every pooled connection prepare `statement`; its name and the EXECUTE text
    that stands in for it."""
    name = f"searchsite_lexical_{number}"
    body, execute = numbered(name, statement, _PARAMETERS)
    prepare_on_connect(name, "(text, int, int, text, int, text, boolean)", body)
    return name, execute


def _score(weights: str) -> str:
    """BM25 of the listing `l` (its search_vector and length factor k) for the terms."""
    inline = [_SLOT.format(offset=slot, weights=weights) for slot in range(SLOTS)]
    return " + ".join([*inline, _REST.format(slots=SLOTS, weights=weights)])


def _weighted(ranking: Ranking, lengths: str) -> str:
    """The length in `lengths` (an array per label: title, venue and aliases, description),
    its labels weighted as their terms are. In float8: a literal such as 0.4 is numeric in
    Postgres, and numeric arithmetic per listing cost 0.35 µs a row."""
    title, venue, description = (
        f"{value}::float8" for value in (ranking.title, ranking.venue, ranking.description)
    )
    return f"({title} * {lengths}[1] + {venue} * {lengths}[2] + {description} * {lengths}[3])"


def _length_factor(ranking: Ranking) -> str:
    """BM25's K of the listing `l`: k1 (1 - b + b dl / avgdl)."""
    k1, b = f"{ranking.k1}::float8", f"{ranking.b}::float8"
    length = _weighted(ranking, "l.search_lengths")
    average = "(SELECT avgdl FROM corpus)"
    return f"{k1} * (1 - {b} + {b} * {length} / {average})"


def statements(ranking: Ranking = RANKING, of: Shape = DEFAULT_SHAPE) -> dict[str, str]:
    """The search statement for each tsquery form and the filter shape `of`."""
    # ts_rank_cd's weights are for labels D, C, B, A; D is unused.
    weights = f"{{0,{ranking.description},{ranking.venue},{ranking.title}}}"
    return {
        tsquery: _SEARCH.format(
            tsquery=tsquery,
            max_terms=MAX_TERMS,
            generators=GENERATORS,
            per_term=PER_TERM,
            generator_share=GENERATOR_SHARE,
            sequential_cost=SEQUENTIAL_COST,
            read_factor=READ_FACTOR,
            k1=ranking.k1,
            average_length=_weighted(ranking, "c.average_lengths"),
            score_l=_score(weights),
            candidate=_CANDIDATE.format(k=_length_factor(ranking), next_start=next_start(of)),
            showable=_SHOWABLE.format(filters=conditions(of)),
            tiers="every_term DESC, "
            if ranking.every_term_first
            else "(every_term AND %(exact_first)s) DESC, ",
        )
        for tsquery in (_WEBSEARCH, _ANY_OF)
    }


_statements = cache(statements)
# The default shape is prepared on every connection: it is nearly every search, and it
# binds no filter values.
_PREPARED = {
    tsquery: _prepare(n, statement) for n, (tsquery, statement) in enumerate(_statements().items())
}


@cache
def _prepared_for(tsquery: str, of: Shape, filters: tuple[str, ...]) -> tuple[str, str]:
    """Another shape's statement (binding the filter values named `filters`), prepared by
    a connection the first time it runs it: up to 2 x 2^7 of them, too many for every
    connection to prepare when it opens. Sent as text, one was planned at each search."""
    number = list(_PREPARED).index(tsquery)
    name = f"searchsite_lexical_{number}_{of.key}"
    body, execute = numbered(name, _statements(of=of)[tsquery], _PARAMETERS + filters)
    prepare_when_used(name, body)
    return name, execute


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
        # Partial matches are read only while full ones fill less than a page (k).
        relax_below = min(query.k, limit) if relaxable(query.text) else 0
        found = await self._search(
            _WEBSEARCH,
            query,
            {
                "text": query.text,
                "relax_below": relax_below,
                "excluded": excluded(query.text),
                "exact_first": requires_every_term(query.text),
            },
            limit,
            deadline,
        )
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
        any_of = {"text": " | ".join(quoted), "relax_below": 0, "excluded": None}
        found = await self._search(
            _ANY_OF, query, {**any_of, "exact_first": False}, limit, deadline
        )
        # The query as typed, each misspelt word replaced: what the user is offered.
        suggestion = " ".join(corrections.get(term, term) for term in terms)
        return LexicalResult(found, suggestion if found else None)

    async def _search(
        self,
        tsquery: str,
        query: Query,
        asked: dict[str, object],
        limit: int,
        deadline: Deadline,
    ) -> list[Candidate]:
        """`asked`: the text and how to read it (relax_below, excluded, exact_first)."""
        of = shape(query.filters)
        filters = parameters(query.filters)
        prepared = (
            _PREPARED[tsquery]
            if of == DEFAULT_SHAPE
            else _prepared_for(tsquery, of, tuple(sorted(filters)))
        )
        rows = await fetch_with_local_settings(
            LEXICAL_TAG,
            _statements(of=of)[tsquery],
            {
                **asked,
                "pool": POOL,
                "limit": limit,
                "audience": self.audience,
                **filters,
            },
            deadline,
            # The statement's plan shape never depends on the text, but with partial
            # matches Postgres judged a generic plan dearer than a custom one and planned
            # every execution again (0.46 ms of a 2.7 ms median at 100,000 listings).
            # The titles read in order are read by one process: split among workers,
            # the read would find another pool for the same query.
            local={
                "plan_cache_mode": "force_generic_plan",
                "max_parallel_workers_per_gather": "0",
            },
            prepared=prepared,
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
